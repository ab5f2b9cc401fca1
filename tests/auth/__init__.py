"""AUTH and HELLO as the proxy reads them, and the brake on failing logins."""

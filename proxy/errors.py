"""Every error reply the proxy writes itself, in one place.

Replies that Redis would send (protocol errors) keep Redis's exact text, in `resp.exact`; the ones
here are the proxy's own. Each is a complete RESP error line, ready to write.
"""

from __future__ import annotations

import re


def resp_error(text: str) -> bytes:
    """A RESP error line; CR/LF inside the text would end the line early, so they become spaces."""
    return b"-" + text.replace("\r", " ").replace("\n", " ").encode("utf-8", "replace") + b"\r\n"


def upstream_unavailable(address: str, reason: str) -> bytes:
    return resp_error(f"ERR upstream {address} unavailable: {reason}")


def upstream_lost(address: str, reason: str) -> bytes:
    return resp_error(
        f"ERR upstream {address} connection lost before the reply ({reason}); "
        "the command may or may not have run"
    )


def shutting_down() -> bytes:
    return resp_error("ERR upstream proxy is shutting down")


OK = b"+OK\r\n"


def violation_text(finding) -> str:
    """The text of a policy rejection, without the leading '-': NOPERM is what clients already
    map to a permission error."""
    return f"NOPERM {finding.subject} breaks rule {finding.rule} ({finding.title}): {finding.advice}"


_VIOLATION = re.compile(rb"-NOPERM (.*) breaks rule (\w+) \((.*?)\): (.*)\r\n", re.S)


def parse_violation(reply: bytes):
    """The Finding behind a NOPERM reply a policy script sent, or None."""
    from .policy.base import Finding

    match = _VIOLATION.match(reply)
    if match is None:
        return None
    subject, rule, title, advice = (part.decode("utf-8", "replace") for part in match.groups())
    return Finding(rule, title, subject, advice)


def policy_violation(finding) -> bytes:
    return resp_error(violation_text(finding))


EXECABORT = b"-EXECABORT Transaction discarded because of previous errors.\r\n"

# Redis's own replies, for the AUTH and HELLO the proxy answers when it authenticates clients.
NOAUTH = b"-NOAUTH Authentication required.\r\n"
NOAUTH_HELLO = (b"-NOAUTH HELLO must be called with the client already authenticated, otherwise the "
                b"HELLO AUTH <user> <pass> option can be used to authenticate the client and select the "
                b"RESP protocol version at the same time\r\n")
WRONGPASS = b"-WRONGPASS invalid username-password pair or user is disabled.\r\n"
AUTH_ARITY = b"-ERR wrong number of arguments for 'auth' command\r\n"
SYNTAX = b"-ERR syntax error\r\n"
HELLO_VERSION = b"-ERR Protocol version is not an integer or out of range\r\n"
NOPROTO = b"-NOPROTO unsupported protocol version\r\n"
RESET = b"+RESET\r\n"


def hello_option(option: bytes) -> bytes:
    return resp_error(f"ERR Syntax error in HELLO option '{option.decode('utf-8', 'replace')}'")

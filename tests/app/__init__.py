"""The application assembled: the command line, configuration files, policy hot reload."""

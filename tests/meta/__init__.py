"""The repository's own checks: the linter, and the test helpers' processes."""

"""Compatibility tests: real clients' own test suites run through the proxy."""


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "compat: runs a real client's own test suite directly and through the proxy (minutes)")

"""Every test here runs again with the pure modules (the `compiled_twin` marker, tests/conftest.py)."""

import pytest


def pytest_itemcollected(item):
    item.add_marker(pytest.mark.compiled_twin)

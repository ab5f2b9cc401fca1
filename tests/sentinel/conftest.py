import pytest

from tests.sentinel.group import SentinelGroup


@pytest.fixture
def sentinel_group():
    group = SentinelGroup()
    yield group
    group.close()

"""Fixtures shared by all tests: real redis-server and proxy processes on free ports."""

import pytest

from tests.servers import ProxyProcess, RedisServer


@pytest.fixture(scope="session")
def redis_server():
    server = RedisServer()
    yield server
    server.close()


@pytest.fixture(scope="session")
def proxy(redis_server):
    process = ProxyProcess(redis_server.url)
    yield process
    process.stop()


@pytest.fixture
def own_redis():
    """A redis-server for one test (one that changes the server, or must start clean)."""
    server = RedisServer()
    yield server
    server.close()


@pytest.fixture
def own_proxy(own_redis):
    """The passthrough proxy in front of `own_redis`."""
    process = ProxyProcess(own_redis.url)
    yield process
    process.stop()


@pytest.fixture
def direct(redis_server):
    import redis

    client = redis.Redis(port=redis_server.port)
    yield client
    client.close()


@pytest.fixture
def via_proxy(proxy):
    import redis

    client = redis.Redis(port=proxy.port)
    yield client
    client.close()

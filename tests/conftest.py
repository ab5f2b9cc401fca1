"""Fixtures shared by all tests: real redis-server and proxy processes on free ports."""

import importlib.util
import os

import pytest

from proxy import compiled
from tests.servers import SERVER_VARIABLE, ProxyProcess, RedisServer, redis_server_binary, redis_server_version


def pytest_configure(config):
    """An in-place build of the session core older than its source would be tested instead of
    it (the build shadows the .py): stop at once and say how to rebuild."""
    if compiled.PURE:
        return
    for name in compiled.CORE:
        built = importlib.util.find_spec(name).origin
        if built.endswith(".py"):
            continue
        source = os.path.join(os.path.dirname(built), name.rsplit(".", 1)[1])
        newest = max(os.path.getmtime(source + suffix) for suffix in (".py", ".pxd") if os.path.exists(source + suffix))
        if newest > os.path.getmtime(built):
            pytest.exit(f"{built} is older than its source: rebuild it (./dev test does; or pip install -e .), "
                        "or test the pure modules with REDIS_GUARD_PURE_PYTHON=1", returncode=4)


def pytest_report_header(config):
    """Which redis-server the fixtures start (REDIS_GUARD_TEST_REDIS_SERVER chooses another)."""
    version = redis_server_version()
    shown = ".".join(map(str, version)) if version else "none"
    return f"redis-server: {redis_server_binary()} ({shown}; {SERVER_VARIABLE} names another)"


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

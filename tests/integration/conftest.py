"""Fixtures some integration tests share: a proxy whose policy completes writes with commands of
its own (T1 `inject`), in front of its own redis-server (`t1_proxied`: both), and a client of that
server (`t1_direct`)."""

import pytest
import redis

from tests.servers import RedisServer, policy_proxy

# (the baseline off: these tests compare replies with Redis for commands it denies, CLIENT UNPAUSE...)
T1_INJECT = "name: t1-inject\nrules:\n  C2: {baseline: false}\n  T1: {action: inject, default_ttl: 600}\n"


@pytest.fixture(scope="module")
def t1_proxied(tmp_path_factory):
    server = RedisServer()
    process = policy_proxy(tmp_path_factory.mktemp("t1-inject"), T1_INJECT, server.url)
    yield server, process
    process.stop()
    server.close()


@pytest.fixture
def t1_direct(t1_proxied):
    client = redis.Redis(port=t1_proxied[0].port)
    yield client
    client.close()

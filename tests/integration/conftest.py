"""Fixtures of the integration tests that share them: a proxy whose policy completes writes with
commands of its own (T1 `inject`), in front of its own redis-server (`proxied`), and a client of
that server (`direct`)."""

import pytest
import redis

from tests.servers import RedisServer, policy_proxy

T1_INJECT = "name: t1-inject\nrules:\n  T1: {action: inject, default_ttl: 600}\n"


@pytest.fixture(scope="module")
def proxied(tmp_path_factory):
    server = RedisServer()
    process = policy_proxy(tmp_path_factory.mktemp("t1-inject"), T1_INJECT, server.url)
    yield server, process
    process.stop()
    server.close()


@pytest.fixture
def direct(proxied):
    client = redis.Redis(port=proxied[0].port)
    yield client
    client.close()

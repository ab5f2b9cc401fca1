"""Real Redis Cluster fixtures: `redis_cluster` (module-scoped, 3 masters x 1 replica) and
`small_cluster` (function-scoped, same shape, for tests that kill or reshard nodes); the proxy in
front of a cluster (`proxy_for`, `cluster_proxy`) and a redis-py `client` of it in RESP2 and RESP3."""

import pytest

from tests.cluster.start import proxy_for, start_cluster


@pytest.fixture(scope="module")
def redis_cluster():
    cluster = start_cluster(masters=3, replicas=1)
    yield cluster
    cluster.close()


@pytest.fixture
def small_cluster():
    cluster = start_cluster(masters=3, replicas=1)
    yield cluster
    cluster.close()


@pytest.fixture(scope="module")
def cluster_proxy(redis_cluster):
    process = proxy_for(redis_cluster)
    yield process
    process.stop()


@pytest.fixture(params=[2, 3], ids=["resp2", "resp3"])
def client(cluster_proxy, request):
    redis = pytest.importorskip("redis")
    client = redis.Redis(port=cluster_proxy.port, protocol=request.param, socket_timeout=20)
    yield client
    client.close()

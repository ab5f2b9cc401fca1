"""Real Redis Cluster fixtures: `redis_cluster` (module-scoped, 3 masters x 1 replica) and
`small_cluster` (function-scoped, same shape, for tests that kill or reshard nodes); the proxy in
front of a cluster (`proxy_for`, `cluster_proxy`) and a redis-py `client` of it in RESP2 and RESP3;
`one_node_cluster`, a single node owning every slot, for replies to compare with."""

import pytest

from tests.cluster.start import proxy_for, start_cluster
from tests.servers import wait_for


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
def one_node_cluster():
    """A one-node cluster owning every slot: what Redis answers in cluster mode with every key at hand
    (the expected replies of the proxy in front of `redis_cluster`). Yields the node."""
    cluster = start_cluster(masters=1, replicas=0, join=False)
    node = cluster.nodes[0]
    cluster.command(node, "CLUSTER", "ADDSLOTSRANGE", "0", "16383")
    wait_for(lambda: cluster._state_ok(node), 30, "a one-node cluster owning every slot")
    yield node
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

"""A RedisCluster for a fixture or a test, and the proxy in front of one: skipped, not failed,
where redis-server, redis-cli or redis-py is missing (tests/cluster/nodes.py imports redis-py,
so it is imported here late)."""

import pytest

from tests.servers import ProxyProcess, missing_cluster_tools


def start_cluster(**kwargs):
    """RedisCluster(**kwargs) (see tests/cluster/nodes.py), or a skip; the caller closes it."""
    missing = missing_cluster_tools()
    if missing:
        pytest.skip(f"Redis Cluster tests need {' and '.join(missing)} on PATH "
                    "(apt-get install -y redis-server)")
    pytest.importorskip("redis", reason="Redis Cluster tests need redis-py (pip install redis)")
    from tests.cluster.nodes import RedisCluster

    return RedisCluster(**kwargs)


def proxy_for(cluster, *extra: str, env=None) -> ProxyProcess:
    """The passthrough proxy with `--upstream-cluster` the cluster's nodes; the caller stops it."""
    return ProxyProcess(None, "configs/passthrough.yaml", "--upstream-cluster", cluster.seeds, *extra, env=env)

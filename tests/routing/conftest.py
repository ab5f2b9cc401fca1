"""Fixtures for the routing tests: a real Redis Cluster (3 masters, 1 replica each), a lone
cluster-enabled node with no slots, and the snapshot command table. Skipped without
redis-server and redis-cli."""

import pytest

from proxy.commands import CommandTable

from .cluster import Cluster, ClusterNode, have_redis


def _need_redis() -> None:
    if not have_redis():
        pytest.skip("redis-server / redis-cli not installed")


@pytest.fixture(scope="session")
def table() -> CommandTable:
    return CommandTable.from_snapshot()


@pytest.fixture(scope="session")
def cluster():
    """Shared and read-only: tests that change the topology start their own."""
    _need_redis()
    c = Cluster(masters=3, replicas=1)
    yield c
    c.close()


@pytest.fixture(scope="session")
def lone_node():
    """A cluster-enabled node that owns no slot (CLUSTER KEYSLOT still answers)."""
    _need_redis()
    node = ClusterNode()
    yield node
    node.close()

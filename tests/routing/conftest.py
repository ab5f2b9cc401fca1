"""Fixtures for the routing tests: a real Redis Cluster (3 masters, 1 replica each), a lone
cluster-enabled node with no slots, and the snapshot command table. Skipped without
redis-server, redis-cli and redis-py."""

import pytest

from proxy.commands import CommandTable
from tests.cluster.start import start_cluster


@pytest.fixture(scope="session")
def table() -> CommandTable:
    return CommandTable.from_snapshot()


@pytest.fixture(scope="session")
def cluster():
    """Shared and read-only: tests that change the topology start their own."""
    c = start_cluster(masters=3, replicas=1)
    yield c
    c.close()


@pytest.fixture(scope="session")
def lone_node():
    """A cluster-enabled node that owns no slot (CLUSTER KEYSLOT still answers)."""
    c = start_cluster(masters=1, replicas=0, join=False)
    yield c.nodes[0]
    c.close()

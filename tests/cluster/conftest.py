"""Real Redis Cluster fixtures: `redis_cluster` (module-scoped, 3 masters x 1 replica) and
`small_cluster` (function-scoped, same shape, for tests that kill or reshard nodes)."""

import pytest

from tests.cluster.start import start_cluster


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

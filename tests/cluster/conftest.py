"""Real Redis Cluster fixtures: `redis_cluster` (module-scoped, 3 masters x 1 replica) and
`small_cluster` (function-scoped, same shape, for tests that kill or reshard nodes)."""

import shutil

import pytest

MISSING = [tool for tool in ("redis-server", "redis-cli") if shutil.which(tool) is None]


def _cluster():
    if MISSING:
        pytest.skip(f"Redis Cluster tests need {' and '.join(MISSING)} on PATH "
                    "(apt-get install -y redis-server)")
    pytest.importorskip("redis", reason="Redis Cluster tests need redis-py (pip install redis)")
    from tests.cluster.cluster import RedisCluster

    return RedisCluster(masters=3, replicas=1)


@pytest.fixture(scope="module")
def redis_cluster():
    cluster = _cluster()
    yield cluster
    cluster.close()


@pytest.fixture
def small_cluster():
    cluster = _cluster()
    yield cluster
    cluster.close()

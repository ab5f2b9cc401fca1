"""Rule C6 `scripts: approved` in front of a Redis Cluster: the approved library is loaded on every
master at start, and redis-py's `Lock` works through every shipped preset on keys of every master,
even after each master's script cache was emptied (an approved EVALSHA is sent as EVAL of its body)."""

from __future__ import annotations

import os

import pytest
import redis

from tests.cluster.start import proxy_for
from tests.policy.test_c6_approved import PRESETS, RELEASE_SHA
from tests.servers import REPO

# Keys each preset accepts for a lock, {n} a number that moves them between slots.
LOCK_KEYS = {"lowercase-colon": "user:lock:id:{n}", "key-value-design": "users:lock:{n}",
             "camelcase-namespace": "userAdmin:lock:id:{n}", "strict-dotted": "user:basic.lock:{n}:string",
             "key-schema": None, "applications": "shop:order:lock:{n}"}


def keys_on_every_master(cluster, name):
    if LOCK_KEYS[name] is None:  # key-schema: its only string keys are the two counters
        return ["global:book", "global:film"]
    found = {}
    masters = {node.port for node in cluster.masters()}
    for n in range(1, 500):
        key = LOCK_KEYS[name].format(n=n)
        found.setdefault(cluster.master_for_key(key).port, key)
        if set(found) == masters:
            break
    assert set(found) == masters
    return list(found.values())


@pytest.mark.parametrize("name", PRESETS)
def test_redis_py_lock_through_every_preset_on_every_master(name, redis_cluster):
    process = proxy_for(redis_cluster, "--policy", os.path.join(REPO, "configs", "policies", f"{name}.yaml"))
    auth = {"username": "checkout", "password": "checkout-secret"} if name == "applications" else {}
    client = redis.Redis(port=process.port, socket_timeout=20, **auth)
    try:
        assert "approved scripts: 3 scripts and 0 function libraries loaded on" in process.log
        for master in redis_cluster.masters():
            assert redis_cluster.command(master, "SCRIPT", "EXISTS", RELEASE_SHA) == [1], master
            redis_cluster.command(master, "SCRIPT", "FLUSH")
        for key in keys_on_every_master(redis_cluster, name):
            lock = client.lock(key, timeout=10)
            assert lock.acquire(blocking=False), key
            assert lock.extend(5), key
            assert lock.reacquire(), key
            lock.release()
            assert redis_cluster.client(redis_cluster.master_for_key(key)).exists(key) == 0
        with pytest.raises(redis.exceptions.NoPermissionError, match="rule C6"):
            client.eval("redis.call('SET', 'BadKey NoTTL', 'x')", 0)
    finally:
        client.close()
        process.stop()

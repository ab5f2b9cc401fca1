"""Keyless commands that concern every node, through the proxy in front of a real 3-master
cluster: sent to every master and merged (`cluster/keyspace.py`), checked on each node directly;
and the proxy's one face, a standalone server (INFO, CLUSTER ...)."""

import pytest

redis = pytest.importorskip("redis")

SCRIPT = "return redis.call('GET', KEYS[1])"
LIBRARY = "#!lua name=facelib\nredis.register_function('faceget', function(keys) return redis.call('GET', keys[1]) end)"


def _keys_on_every_master(redis_cluster, prefix: str) -> list[str]:
    """One key per master."""
    found = {}
    for i in range(1000):
        key = f"{prefix}:{i}"
        found.setdefault(redis_cluster.master_for_key(key).port, key)
        if len(found) == len(redis_cluster.masters()):
            return list(found.values())
    raise AssertionError("no key found for every master")


def test_script_load_then_evalsha_on_every_master(client, redis_cluster):
    client.script_flush()
    sha = client.script_load(SCRIPT)
    for node in redis_cluster.masters():
        assert redis_cluster.client(node).script_exists(sha) == [True]
    keys = _keys_on_every_master(redis_cluster, "evalsha")
    for key in keys:
        client.set(key, key)
        assert client.evalsha(sha, 1, key) in (key.encode(), key)


def test_script_exists_is_true_only_where_every_master_has_it(client, redis_cluster):
    client.script_flush()
    sha = client.script_load(SCRIPT)
    other = redis_cluster.client(redis_cluster.masters()[1]).script_load("return 2")
    assert client.script_exists(sha, other, "0" * 40) == [True, False, False]
    assert client.script_flush() is True
    for node in redis_cluster.masters():
        assert redis_cluster.client(node).script_exists(sha) == [False]
    assert client.script_exists(sha) == [False]


def test_function_load_then_fcall_on_every_master(client, redis_cluster):
    client.function_flush()
    assert client.function_load(LIBRARY) in (b"facelib", "facelib")
    for node in redis_cluster.masters():
        libraries = redis_cluster.client(node).function_list()
        assert len(libraries) == 1
    for key in _keys_on_every_master(redis_cluster, "fcall"):
        client.set(key, "v")
        assert client.fcall("faceget", 1, key) in (b"v", "v")
    assert len(client.function_list()) == 1  # one server's view: the library once
    assert client.function_delete("facelib") in (True, b"OK", "OK")
    for node in redis_cluster.masters():
        assert redis_cluster.client(node).function_list() == []


def test_config_set_reaches_every_master(client, redis_cluster):
    before = client.config_get("maxmemory-samples")["maxmemory-samples"]
    try:
        assert client.config_set("maxmemory-samples", "7") is True
        for node in redis_cluster.masters():
            assert redis_cluster.client(node).config_get("maxmemory-samples")["maxmemory-samples"] in ("7", b"7")
        assert client.config_get("maxmemory-samples")["maxmemory-samples"] in ("7", b"7")
    finally:
        client.config_set("maxmemory-samples", before)


def test_slowlog_of_every_master(client, redis_cluster):
    masters = redis_cluster.masters()
    before = [redis_cluster.client(node).config_get("slowlog-log-slower-than")["slowlog-log-slower-than"]
              for node in masters]
    try:
        client.config_set("slowlog-log-slower-than", "0")
        assert client.slowlog_reset() is True
        for key in _keys_on_every_master(redis_cluster, "slow"):
            client.set(key, "v")
        counts = [redis_cluster.client(node).slowlog_len() for node in masters]
        assert all(count >= 1 for count in counts)
        client.config_set("slowlog-log-slower-than", "-1")  # (nothing more logged while counting)
        counts = [redis_cluster.client(node).slowlog_len() for node in masters]
        assert client.slowlog_len() == sum(counts)
        entries = client.slowlog_get(-1)
        assert len(entries) == sum(counts)
        assert [entry["start_time"] for entry in entries] == sorted(
            (entry["start_time"] for entry in entries), reverse=True)
        assert len(client.slowlog_get(2)) == 2
    finally:
        for node, value in zip(masters, before, strict=True):
            redis_cluster.client(node).config_set("slowlog-log-slower-than", value)


def test_dbsize_and_info_keyspace_summed(client, redis_cluster):
    client.flushall()
    keys = [f"size:{i}" for i in range(40)]
    for key in keys:
        client.set(key, "v")
    client.expire(keys[0], 1000)
    assert client.dbsize() == 40
    keyspace = client.info("keyspace")
    assert keyspace["db0"]["keys"] == 40
    assert keyspace["db0"]["expires"] == 1


def test_one_face_a_standalone_server(client, redis_cluster):
    assert client.info("cluster") == {"cluster_enabled": 0}
    assert client.info()["cluster_enabled"] == 0
    hello = client.execute_command("HELLO")
    if isinstance(hello, list):
        hello = dict(zip(hello[::2], hello[1::2], strict=True))
    assert {key.decode() if isinstance(key, bytes) else key: value for key, value in hello.items()}["mode"] in (
        b"standalone", "standalone")
    for command in (("CLUSTER", "SLOTS"), ("CLUSTER", "NODES"), ("CLUSTER", "SHARDS"), ("CLUSTER", "INFO"),
                    ("CLUSTER", "MYID"), ("CLUSTER", "HELP")):
        with pytest.raises(redis.ResponseError, match="^This instance has cluster support disabled$"):
            client.execute_command(*command)
    with pytest.raises(redis.ResponseError, match="wrong number of arguments for 'cluster|keyslot'"):
        client.execute_command("CLUSTER", "KEYSLOT")


def test_redis_py_lock_on_every_master(client, redis_cluster):
    """redis-py's Lock loads its scripts once and calls them by SHA, on whatever master owns the
    lock's key."""
    client.script_flush()
    for name in _keys_on_every_master(redis_cluster, "lock"):
        lock = client.lock(name, timeout=10)
        assert lock.acquire(blocking=False)
        assert lock.extend(5)
        assert lock.owned()
        lock.release()
        assert not client.exists(name)

"""The cluster fixture itself: topology, MOVED/ASK, resharding, failover, teardown."""

import os

import pytest

redis = pytest.importorskip("redis", reason="Redis Cluster tests need redis-py (pip install redis)")

from tests.cluster.nodes import BUS_OFFSET, SLOTS  # noqa: E402  (imports redis)


def test_cluster_comes_up(redis_cluster):
    cluster = redis_cluster
    assert len(cluster.nodes) == 6
    masters, replicas = cluster.masters(), cluster.replicas()
    assert len(masters) == 3 and len(replicas) == 3
    for node in cluster.nodes:
        assert node.alive and node.pid and len(node.node_id) == 40
        assert node.port != 6379 and node.port + BUS_OFFSET < 65536
        assert cluster.command(node, "CLUSTER", "INFO").count("cluster_state:ok") == 1
    for master in masters:
        assert len(cluster.replicas(of=master)) == 1
    for replica in replicas:
        assert cluster.command(replica, "INFO", "replication")["master_link_status"] == "up"
    owned = sum(hi - lo + 1 for shard in cluster.shards() for lo, hi in shard["slots"])
    assert owned == SLOTS
    assert cluster.seeds == ",".join(f"127.0.0.1:{n.port}" for n in cluster.nodes)


def test_key_on_its_master_and_moved_elsewhere(redis_cluster):
    cluster = redis_cluster
    owner = cluster.master_for_key("fixture:key")
    assert owner.is_master
    cluster.client(owner).set("fixture:key", "v1")
    assert cluster.client(owner).get("fixture:key") == b"v1"

    other = cluster.node_for_key_not_owning("fixture:key")
    with pytest.raises(redis.exceptions.MovedError) as moved:
        cluster.client(other).get("fixture:key")
    slot = cluster.keyslot("fixture:key")
    assert str(moved.value) == f"{slot} 127.0.0.1:{owner.port}"


def test_migrate_slot_with_interleaved_writes(redis_cluster):
    cluster = redis_cluster
    keys = [f"{{mig}}:{i}" for i in range(250)]
    slot = cluster.keyslot(keys[0])
    src = cluster.master_for_key(keys[0])
    dst = next(n for n in cluster.masters() if n is not src)
    src_client, dst_client = cluster.client(src), cluster.client(dst)
    src_client.mset({k: k for k in keys})

    cluster.begin_migration(slot, src, dst)
    assert cluster.move_keys(slot, src, dst, keys_batch=40, limit=100) == 100
    on_dst = set(cluster.keys_in_slot(dst, slot, 1000))
    assert len(on_dst) == 100
    gone, still = next(iter(on_dst)), next(k for k in keys if k not in on_dst)

    # src still serves what it has, sends ASK for what moved (and for new keys)
    assert src_client.get(still) == still.encode()
    with pytest.raises(redis.exceptions.AskError) as ask:
        src_client.get(gone)
    assert str(ask.value) == f"{slot} 127.0.0.1:{dst.port}"
    with pytest.raises(redis.exceptions.AskError):
        src_client.set("{mig}:new", "written during migration")
    # dst refuses without ASKING, serves and accepts writes with it
    with pytest.raises(redis.exceptions.MovedError):
        dst_client.get(gone)
    pipe = dst_client.pipeline(transaction=False)
    pipe.execute_command("ASKING").get(gone).execute_command("ASKING")
    pipe.set("{mig}:new", "written during migration")
    assert pipe.execute() == [True, gone.encode(), True, True]

    assert cluster.move_keys(slot, src, dst, keys_batch=40) == 150
    cluster.finish_migration(slot, src, dst)

    assert cluster.keys_in_slot(src, slot) == []
    assert len(cluster.keys_in_slot(dst, slot, 1000)) == 251
    assert dst_client.mget(keys) == [k.encode() for k in keys]
    assert dst_client.get("{mig}:new") == b"written during migration"
    for node in cluster.nodes:  # every node's CLUSTER SHARDS names dst
        assert cluster.owner_of_slot(slot, via=node) is dst
    assert cluster.master_for_key(keys[0]) is dst
    with pytest.raises(redis.exceptions.MovedError):
        src_client.get(keys[0])


def test_migrate_slot_in_one_call(redis_cluster):
    cluster = redis_cluster
    slot = cluster.keyslot("{one}")
    src = cluster.master_for_key("{one}")
    dst = next(n for n in cluster.masters() if n is not src)
    cluster.client(src).mset({f"{{one}}:{i}": i for i in range(30)})
    assert cluster.migrate_slot(slot, src, dst, keys_batch=7) == 30
    assert cluster.owner_of_slot(slot) is dst
    assert cluster.client(dst).get("{one}:29") == b"29"

    back = cluster.client(src)  # and back again, with the context-manager form
    with cluster.migration(slot, dst, src, keys_batch=7):
        assert cluster.move_keys(slot, dst, src, limit=10) == 10
        assert len(cluster.keys_in_slot(src, slot)) == 10
    assert cluster.owner_of_slot(slot) is src
    assert back.mget([f"{{one}}:{i}" for i in range(30)]) == [str(i).encode() for i in range(30)]


def test_kill_master_fails_over_to_replica(small_cluster):
    cluster = small_cluster
    old = cluster.master_for_key("durable")
    (replica,) = cluster.replicas(of=old)
    client = cluster.client(old)
    client.set("durable", "before the kill")
    assert client.execute_command("WAIT", 1, 1000) == 1

    cluster.kill(old)
    assert not old.alive and old.process.returncode is not None
    new = cluster.wait_for_failover(old, timeout=30)

    assert new is replica and new.is_master
    assert cluster.master_for_key("durable") is new
    assert cluster.client(new).get("durable") == b"before the kill"
    assert old not in cluster.masters() and len(cluster.masters()) == 3
    for node in cluster.nodes:
        if node.alive:
            assert "cluster_state:ok" in cluster.command(node, "CLUSTER", "INFO")
    assert f"127.0.0.1:{old.port}" not in cluster.seeds.split(",")  # seeds name live nodes only

    # the old master comes back as a replica of its replacement
    cluster.restart(old)
    assert old.alive and old.role == "replica" and old.master_id == new.node_id
    pipe = cluster.client(old).pipeline(transaction=False)
    assert pipe.execute_command("READONLY").get("durable").execute() == [True, b"before the kill"]

    # close() ends every process it started and removes its directory (and may be called twice)
    directory, processes = cluster.dir, [n.process for n in cluster.nodes]
    cluster.close()
    assert all(p.returncode is not None for p in processes)
    assert not os.path.exists(directory)


def test_paused_master_fails_over_and_rejoins_as_replica(small_cluster):
    cluster = small_cluster
    old = cluster.master_for_key("hung")
    cluster.client(old).set("hung", "x")
    assert cluster.client(old).execute_command("WAIT", 1, 1000) == 1

    cluster.pause(old)
    assert old.running and not old.alive
    assert f"127.0.0.1:{old.port}" not in cluster.seeds.split(",")
    new = cluster.wait_for_failover(old, timeout=30)
    assert cluster.client(new).get("hung") == b"x"

    cluster.resume(old)
    cluster.wait_ready(30, masters=3, replicas=3)
    assert old.alive and old.role == "replica" and old.master_id == new.node_id

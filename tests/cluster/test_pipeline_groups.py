"""Pipelines whose commands go to several masters, through the proxy: each stretch leaves as one
request per master and its replies come back in the client's order (proxy/backends/cluster/scatter.py).
Driven by redis-py pipelines (transaction=False) in plain mode; every reply is checked in its
position and every key on the node that owns it, including while a slot migrates (MOVED/ASK
inside a stretch) and when a master dies with part of a stretch in flight."""

import signal
import socket
import threading
import time

import hiredis
import pytest

redis = pytest.importorskip("redis")

from tests.cluster.start import proxy_for  # noqa: E402
from tests.servers import parse_all  # noqa: E402


def _owners(cluster, keys):
    return {key: cluster.master_for_key(key) for key in keys}


def test_stretch_over_every_master_in_order(client, redis_cluster):
    keys = [f"grp:{i}" for i in range(120)]
    owners = _owners(redis_cluster, keys)
    assert len({node.port for node in owners.values()}) == 3
    client.delete(*keys, *(f"{key}:n" for key in keys))
    pipe = client.pipeline(transaction=False)
    expected = []
    for i, key in enumerate(keys):
        pipe.set(key, f"v{i}")
        pipe.incr(f"{key}:n")
        pipe.get(key)
        expected += [True, 1, f"v{i}".encode()]
        if i == 40:  # a split command and keyless ones inside the stretch
            pipe.mget(keys[:30])
            pipe.ping()
            pipe.echo("between")
            expected += [[f"v{j}".encode() for j in range(30)], True, b"between"]
    assert pipe.execute() == expected
    for i, key in enumerate(keys):  # on the node that owns it
        assert redis_cluster.client(owners[key]).get(key) == f"v{i}".encode()


def test_stretch_with_a_big_reply_streams_in_order(client, redis_cluster):
    big = b"x" * (3 << 20)  # larger than the Scatter's flush size and the client buffer limit
    keys = [f"grpbig:{i}" for i in range(30)]
    client.set(keys[7], big)
    pipe = client.pipeline(transaction=False)
    for i, key in enumerate(keys):
        if i != 7:
            pipe.set(key, i)
    for key in keys:
        pipe.get(key)
    replies = pipe.execute()
    assert replies[:29] == [True] * 29
    assert replies[29:] == [big if i == 7 else str(i).encode() for i in range(30)]


def test_keys_written_by_many_clients_at_once(cluster_proxy, redis_cluster):
    """Several clients pipelining at once share the masters' connections: each gets its own
    replies, in its order."""
    failures = []

    def work(name):
        client = redis.Redis(port=cluster_proxy.port, socket_timeout=20)
        for round_ in range(20):
            pipe = client.pipeline(transaction=False)
            for i in range(50):
                pipe.set(f"grpc:{name}:{i}", f"{name}-{round_}-{i}")
                pipe.get(f"grpc:{name}:{i}")
            replies = pipe.execute()
            want = [x for i in range(50) for x in (True, f"{name}-{round_}-{i}".encode())]
            if replies != want:
                failures.append((name, round_))
        client.close()

    threads = [threading.Thread(target=work, args=(f"c{n}",)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert failures == []


def _asking_calls(node_client) -> int:
    return int(node_client.info("commandstats").get("cmdstat_asking", {}).get("calls", 0))


def test_stretch_during_slot_migration(small_cluster):
    cluster = small_cluster
    proxy = proxy_for(cluster)
    try:
        client = redis.Redis(port=proxy.port, socket_timeout=20)
        slot = cluster.keyslot("{grpmig}")
        src = cluster.owner_of_slot(slot)
        dst = next(m for m in cluster.masters() if m is not src)
        moving = [f"{{grpmig}}:{i}" for i in range(40)]
        others = [f"grpo:{i}" for i in range(40)]
        assert len({cluster.master_for_key(k).port for k in others}) == 3
        client.mset({key: f"old-{key}" for key in moving})
        cluster.begin_migration(slot, src, dst)
        assert cluster.move_keys(slot, src, dst, keys_batch=20, limit=20) == 20
        asking_before = _asking_calls(cluster.client(dst))

        # Half the slot's keys are on dst (ASK), new keys are created there (ASK), the rest
        # are answered by src; each stretch also has keys on every master.
        pipe = client.pipeline(transaction=False)
        expected = []
        for key, other in zip(moving, others):
            pipe.get(key).set(other, key).set(f"{key}:new", other).get(other)
            expected += [f"old-{key}".encode(), True, True, key.encode()]
        assert pipe.execute() == expected
        assert _asking_calls(cluster.client(dst)) - asking_before >= 20 + 40

        cluster.move_keys(slot, src, dst, keys_batch=200)
        cluster.finish_migration(slot, src, dst)
        # The proxy's map still names src: MOVED inside the stretch, then the new map.
        pipe = client.pipeline(transaction=False)
        for key, other in zip(moving, others):
            pipe.get(other).incr(f"{key}:count").get(f"{key}:new")
        assert pipe.execute() == [x for key, other in zip(moving, others) for x in (key.encode(), 1, other.encode())]
        on_dst = cluster.client(dst)
        assert on_dst.mget(moving) == [f"old-{key}".encode() for key in moving]
        assert on_dst.mget([f"{key}:new" for key in moving]) == [other.encode() for other in others]
        assert cluster.keys_in_slot(src, slot, 10) == []
    finally:
        proxy.stop()


def test_master_dying_gives_the_replies_before_its_part_then_closes_the_client(small_cluster):
    """A master dies with its part of a stretch in flight: the client gets every reply before
    that part's first command, then its connection closes (its libraries reconnect); commands
    of a dead master may or may not have run, and no reply could say so."""
    cluster = small_cluster
    proxy = proxy_for(cluster)
    try:
        client = redis.Redis(port=proxy.port, socket_timeout=30)
        keys = [f"grpdie:{i}" for i in range(60)]
        owners = _owners(cluster, keys)
        victim = cluster.masters()[0]
        on_victim = {key for key in keys if owners[key] is victim}
        assert on_victim and len(on_victim) < len(keys)
        client.mset({key: key for key in keys})  # every master's connection is open

        cluster.pause(victim)  # it takes the requests and answers nothing
        sock = socket.create_connection(("127.0.0.1", proxy.port))
        sock.sendall(b"".join(hiredis.pack_command(("GET", key)) for key in keys))
        time.sleep(0.5)
        cluster.kill(victim, signal.SIGKILL)  # dies with its part of the stretch in flight
        sock.settimeout(30)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
        sock.close()
        first = next(i for i, key in enumerate(keys) if key in on_victim)
        assert parse_all(received) == [key.encode() for key in keys[:first]]

        # The proxy has no connection to the dead master now: the next stretch's part for it
        # waits for the failover (parked), then goes to the promoted replica.
        pipe = client.pipeline(transaction=False)
        for key in keys:
            pipe.set(key, f"after-{key}")
        for key in keys:
            pipe.get(key)
        replies = pipe.execute()
        assert replies == [True] * len(keys) + [f"after-{key}".encode() for key in keys]
        promoted = cluster.wait_for_failover(victim, timeout=30)
        assert cluster.client(promoted).get(sorted(on_victim)[0]) == f"after-{sorted(on_victim)[0]}".encode()
    finally:
        proxy.stop()

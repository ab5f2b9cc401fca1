"""The proxy in front of a real Redis Cluster (3 masters x 1 replica), driven by redis-py in
plain (non-cluster) mode, as an application configured with one Redis URL would."""

import socket
import threading
import time

import pytest

redis = pytest.importorskip("redis")

from tests.cluster.start import proxy_for  # noqa: E402
from tests.servers import ProxyProcess, exchange, read_until_quiet  # noqa: E402

KEYS = [f"user:{i}" for i in range(60)]


def test_keys_land_on_their_owner(client, redis_cluster):
    for key in KEYS:
        client.set(key, key)
    owners = set()
    for key in KEYS:
        owner = redis_cluster.master_for_key(key)
        owners.add(owner.port)
        assert redis_cluster.client(owner).get(key) == key.encode()  # checked on the node itself
    assert len(owners) == 3
    assert [client.get(key) for key in KEYS] == [key.encode() for key in KEYS]


def test_cross_slot_multi_key_commands(client, redis_cluster):
    keys = [f"mk:{i}" for i in range(30)]
    assert len({redis_cluster.keyslot(key) for key in keys}) > 20
    assert client.mset({key: f"v{i}" for i, key in enumerate(keys)}) is True
    assert client.mget(keys + ["mk:missing"]) == [f"v{i}".encode() for i in range(30)] + [None]
    assert client.exists(*keys, "mk:missing") == 30
    assert client.touch(*keys[:10]) == 10
    assert client.delete(*keys[:20]) == 20
    assert client.unlink(*keys[20:], "mk:missing") == 10
    assert client.mget(keys) == [None] * 30
    with pytest.raises(redis.ResponseError, match="hash to the same slot"):
        client.msetnx({"mk:a": 1, "mk:b": 2, "mk:c": 3})
    with pytest.raises(redis.ResponseError, match="hash to the same slot"):
        client.sunionstore("mk:dst", ["mk:a", "mk:b", "mk:c"])
    client.delete("{mk}:a", "{mk}:b")
    assert client.msetnx({"{mk}:a": 1, "{mk}:b": 2}) is True  # one slot: as Redis


def test_pipeline_across_masters_keeps_order(client):
    pipe = client.pipeline(transaction=False)
    for i in range(300):
        pipe.set(f"pipe:{i}", i)
        pipe.incr(f"pipe:{i}")
        pipe.get(f"pipe:{i}")
    replies = pipe.execute()
    assert replies == [x for i in range(300) for x in (True, i + 1, str(i + 1).encode())]


def test_scan_loop_sees_every_key_once(client, redis_cluster):
    client.flushall()
    keys = {f"scan:{i}".encode() for i in range(500)}
    client.mset({key: 1 for key in keys})
    seen = []
    cursor = 0
    for _ in range(2000):
        cursor, page = client.scan(cursor, match="scan:*", count=50)
        seen += page
        if cursor == 0:
            break
    assert cursor == 0
    assert len(seen) == len(set(seen)) == 500 and set(seen) == keys
    assert client.dbsize() == 500
    assert sum(redis_cluster.client(m).dbsize() for m in redis_cluster.masters()) == 500
    assert client.randomkey() in keys
    assert sorted(client.keys("scan:1?")) == sorted(k for k in keys if len(k) == 7 and k.startswith(b"scan:1"))
    assert client.flushall() is True
    assert client.dbsize() == 0 and client.randomkey() is None


def test_scan_rejects_a_foreign_cursor(client):
    with pytest.raises(redis.ResponseError, match="invalid cursor"):
        client.scan(1023)


def test_transaction_pinned_to_its_slot(client):
    pipe = client.pipeline(transaction=True)
    pipe.set("{acct:1}:balance", 10).incrby("{acct:1}:balance", 5).get("{acct:1}:balance")
    assert pipe.execute() == [True, 15, b"15"]
    pipe = client.pipeline(transaction=True)
    pipe.set("{acct:1}:balance", 0).set("acct:2", 1)
    with pytest.raises(redis.exceptions.ResponseError) as excinfo:
        pipe.execute()
    assert "same slot" in str(excinfo.value) or "EXECABORT" in str(excinfo.value)
    assert client.get("{acct:1}:balance") == b"15"  # nothing of the aborted transaction ran
    assert client.get("acct:2") is None


def test_multi_sent_alone_then_keys(cluster_proxy):
    conn = redis.Redis(port=cluster_proxy.port, protocol=2).connection_pool.get_connection()
    conn.send_command("MULTI")
    assert conn.read_response() == b"OK"
    conn.send_command("PING")
    assert conn.read_response() == b"QUEUED"
    conn.send_command("SET", "alone:k", "v")
    assert conn.read_response() == b"QUEUED"
    conn.send_command("EXEC")
    assert conn.read_response() == [b"PONG", b"OK"]
    conn.send_command("GET", "alone:k")
    assert conn.read_response() == b"v"


@pytest.mark.parametrize("payload, reply", [
    (b"MULTI\r\nPING\r\nEXEC\r\nPING\r\n", b"+OK\r\n+QUEUED\r\n*1\r\n+PONG\r\n+PONG\r\n"),
    (b"MULTI\r\nEXEC\r\nPING\r\n", b"+OK\r\n*0\r\n+PONG\r\n"),
])
def test_a_transaction_without_keys(cluster_proxy, payload, reply):
    assert exchange(cluster_proxy.port, payload, timeout=5, settle=0.3) == (reply, False)


def test_keys_in_a_transaction_runs_where_its_patterns_hash_tag_is(client, redis_cluster):
    """Inside MULTI, KEYS cannot go to every master: a pattern whose hash tag names a slot runs
    on that slot's owner, whichever master the transaction would have picked without it."""
    tags = {}  # one hash tag per master
    for n in range(200):
        tags.setdefault(redis_cluster.master_for_key(f"{{ktx{n}}}").port, f"ktx{n}")
    assert len(tags) == 3
    for tag in tags.values():
        keys = sorted(f"{{{tag}}}:{c}".encode() for c in "abc")
        client.set(keys[0], 1), client.set(keys[1], 2), client.set(keys[2], 3)
        pipe = client.pipeline(transaction=True)
        pipe.keys(f"{{{tag}}}:?")
        assert sorted(pipe.execute()[0]) == keys, tag
    # A pattern of another slot than the transaction's is a key of another slot: CROSSSLOT.
    first, second = list(tags.values())[:2]
    pipe = client.pipeline(transaction=True)
    pipe.set(f"{{{first}}}:a", 4).keys(f"{{{second}}}:*")
    with pytest.raises(redis.exceptions.ResponseError, match="EXECABORT|same slot"):
        pipe.execute()
    assert client.get(f"{{{first}}}:a") == b"1"  # nothing of the aborted transaction ran


def test_watch_aborts_on_change(client, cluster_proxy):
    other = redis.Redis(port=cluster_proxy.port)
    client.set("watched", 1)
    with client.pipeline(transaction=True) as pipe:
        pipe.watch("watched")
        assert pipe.get("watched") == b"1"
        other.set("watched", 2)
        pipe.multi()
        pipe.set("watched", 3)
        with pytest.raises(redis.WatchError):
            pipe.execute()
    assert client.get("watched") == b"2"


def test_blocking_command_on_the_key_owner(client, cluster_proxy):
    client.delete("jobs")
    threading.Timer(0.3, lambda: redis.Redis(port=cluster_proxy.port).rpush("jobs", "j1")).start()
    started = time.monotonic()
    assert tuple(client.blpop("jobs", timeout=5)) == (b"jobs", b"j1")
    assert 0.2 < time.monotonic() - started < 4
    assert client.set("after:block", 1) is True and client.get("after:block") == b"1"


def test_connection_state_answered_for_one_server(client):
    assert client.ping() is True
    assert client.client_setname("worker-1") is True
    assert client.client_getname() == "worker-1" or client.client_getname() == b"worker-1"
    assert isinstance(client.client_id(), int)
    hello = client.execute_command("HELLO")
    assert hello[b"mode"] if isinstance(hello, dict) and b"mode" in hello else True
    for name in ("READONLY", "READWRITE", "ASKING"):  # as a server without cluster support
        with pytest.raises(redis.ResponseError, match="cluster support disabled"):
            client.execute_command(name)
    assert client.info("server")["redis_version"]


def test_ping_goes_to_a_master(client, redis_cluster):
    """PING is Redis's to answer, as any keyless read (BUSY during a long script, counted there)."""
    masters = redis_cluster.masters()  # (the fixture checks its own connections with PING)

    def pings() -> int:
        found = 0
        for node in masters:
            with redis.Redis(port=node.port) as direct:
                found += direct.info("commandstats").get("cmdstat_ping", {}).get("calls", 0)
        return found

    assert client.get("ping:warm") is None and client.ping() is True
    before = pings()
    for _ in range(3):
        assert client.ping() is True
    assert pings() >= before + 3
    before = pings()
    with client.pipeline(transaction=False) as pipe:  # (in a pipeline, with its run)
        assert pipe.ping().set("ping:k", "v").ping().get("ping:k").execute() == [True, True, True, b"v"]
    assert pings() >= before + 2


def test_pubsub_and_sharded_pubsub(cluster_proxy):
    subscriber = redis.Redis(port=cluster_proxy.port).pubsub()
    subscriber.subscribe("news")
    assert subscriber.get_message(timeout=2)["type"] == "subscribe"
    publisher = redis.Redis(port=cluster_proxy.port)
    deadline = time.monotonic() + 5
    received = None
    while received is None and time.monotonic() < deadline:
        publisher.publish("news", "hello")
        received = subscriber.get_message(timeout=0.5)
    assert received["data"] == b"hello"
    subscriber.close()

    sharded = redis.Redis(port=cluster_proxy.port).pubsub()
    sharded.ssubscribe("shard:chan")
    assert sharded.get_sharded_message(timeout=2)["type"] == "ssubscribe"
    assert publisher.spublish("shard:chan", "hi") == 1
    message = sharded.get_sharded_message(timeout=2)
    assert message["data"] == b"hi"
    sharded.close()


def test_wait_counts_replicas_of_every_master(client):
    for key in KEYS[:10]:
        client.set(key, "w")
    assert client.wait(1, 2000) == 1


def test_policy_applies_in_cluster_mode(redis_cluster, tmp_path):
    process = proxy_for(redis_cluster, "--policy", "configs/policies/strict-dotted.yaml")
    try:
        client = redis.Redis(port=process.port)
        with pytest.raises(redis.exceptions.NoPermissionError, match="K"):
            client.set("UserProfile", "x", ex=60)
        with pytest.raises(redis.exceptions.NoPermissionError, match="C1"):
            client.keys("*")
        with pytest.raises(redis.exceptions.NoPermissionError, match="T1"):
            client.set("user.profile:1:string", "x")
        assert client.set("user.profile:1:string", "x", ex=60) is True
        assert 0 < client.ttl("user.profile:1:string") <= 60
    finally:
        process.stop()


def test_a_shadow_policy_counts_in_cluster_mode(redis_cluster, tmp_path):
    """The cluster session's hook: the candidate counts what it would reject, rewrite or audit,
    under its own name, and the traffic is the enforcing policy's (keys on several masters)."""
    import urllib.request

    from tests.servers import free_port

    candidate = tmp_path / "candidate.yaml"
    candidate.write_text("name: cluster-candidate\nrules:\n  T1: {action: reject}\n  C4: {}\n")
    port = free_port()
    process = proxy_for(redis_cluster, "--policy", "configs/policies/lowercase-colon.yaml",
                        "--shadow-policy", str(candidate), "--metrics", f"127.0.0.1:{port}")
    try:
        client = redis.Redis(port=process.port)
        pipe = client.pipeline(transaction=False)
        for key in KEYS[:20]:
            pipe.set(key, "v")
        assert pipe.execute() == [True] * 20
        assert client.delete(*KEYS[:20]) == 20

        def count(rule: str, outcome: str) -> float:
            body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
            return sum(float(line.rsplit(" ", 1)[1]) for line in body.splitlines()
                       if line.startswith("redis_guard_policy_findings_total{") and f'rule="{rule}"' in line
                       and f'outcome="{outcome}"' in line and 'policy="cluster-candidate"' in line)

        assert count("T1", "would-reject") == 20
        assert count("C4", "would-rewrite") == 1
    finally:
        process.stop()


def _gets(client) -> int:
    return int(client.info("commandstats").get("cmdstat_get", {}).get("calls", 0))


@pytest.mark.parametrize("replica_reads", [False, True], ids=["masters", "replicas"])
def test_reads_from_replicas_only_when_configured(redis_cluster, tmp_path, replica_reads):
    config = tmp_path / "cluster.yaml"
    config.write_text(f"upstream_options: {{read_from_replicas: {'true' if replica_reads else 'false'}}}\n")
    process = ProxyProcess(None, str(config), "--upstream-cluster", redis_cluster.seeds)
    try:
        client = redis.Redis(port=process.port)
        keys = [f"ro:{i}" for i in range(30)]
        client.mset({key: key for key in keys})
        assert client.wait(1, 2000) == 1  # the replicas have them
        masters, replicas = redis_cluster.masters(), redis_cluster.replicas()
        before = {node.port: _gets(redis_cluster.client(node)) for node in masters + replicas}
        assert [client.get(key) for key in keys] == [key.encode() for key in keys]
        assert client.set("ro:0", "written") is True  # writes still go to the master
        after = {node.port: _gets(redis_cluster.client(node)) for node in masters + replicas}
        on_replicas = sum(after[n.port] - before[n.port] for n in replicas)
        on_masters = sum(after[n.port] - before[n.port] for n in masters)
        assert (on_replicas, on_masters) == ((30, 0) if replica_reads else (0, 30))
        assert redis_cluster.client(redis_cluster.master_for_key("ro:0")).get("ro:0") == b"written"
    finally:
        process.stop()


def test_quit_closes_only_the_client(cluster_proxy):
    """QUIT is answered by the proxy, which then closes the client; forwarded, it would close a
    connection that other clients share and leave the client open."""
    other = redis.Redis(port=cluster_proxy.port)
    with socket.create_connection(("127.0.0.1", cluster_proxy.port), timeout=5) as quitter:
        quitter.sendall(b"*1\r\n$4\r\nQUIT\r\n")
        reply, closed = read_until_quiet(quitter, timeout=5)
    assert reply == b"+OK\r\n" and closed
    pipe = other.pipeline(transaction=False)
    for i in range(50):
        pipe.set(f"quit:{i}", i)
    assert pipe.execute() == [True] * 50

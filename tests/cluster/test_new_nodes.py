"""In front of a real cluster: PING goes to a master and is answered as Redis answers it; scripts
and function libraries loaded through the proxy reach a node that lacks them (a master added by
resharding, a master whose cache was flushed behind the proxy's back, a replica promoted by a
failover); state Redis keeps per node reaches the replicas too; CONFIG SET requirepass is refused
with its reason (it would lock the proxy's own new connections out)."""

import signal
import time

import pytest

from tests.cluster.nodes import BUS_OFFSET, pick_cluster_ports
from tests.cluster.start import proxy_for
from tests.servers import exchange, wait_for

redis = pytest.importorskip("redis")

SCRIPT = "return redis.call('GET', KEYS[1])"
LIBRARY = "#!lua name=newlib\nredis.register_function('newget', function(keys) return redis.call('GET', keys[1]) end)"
PINGS = (b"*1\r\n$4\r\nPING\r\n", b"*2\r\n$4\r\nping\r\n$5\r\nhello\r\n", b"PING\r\n")


def logged_pings(redis_cluster, argument: bytes) -> int:
    """The masters' SLOWLOG entries of PING `argument` (every command is logged: see the test)."""
    return sum(1 for node in redis_cluster.masters() for entry in redis_cluster.client(node).slowlog_get(128)
               if entry["command"] == b"PING " + argument)


def test_ping_goes_to_one_master_and_says_what_it_says(redis_cluster, cluster_proxy):
    masters = redis_cluster.masters()
    master = masters[0]
    through = redis.Redis(port=cluster_proxy.port)
    assert through.ping() is True
    for ping in PINGS:
        assert exchange(cluster_proxy.port, ping)[0] == exchange(master.port, ping)[0]
    for node in masters:
        redis_cluster.client(node).config_set("slowlog-log-slower-than", 0)
    try:
        for n in range(3):
            assert exchange(cluster_proxy.port, b"PING through-%d\r\n" % n)[0] == b"$9\r\nthrough-%d\r\n" % n
            assert logged_pings(redis_cluster, b"through-%d" % n) == 1  # on one master
    finally:
        for node in masters:
            redis_cluster.client(node).config_set("slowlog-log-slower-than", 10000)
    resp3 = redis.Redis(port=cluster_proxy.port, protocol=3)
    assert resp3.ping() is True
    multi = b"*1\r\n$5\r\nMULTI\r\n*1\r\n$4\r\nPING\r\n*1\r\n$4\r\nEXEC\r\n"
    assert exchange(cluster_proxy.port, multi)[0] == b"+OK\r\n+QUEUED\r\n*1\r\n+PONG\r\n"
    through.close()
    resp3.close()


def _key_of(redis_cluster, node, prefix: str) -> str:
    for i in range(5000):
        key = f"{prefix}:{i}"
        if redis_cluster.master_for_key(key).port == node.port:
            return key
    raise AssertionError(f"no key for {node}")


def test_a_master_that_lost_its_scripts_gets_them_again(redis_cluster, cluster_proxy):
    """SCRIPT FLUSH / FUNCTION FLUSH on one master directly (as a restart would): EVALSHA and
    FCALL through the proxy still answer, the proxy loads them there first."""
    client = redis.Redis(port=cluster_proxy.port, socket_timeout=20)
    client.script_flush()
    client.function_flush()
    sha = client.script_load(SCRIPT)
    assert client.function_load(LIBRARY) in (b"newlib", "newlib")
    master = redis_cluster.masters()[1]
    key = _key_of(redis_cluster, master, "lost")
    client.set(key, "v")
    direct = redis_cluster.client(master)
    direct.script_flush()
    direct.function_flush()
    assert direct.script_exists(sha) == [False]
    assert client.evalsha(sha, 1, key) == b"v"
    assert direct.script_exists(sha) == [True]
    assert client.fcall("newget", 1, key) == b"v"
    assert len(direct.function_list()) == 1
    # In a pipeline, among other commands of the same master.
    direct.script_flush()
    pipe = client.pipeline(transaction=False)
    pipe.get(key).evalsha(sha, 1, key).get(key)
    assert pipe.execute() == [b"v", b"v", b"v"]
    # Forgotten once flushed through the proxy: NOSCRIPT as Redis says it.
    client.script_flush()
    with pytest.raises(redis.exceptions.NoScriptError):
        client.evalsha(sha, 1, key)
    client.function_flush()
    with pytest.raises(redis.ResponseError, match="Function not found"):
        client.fcall("newget", 1, key)
    client.close()


def test_script_load_and_config_set_reach_the_replicas(redis_cluster, cluster_proxy):
    client = redis.Redis(port=cluster_proxy.port)
    client.script_flush()
    sha = client.script_load(SCRIPT)
    replicas = redis_cluster.replicas()
    assert replicas
    wait_for(lambda: all(redis_cluster.client(node).script_exists(sha) == [True] for node in replicas), 10,
             "SCRIPT LOAD on every replica")
    before = client.config_get("maxmemory-samples")["maxmemory-samples"]
    try:
        assert client.config_set("maxmemory-samples", "9") is True
        wait_for(lambda: all(redis_cluster.client(node).config_get("maxmemory-samples")["maxmemory-samples"] == "9"
                             for node in replicas), 10, "CONFIG SET on every replica")
    finally:
        client.config_set("maxmemory-samples", before)
    assert client.script_flush() is True
    wait_for(lambda: all(redis_cluster.client(node).script_exists(sha) == [False] for node in replicas), 10,
             "SCRIPT FLUSH on every replica")
    client.close()


def test_config_set_requirepass_is_refused_with_its_reason(redis_cluster, cluster_proxy):
    client = redis.Redis(port=cluster_proxy.port)
    for args in (("requirepass", "secret"), ("maxmemory-samples", "5", "REQUIREPASS", "secret")):
        with pytest.raises(redis.ResponseError, match="requirepass is refused by Redis Guard"):
            client.execute_command("CONFIG", "SET", *args)
    for node in redis_cluster.masters():
        assert redis_cluster.client(node).config_get("requirepass")["requirepass"] == ""
    # The proxy's new connections still log in: a blocking command and a transaction.
    assert client.blpop(["rp:list"], timeout=0.1) is None
    pipe = client.pipeline(transaction=True)
    pipe.set("rp:k", "1").get("rp:k")
    assert pipe.execute() == [True, b"1"]
    client.close()


def test_a_master_added_by_resharding_gets_the_scripts(small_cluster):
    cluster = small_cluster
    proxy = proxy_for(cluster)
    try:
        client = redis.Redis(port=proxy.port, socket_timeout=20)
        sha = client.script_load(SCRIPT)
        assert client.function_load(LIBRARY) in (b"newlib", "newlib")
        key = "added:{a}"
        assert client.set(key, "v") is True
        used = {n.port for n in cluster.nodes} | {n.port + BUS_OFFSET for n in cluster.nodes}
        port = pick_cluster_ports(1, avoid=used)[0]
        node = cluster._start_node(port)
        cluster.nodes.append(node)
        src = cluster.master_for_key(key)
        cluster.command(node, "CLUSTER", "MEET", "127.0.0.1", src.port)
        wait_for(lambda: all(node.node_id in cluster.cluster_nodes(other) for other in cluster.masters()), 30,
                 "every master to know the new node")
        wait_for(lambda: cluster._state_ok(node), 30, "the new node to see the cluster up")
        cluster.migrate_slot(cluster.keyslot(key), src, node)
        direct = cluster.client(node)
        assert direct.script_exists(sha) == [False] and direct.function_list() == []
        # (A GET on the shared connections teaches the proxy the move: a script's lent connection
        # does not follow a MOVED yet.)
        wait_for(lambda: client.get(key) == b"v", 10, "the proxy to follow the move")
        assert client.evalsha(sha, 1, key) == b"v"
        assert client.fcall("newget", 1, key) == b"v"
        assert direct.script_exists(sha) == [True]
        client.close()
    finally:
        proxy.stop()


def test_a_failover_keeps_the_scripts(small_cluster):
    cluster = small_cluster
    proxy = proxy_for(cluster)
    try:
        client = redis.Redis(port=proxy.port, socket_timeout=30)
        sha = client.script_load(SCRIPT)
        key = "failover:{f}"
        assert client.set(key, "v") is True
        owner = cluster.master_for_key(key)
        replica = cluster.replicas(of=owner)[0]
        wait_for(lambda: cluster.client(replica).script_exists(sha) == [True], 10, "the script on the replica")
        assert cluster.client(owner).wait(1, 10000) == 1  # the key on the replica
        cluster.kill(owner, signal.SIGKILL)
        cluster.wait_for_failover(owner)
        deadline = time.monotonic() + 30
        while True:
            try:
                assert client.evalsha(sha, 1, key) == b"v"
                break
            except (redis.ConnectionError, redis.TimeoutError, redis.ResponseError) as exc:
                assert "NOSCRIPT" not in str(exc)
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        client.close()
    finally:
        proxy.stop()

"""No client can hurt another through the per-master shared connections: the cases of
tests/integration/test_isolation.py in front of a real Redis Cluster."""

import time

import hiredis
import pytest

redis = pytest.importorskip("redis")

from tests.integration.test_isolation import Raw  # noqa: E402
from tests.servers import local_ports  # noqa: E402


def test_replconf_ack_never_desyncs_another_clients_replies(redis_cluster, cluster_proxy):
    owner = redis_cluster.owner_of_slot(redis_cluster.keyslot("victim:secret"))
    redis_cluster.client(owner).set("victim:secret", "topsecret")
    attacker, victim = Raw(cluster_proxy.port), Raw(cluster_proxy.port)
    attacker.send("REPLCONF", "ACK", "0")
    assert victim.call("GET", "victim:secret") == b"topsecret"
    assert attacker.nothing_within(0.3)
    assert attacker.call("PING") == b"PONG"
    for n in range(20):
        assert victim.call("SET", f"victim:{n}", n) == b"OK" and victim.call("GET", f"victim:{n}") == str(n).encode()
    attacker.close()
    victim.close()


def test_script_debug_stays_on_its_own_connection(redis_cluster, cluster_proxy):
    attacker, victim = Raw(cluster_proxy.port), Raw(cluster_proxy.port)
    assert attacker.call("SCRIPT", "DEBUG", "YES") == b"OK"
    assert victim.call("EVAL", "redis.call('set', KEYS[1], 'written') return 1", "1", "debug:k") == 1
    owner = redis_cluster.owner_of_slot(redis_cluster.keyslot("debug:k"))
    assert redis_cluster.client(owner).get("debug:k") == b"written"
    attacker.close()
    victim.close()


def test_a_busy_script_gives_busy_to_others_and_script_kill_reaches_every_master(redis_cluster, cluster_proxy):
    key = "busy:{x}"
    owner = redis_cluster.owner_of_slot(redis_cluster.keyslot(key))
    for node in redis_cluster.masters():
        redis_cluster.client(node).config_set("lua-time-limit", 100)
    redis_cluster.client(owner).set(key, "v")
    runner, other, killer = Raw(cluster_proxy.port, 10), Raw(cluster_proxy.port), Raw(cluster_proxy.port)
    runner.send("EVAL", "while true do end", "1", key)
    time.sleep(0.3)
    reply = other.call("GET", key)
    assert isinstance(reply, hiredis.ReplyError) and str(reply).startswith("BUSY"), reply
    assert killer.call("SCRIPT", "KILL") == b"OK"
    assert isinstance(runner.reply(), hiredis.ReplyError)
    assert other.call("GET", key) == b"v"
    assert str(killer.call("SCRIPT", "KILL")).startswith("NOTBUSY")
    for client in (runner, other, killer):
        client.close()


def test_client_pause_and_unpause_reach_every_master_and_readers_go_on(redis_cluster, cluster_proxy):
    pauser, writer, reader = (Raw(cluster_proxy.port) for _ in range(3))
    assert pauser.call("CLIENT", "PAUSE", "10000", "WRITE") == b"OK"
    writer.send("SET", "pause:k", "written")
    assert writer.nothing_within(0.3)
    assert reader.call("GET", "pause:other") is None
    assert pauser.call("CLIENT", "UNPAUSE") == b"OK"
    assert writer.reply() == b"OK"
    for client in (pauser, writer, reader):
        client.close()


def _proxy_connections(redis_cluster, proxy) -> dict:
    """Per master, the ids of the connections that come from the proxy process."""
    ports = local_ports(proxy.process.pid)
    found = {}
    for node in redis_cluster.masters():
        entries = redis_cluster.client(node).client_list()
        found[node.port] = {int(e["id"]) for e in entries if int(e["addr"].rsplit(":", 1)[1]) in ports}
    return found


def test_client_kill_never_reaches_the_proxys_own_connections(redis_cluster, cluster_proxy):
    victim = redis.Redis(port=cluster_proxy.port)
    keys = [f"kill:{n}" for n in range(30)]  # on every master
    victim.mset({key: key for key in keys})
    killer = Raw(cluster_proxy.port)
    before = _proxy_connections(redis_cluster, cluster_proxy)
    assert all(before.values())
    assert isinstance(killer.call("CLIENT", "KILL", "TYPE", "normal"), int)
    assert isinstance(killer.call("CLIENT", "KILL", "SKIPME", "no"), int)
    after = _proxy_connections(redis_cluster, cluster_proxy)
    assert all(before[port] <= after[port] for port in before), (before, after)
    assert victim.mget(keys) == [key.encode() for key in keys]
    killer.close()

"""Regenerate ``captured.py``: real CLUSTER SHARDS / CLUSTER SLOTS replies and cluster errors,
byte for byte, from a cluster this script starts on fixed ports (31000-31006, buses 41000-41006)
and walks through the states the offline tests need. Run from the repository root:

    python -m tests.routing.capture_replies > tests/routing/captured.py

Masters 31001-31003 own 0-5460, 5461-10922, 10923-16383 (``redis-cli --cluster create`` order);
the replica of each is recorded in ``REPLICA_OF``.
"""

from __future__ import annotations

import signal
import subprocess
import sys

from proxy.backends.cluster.routing.slots import hash_slot
from tests.cluster.nodes import RedisCluster
from tests.servers import missing_cluster_tools, wait_for

from .raw_client import Conn, call

LONE = 31000
PORTS = [31001, 31002, 31003, 31004, 31005, 31006]


def key_in_slot(slot: int) -> bytes:
    for i in range(1_000_000):
        key = b"key:%d" % i
        if hash_slot(key) == slot:
            return key
    raise LookupError(slot)


def raw(port: int, *args, resp3: bool = False) -> bytes:
    with Conn(port) as conn:
        if resp3:
            conn.raw(("HELLO", "3"))
        return conn.raw(args)[0]


def main() -> None:
    out: dict[str, bytes] = {}
    clusters: list[RedisCluster] = []
    try:
        # A lone node: no slots, then every slot, before it has met anyone.
        lone = RedisCluster(masters=1, replicas=0, join=False, ports=[LONE])
        clusters.append(lone)
        out["lone_no_slots_get"] = raw(LONE, "GET", "foo")
        call(LONE, "CLUSTER", "ADDSLOTSRANGE", 0, 16383)
        wait_for(lambda: b"cluster_state:ok" in call(LONE, "CLUSTER", "INFO"), 10, "lone node ok")
        out["lone_shards"] = raw(LONE, "CLUSTER", "SHARDS")
        out["lone_slots"] = raw(LONE, "CLUSTER", "SLOTS")
        lone.close()
        clusters.remove(lone)

        # Six nodes; the default diskless sync delay (5 s) leaves the replicas 'loading' a while.
        cluster = RedisCluster(masters=3, replicas=1, join=False, ports=PORTS,
                               extra_args=("--repl-diskless-sync-delay", "5"))
        clusters.append(cluster)
        cluster.create(60, wait=False)
        out["loading_shards"] = wait_for(
            lambda: (r := raw(31001, "CLUSTER", "SHARDS")).count(b"loading") == 3 and r, 20, "loading")
        ids = {n.port: n.node_id for n in cluster.nodes}
        cluster.wait_ready(30)  # and every node's CLUSTER SHARDS calls all six online
        replica_of = {n.port: cluster.node_by_id(n.master_id).port for n in cluster.nodes if not n.is_master}
        out["online_shards"] = raw(31001, "CLUSTER", "SHARDS")
        out["online_slots"] = raw(31001, "CLUSTER", "SLOTS")
        out["online_shards_resp3"] = raw(31001, "CLUSTER", "SHARDS", resp3=True)
        out["online_slots_resp3"] = raw(31001, "CLUSTER", "SLOTS", resp3=True)

        # Errors: MOVED, CROSSSLOT; ASK and TRYAGAIN while slot 5000 migrates 31001 -> 31002.
        out["moved"] = raw(31001, "GET", key_in_slot(12000))
        out["crossslot"] = raw(31001, "MGET", key_in_slot(1), key_in_slot(2))
        present, absent = key_in_slot(5000), key_in_slot(5000)[:-1] + b"x"
        while hash_slot(absent) != 5000:
            absent += b"x"
        call(31001, "SET", present, "v")
        call(31002, "CLUSTER", "SETSLOT", 5000, "IMPORTING", ids[31001])
        call(31001, "CLUSTER", "SETSLOT", 5000, "MIGRATING", ids[31002])
        out["ask"] = raw(31001, "GET", absent)
        out["tryagain"] = raw(31001, "MGET", present, absent)
        for p in (31001, 31002):
            call(p, "CLUSTER", "SETSLOT", 5000, "STABLE")
        call(31001, "DEL", present)

        # Several ranges per master: 100-199 and 7000 move to 31003 (empty slots).
        masters = [31001, 31002, 31003]
        for slot in [*range(100, 200), 7000]:
            for p in [31003, *masters[:2]]:
                call(p, "CLUSTER", "SETSLOT", slot, "NODE", ids[31003])
        wait_for(lambda: all(len(call(p, "CLUSTER", "SLOTS")) == 7 for p in PORTS), 20, "slots agreed")
        out["ranges_shards"] = raw(31001, "CLUSTER", "SHARDS")
        out["ranges_slots"] = raw(31001, "CLUSTER", "SLOTS")
        out["ranges_moved"] = raw(31001, "GET", key_in_slot(150))

        # Hostnames on 31001 and 31002 only; 31001 prefers hostnames, then unknown endpoints.
        for p in (31001, 31002):
            call(p, "CONFIG", "SET", "cluster-announce-hostname", f"node-{p}.example")
        wait_for(lambda: raw(31001, "CLUSTER", "SHARDS").count(b".example") == 2, 20, "hostnames")
        call(31001, "CONFIG", "SET", "cluster-preferred-endpoint-type", "hostname")
        out["hostname_shards"] = raw(31001, "CLUSTER", "SHARDS")
        out["hostname_slots"] = raw(31001, "CLUSTER", "SLOTS")
        out["hostname_moved"] = raw(31001, "GET", key_in_slot(6000))
        out["hostname_moved_unknown"] = raw(31001, "GET", key_in_slot(12000))
        call(31001, "CONFIG", "SET", "cluster-preferred-endpoint-type", "unknown-endpoint")
        out["unknown_shards"] = raw(31001, "CLUSTER", "SHARDS")
        out["unknown_slots"] = raw(31001, "CLUSTER", "SLOTS")
        out["unknown_moved"] = raw(31001, "GET", key_in_slot(12000))
        call(31001, "CONFIG", "SET", "cluster-preferred-endpoint-type", "ip")

        # Failures. The replica of 31003 dies; then 31002 dies (its replica takes over); then
        # 31003 dies with no replica left.
        def stop(port: int) -> None:
            cluster.kill(cluster.node_by_port(port), signal.SIGTERM)

        replica_3 = next(r for r, m in replica_of.items() if m == 31003)
        stop(replica_3)
        wait_for(lambda: raw(31001, "CLUSTER", "SHARDS").count(b"fail") == 1, 30, "replica fail")
        out["replica_fail_shards"] = raw(31001, "CLUSTER", "SHARDS")
        out["replica_fail_slots"] = raw(31001, "CLUSTER", "SLOTS")
        stop(31002)
        promoted = next(r for r, m in replica_of.items() if m == 31002)
        wait_for(lambda: any(e[2][1] == promoted for e in call(31001, "CLUSTER", "SLOTS")), 30, "failover")
        wait_for(lambda: raw(31001, "CLUSTER", "SHARDS").count(b"fail") == 2, 30, "old master fail")
        out["failover_shards"] = raw(31001, "CLUSTER", "SHARDS")
        out["failover_slots"] = raw(31001, "CLUSTER", "SLOTS")
        stop(31003)
        wait_for(lambda: b"cluster_state:fail" in call(31001, "CLUSTER", "INFO"), 30, "cluster down")
        out["master_fail_shards"] = raw(31001, "CLUSTER", "SHARDS")
        out["master_fail_slots"] = raw(31001, "CLUSTER", "SLOTS")
        out["master_fail_get"] = raw(31001, "GET", key_in_slot(12000))
    finally:
        for c in clusters:
            c.close()

    w = sys.stdout.write
    w('"""Real replies captured by ``python -m tests.routing.capture_replies`` (see its docstring)\n')
    w(f'from redis-server {redis_version()}: exact bytes, parsed at test time by hiredis."""\n\n')
    w(f"REPLICA_OF = {replica_of!r}  # replica port -> master port\n\n")
    w("REPLIES: dict[str, bytes] = {\n")
    for name, data in out.items():
        w(f"    {name!r}: (\n")
        for i in range(0, len(data), 90):
            w(f"        {data[i:i + 90]!r}\n")
        w("    ),\n")
    w("}\n")


def redis_version() -> str:
    text = subprocess.run(["redis-server", "--version"], capture_output=True, text=True).stdout
    return text.split("v=")[1].split()[0] if "v=" in text else text.strip()


if __name__ == "__main__":
    if missing_cluster_tools():
        sys.exit("redis-server and redis-cli are needed")
    main()

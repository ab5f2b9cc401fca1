"""The cluster proxy while the cluster changes under it: a slot migrated while clients write
(MIGRATING/IMPORTING + MIGRATE: ASK, TRYAGAIN, then MOVED), or while a RESP3 client has shard
channels there, and a master killed with SIGKILL under load (its replica promoted). Each test
gets its own cluster; every loop is bounded."""

import socket
import threading
import time

import pytest

redis = pytest.importorskip("redis")

from redis.backoff import NoBackoff  # noqa: E402
from redis.retry import Retry  # noqa: E402

from proxy.backends.cluster.routing.slots import hash_slot  # noqa: E402
from tests.cluster.start import proxy_for  # noqa: E402
from tests.servers import read_until_quiet  # noqa: E402


class Writer(threading.Thread):
    """Writes numbered keys through the proxy until told to stop (at most `limit` writes)."""

    def __init__(self, port: int, name: str, keys, stop: threading.Event, limit: int = 200_000, wait_every: int = 0):
        super().__init__(daemon=True)
        # No retry: a command lost with a master is one error (the proxy closes the client's
        # connection, as the server would), the next command reconnects.
        self.client = redis.Redis(port=port, socket_timeout=20, retry=Retry(NoBackoff(), 0))
        self.name_ = name
        self.keys = keys
        self.stop_event = stop
        self.limit = limit
        self.wait_every = wait_every
        self.acked: dict[str, str] = {}
        self.confirmed: dict[str, str] = {}  # acknowledged and then covered by a WAIT >= 1
        self.errors: list[str] = []
        self.after_errors = 0  # successful writes after the last error

    def run(self):
        pending = {}
        for n in range(self.limit):
            if self.stop_event.is_set():
                break
            key = self.keys(self.name_, n)
            value = f"{self.name_}-{n}"
            try:
                self.client.set(key, value)
                if n % 7 == 0:  # a multi-key read of the same slot: TRYAGAIN during migration
                    self.client.mget(key, key)
            except redis.RedisError as exc:
                self.errors.append(f"{key}: {exc}")
                self.after_errors = 0
                continue
            self.acked[key] = value
            pending[key] = value
            self.after_errors += 1
            if self.wait_every and n % self.wait_every == 0:
                try:
                    if self.client.wait(1, 500) >= 1:
                        self.confirmed.update(pending)
                        pending = {}
                except redis.RedisError as exc:
                    self.errors.append(f"WAIT: {exc}")


def test_slot_migration_under_writes(small_cluster):
    cluster = small_cluster
    proxy = proxy_for(cluster)
    try:
        slot = cluster.keyslot("{mig}")
        src = cluster.owner_of_slot(slot)
        dst = next(m for m in cluster.masters() if m is not src)
        stop = threading.Event()
        writers = [Writer(proxy.port, f"w{i}", lambda name, n: f"{{mig}}:{name}:{n}", stop) for i in range(2)]
        for writer in writers:
            writer.start()
        time.sleep(0.5)
        cluster.begin_migration(slot, src, dst)
        moved = 0
        for _ in range(50):  # move keys in small batches while the writers go on
            moved += cluster.move_keys(slot, src, dst, keys_batch=20, limit=40)
            time.sleep(0.05)
        cluster.move_keys(slot, src, dst, keys_batch=200)
        # keys written after the last batch are created on dst (ASK); the slot's last keys leave now
        for _ in range(20):
            if not cluster.keys_in_slot(src, slot, 10):
                break
            cluster.move_keys(slot, src, dst, keys_batch=200)
        cluster.finish_migration(slot, src, dst)
        time.sleep(0.5)  # writes after the slot moved: MOVED, then the new map
        stop.set()
        for writer in writers:
            writer.join(30)
        assert moved > 0
        total = sum(len(w.acked) for w in writers)
        assert total > 200, "the writers hardly wrote"
        assert [w.errors for w in writers] == [[], []]  # no client saw any of it
        check = redis.Redis(port=proxy.port)
        on_dst = cluster.client(dst)
        for writer in writers:
            keys = list(writer.acked)
            assert check.mget(keys) == [writer.acked[k].encode() for k in keys]  # no write lost
            assert on_dst.mget(keys) == [writer.acked[k].encode() for k in keys]  # all on the new owner
        assert cluster.keys_in_slot(src, slot, 10) == []
    finally:
        proxy.stop()


def test_master_killed_under_load(small_cluster):
    cluster = small_cluster
    proxy = proxy_for(cluster)
    try:
        stop = threading.Event()
        writers = [Writer(proxy.port, f"f{i}", lambda name, n: f"fo:{name}:{n}", stop, wait_every=5)
                   for i in range(3)]
        for writer in writers:
            writer.start()
        time.sleep(1.0)
        before = {w.name_: len(w.acked) for w in writers}
        victim = cluster.masters()[0]
        ranges = next(shard["slots"] for shard in cluster.shards()
                      if any(n["id"] == victim.node_id and n.get("role") == "master" for n in shard["nodes"]))
        written = [hash_slot(k.encode()) for w in writers for k in list(w.acked)[:200]]
        assert any(lo <= slot <= hi for slot in written for lo, hi in ranges), "no writes reached the master to kill"
        cluster.kill(victim)
        promoted = cluster.wait_for_failover(victim, timeout=30)
        assert promoted.is_master
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not all(w.after_errors > 50 for w in writers):
            time.sleep(0.1)
        stop.set()
        for writer in writers:
            writer.join(30)
        for writer in writers:
            # one synchronous client has at most one command in flight when the master dies
            assert len(writer.errors) <= 2, "\n".join(writer.errors)
            assert writer.after_errors > 50, "writes did not resume after the failover"
            assert len(writer.acked) > before[writer.name_]
        check = redis.Redis(port=proxy.port, socket_timeout=20)
        confirmed = {k: v for w in writers for k, v in w.confirmed.items()}
        assert len(confirmed) > 30
        keys = list(confirmed)
        assert check.mget(keys) == [confirmed[k].encode() for k in keys]  # WAIT-confirmed writes survived
    finally:
        proxy.stop()


def test_injected_ttls_survive_a_slot_migration(small_cluster, tmp_path):
    """T1 inject adds a hidden `EXPIRE key ttl NX` after an HSET: while the key's slot migrates,
    that EXPIRE may be answered MOVED/ASK like the HSET, and must be sent again where the key is."""
    cluster = small_cluster
    policy = tmp_path / "ttl.yaml"
    policy.write_text("name: ttl-inject\nrules:\n  T1: {action: inject, default_ttl: 100}\n")
    proxy = proxy_for(cluster, "--policy", str(policy))
    try:
        slot = cluster.keyslot("{ttlmig}")
        src = cluster.owner_of_slot(slot)
        dst = next(m for m in cluster.masters() if m is not src)
        stop = threading.Event()
        written: list[list[str]] = [[], []]
        errors: list[str] = []

        def write(n_writer: int):
            client = redis.Redis(port=proxy.port, socket_timeout=20)
            for n in range(100_000):
                if stop.is_set():
                    break
                key = f"{{ttlmig}}:w{n_writer}:{n}"
                try:
                    if n_writer == 0:
                        client.hset(key, "f", "v")
                    else:  # pipelined, beside keys of the other masters
                        client.pipeline(transaction=False).hset(key, "f", "v").hset(f"ttlother:{n}", "f", "v").execute()
                except redis.RedisError as exc:
                    errors.append(f"{key}: {exc}")
                    continue
                written[n_writer].append(key)
            client.close()

        writers = [threading.Thread(target=write, args=(n,), daemon=True) for n in range(2)]
        for writer in writers:
            writer.start()
        time.sleep(0.3)
        cluster.begin_migration(slot, src, dst)
        for _ in range(30):  # keys move in small batches while the writers go on (ASK)
            cluster.move_keys(slot, src, dst, keys_batch=20, limit=40)
            time.sleep(0.05)
        for _ in range(20):
            cluster.move_keys(slot, src, dst, keys_batch=500)
            if not cluster.keys_in_slot(src, slot, 10):
                break
        cluster.finish_migration(slot, src, dst)
        time.sleep(0.5)  # writes after the hand-over: MOVED, then the new map
        stop.set()
        for writer in writers:
            writer.join(30)
        assert errors == []
        keys = written[0] + written[1]
        assert min(len(w) for w in written) > 50, "the writers hardly wrote"
        on_dst = cluster.client(dst)
        pipe = on_dst.pipeline(transaction=False)
        for key in keys:
            pipe.ttl(key)
        ttls = pipe.execute()
        without = [key for key, ttl in zip(keys, ttls) if not 0 < ttl <= 100]
        assert without == [], f"{len(without)} of {len(keys)} keys without the injected TTL"
    finally:
        proxy.stop()


def test_shard_channels_across_a_slot_migration(small_cluster):
    """A RESP3 client's shard channel whose slot moves to another master: the old owner
    unsubscribes it (shown with the client's count over every master), and SSUBSCRIBE again,
    answered -MOVED by the old owner while the proxy's map is behind, goes to the new one
    without the client seeing it; messages come from there."""
    cluster = small_cluster
    proxy = proxy_for(cluster)
    sock = socket.create_connection(("127.0.0.1", proxy.port), timeout=5)
    publisher = redis.Redis(port=proxy.port)
    try:
        slot = cluster.keyslot("{smig}")
        src = cluster.owner_of_slot(slot)
        dst = next(m for m in cluster.masters() if m is not src)
        other = next(f"{{s{n}}}b" for n in range(100) if cluster.owner_of_slot(cluster.keyslot(f"{{s{n}}}")) is dst)
        sock.sendall(b"HELLO 3\r\n")
        read_until_quiet(sock)
        sock.sendall(b"SSUBSCRIBE {smig}a\r\nSSUBSCRIBE %s\r\n" % other.encode())
        assert read_until_quiet(sock)[0].endswith(b":2\r\n")
        cluster.begin_migration(slot, src, dst)
        cluster.finish_migration(slot, src, dst)
        assert read_until_quiet(sock, 5, 1.0)[0] == b">3\r\n$12\r\nsunsubscribe\r\n$7\r\n{smig}a\r\n:1\r\n"
        sock.sendall(b"SSUBSCRIBE {smig}a\r\nPING\r\n")
        assert read_until_quiet(sock)[0] == b">3\r\n$10\r\nssubscribe\r\n$7\r\n{smig}a\r\n:2\r\n+PONG\r\n"
        assert publisher.execute_command("SPUBLISH", "{smig}a", "m") == 1
        assert read_until_quiet(sock)[0] == b">3\r\n$8\r\nsmessage\r\n$7\r\n{smig}a\r\n$1\r\nm\r\n"
        assert cluster.client(dst).execute_command("PUBSUB", "SHARDNUMSUB", "{smig}a") == [b"{smig}a", 1]
    finally:
        sock.close()
        publisher.close()
        proxy.stop()

"""The proxy in front of a Sentinel-managed master (`--upstream-sentinel`): the master found and
confirmed, followed through a failover with writers running, every write WAIT confirmed before
the kill readable after it; requests sent during the failover wait and go to the new master."""

import signal
import threading
import time

import pytest

redis = pytest.importorskip("redis")

from redis.backoff import NoBackoff  # noqa: E402
from redis.retry import Retry  # noqa: E402

from proxy.backends.sentinel import is_master, parse_master_addr, parse_replicas, parse_switch_master  # noqa: E402
from proxy.config import Address  # noqa: E402
from tests.servers import PASSTHROUGH, ProxyProcess  # noqa: E402


def sentinel_proxy(group, *extra):
    return ProxyProcess(None, PASSTHROUGH, "--upstream-sentinel", group.spec, *extra)


def test_the_sentinel_protocol_is_read_without_io():
    assert parse_master_addr([b"127.0.0.1", b"6380"]) == Address("127.0.0.1", 6380)
    assert parse_master_addr(None) is None and parse_master_addr([b"x"]) is None
    assert parse_switch_master(b"m 127.0.0.1 1 127.0.0.2 2") == ("m", Address("127.0.0.1", 1), Address("127.0.0.2", 2))
    assert parse_switch_master(b"garbage") is None
    assert is_master([b"master", 1, []]) and not is_master([b"slave", b"h", 1, b"connected", 1])
    replicas = [[b"ip", b"127.0.0.1", b"port", b"7001", b"flags", b"slave"],
                [b"ip", b"127.0.0.1", b"port", b"7002", b"flags", b"s_down,slave,disconnected"]]
    assert parse_replicas(replicas) == [Address("127.0.0.1", 7001)]


def test_the_master_is_found_and_confirmed(sentinel_group):
    proxy = sentinel_proxy(sentinel_group)
    try:
        assert f"sentinel master 'rgmaster' at redis://127.0.0.1:{sentinel_group.master.port}/0" in proxy.log
        client = redis.Redis(port=proxy.port)
        assert client.set("s:k", "v") is True
        assert redis.Redis(port=sentinel_group.master.port).get("s:k") == b"v"
        assert client.blpop(["s:none"], timeout=0.1) is None  # a lent connection, to the master too
    finally:
        proxy.stop()


class Writer(threading.Thread):
    """SET then WAIT 1: a write counts as confirmed once WAIT says a replica has it."""

    def __init__(self, port: int, name: str, stop: threading.Event, limit: int = 100_000):
        super().__init__(daemon=True)
        self.client = redis.Redis(port=port, socket_timeout=20, retry=Retry(NoBackoff(), 0))
        self.name_ = name
        self.stop_event = stop
        self.limit = limit
        self.confirmed: dict[str, str] = {}
        self.errors: list[str] = []
        self.after_errors = 0

    def run(self):
        for n in range(self.limit):
            if self.stop_event.is_set():
                return
            key, value = f"sw:{self.name_}:{n}", f"{self.name_}-{n}"
            try:
                self.client.set(key, value)
                if self.client.wait(1, 300) >= 1:  # after the failover: no replica, 0
                    self.confirmed[key] = value
                self.after_errors += 1
            except redis.RedisError as exc:
                self.errors.append(f"{key}: {exc!r}")
                self.after_errors = 0


def test_a_master_killed_under_writers_loses_no_confirmed_write(sentinel_group):
    group = sentinel_group
    proxy = sentinel_proxy(group)
    try:
        stop = threading.Event()
        writers = [Writer(proxy.port, f"w{i}", stop) for i in range(3)]
        for writer in writers:
            writer.start()
        time.sleep(1.0)
        snapshots = [writer.confirmed.copy() for writer in writers]  # the writers go on meanwhile
        assert all(snapshots), "nothing was confirmed before the kill"
        confirmed_before = {k: v for snapshot in snapshots for k, v in snapshot.items()}
        old = group.kill_master()
        new_port = group.wait_for_failover(old.port, timeout=40)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not all(writer.after_errors > 20 for writer in writers):
            time.sleep(0.1)
        stop.set()
        for writer in writers:
            writer.join(30)
        for writer in writers:
            assert writer.after_errors > 20, "writes did not resume after the failover"
            # A synchronous client has at most one command in flight when the master dies.
            assert len(writer.errors) <= 2, "\n".join(writer.errors)
        check = redis.Redis(port=proxy.port, socket_timeout=10)
        keys = list(confirmed_before)
        assert check.mget(keys) == [confirmed_before[k].encode() for k in keys]
        everything = {k: v for writer in writers for k, v in writer.confirmed.copy().items()}
        assert redis.Redis(port=new_port).mget(list(everything)) == [v.encode() for v in everything.values()]
        assert "is now 127.0.0.1:%d" % new_port in proxy.log
    finally:
        proxy.stop()


def test_requests_sent_during_the_failover_wait_for_the_new_master(sentinel_group):
    group = sentinel_group
    proxy = sentinel_proxy(group)
    try:
        client = redis.Redis(port=proxy.port, socket_timeout=40, retry=Retry(NoBackoff(), 0))
        assert client.set("sf:before", "1") is True
        old = group.kill_master()
        time.sleep(0.2)
        fresh = redis.Redis(port=proxy.port, socket_timeout=40, retry=Retry(NoBackoff(), 0))
        started = time.monotonic()
        assert fresh.set("sf:during", "2") is True  # waits, then runs on the promoted replica
        assert time.monotonic() - started < 35
        new_port = group.wait_for_failover(old.port, timeout=40)
        assert redis.Redis(port=new_port).get("sf:during") == b"2"
    finally:
        proxy.stop()


def test_reads_go_to_a_replica_when_asked(sentinel_group, tmp_path):
    group = sentinel_group
    config = tmp_path / "replicas.yaml"
    config.write_text("upstream_options: {read_from_replicas: true}\n")
    proxy = ProxyProcess(None, str(config), "--upstream-sentinel", group.spec)
    try:
        client = redis.Redis(port=proxy.port)
        assert client.set("sr:k", "v") is True
        redis.Redis(port=group.master.port).wait(1, 2000)
        replica = redis.Redis(port=group.replica.port)
        before = replica.info("commandstats").get("cmdstat_get", {}).get("calls", 0)
        assert client.get("sr:k") == b"v"
        assert replica.info("commandstats").get("cmdstat_get", {}).get("calls", 0) == before + 1
    finally:
        proxy.stop()


def test_a_sentinel_proxy_shuts_down_cleanly(sentinel_group):
    proxy = sentinel_proxy(sentinel_group)
    assert redis.Redis(port=proxy.port).ping() is True
    proxy.process.send_signal(signal.SIGTERM)
    assert proxy.process.wait(15) == 0


def test_auth_as_default_never_makes_the_client_default(sentinel_group):
    """Issue 49: a client's `AUTH default x` (the master's default user has no password) never
    reaches the master: the client stays the policy's ACL user, FLUSHALL inside a script refused."""
    import os

    from tests.servers import REPO, exchange

    proxy = sentinel_proxy(sentinel_group, "--policy", os.path.join(REPO, "configs", "policies",
                                                                    "lowercase-colon.yaml"))
    try:
        master = redis.Redis(port=sentinel_group.master.port)
        master.set("guard:key", "v")
        for login in (b"AUTH default x\r\n", b"HELLO 3 AUTH default x\r\n"):
            reply, closed = exchange(proxy.port, login + b"ACL WHOAMI\r\nEVAL \"return redis.call('FLUSHALL')\" 0\r\n"
                                     b"ACL WHOAMI\r\n", timeout=5, settle=0.5)
            assert not closed and b"$7\r\ndefault\r\n" not in reply, reply
            assert reply.count(b"redis-guard:lowercase-colon") == 2, reply
        assert master.get("guard:key") == b"v"
        assert "the upstream's `default` user has no password" in proxy.log
    finally:
        proxy.stop()

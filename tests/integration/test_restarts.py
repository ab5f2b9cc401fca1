"""Production events on a real redis-server (issue 50): an upstream restarted without (and with)
persistence, which loses the policy's ACL users, is ridden out (proxy/upstream_acl.py `Keeper`,
UpstreamConnection.users_lost); /ready logs in as the users and says 503 while they are missing
(monitor/ready.py); a hung upstream (SIGSTOP) answers the waiting clients with the
request_timeout error, marks the upstream down and logs it once; blocking commands wait their own
timeout on top (upstream/deadline.py)."""

from __future__ import annotations

import os
import signal
import socket
import threading
import time

import hiredis
import pytest
import redis
from redis.backoff import ConstantBackoff
from redis.retry import Retry

from proxy.commands.table import CommandTable
from proxy.config import Address, Upstream
from proxy.policy.acl import compile_users
from proxy.policy.engine import Engine
from proxy.policy.loader import load_policy
from proxy.upstream_acl import apply
from tests.servers import (
    BUSY_SCRIPT,
    PASSTHROUGH,
    ProxyProcess,
    RedisServer,
    free_port,
    parse_all,
    policy_proxy,
    scrape,
    wait_for,
)
from tests.servers import http_get as get

PASSWORD = "up-secret"
POLICY = "name: shop\nrules:\n  C2: {}\n"






def metric(port: int, name: str) -> float:
    return sum(value for (found, _), value in scrape(port).items() if found == name)


def retrying_client(port: int, retries: int = 40) -> redis.Redis:
    return redis.Redis(port=port, socket_timeout=10, retry=Retry(ConstantBackoff(0.05), retries),
                       retry_on_error=[redis.ConnectionError, redis.TimeoutError])


def reapplied(log: str) -> int:
    """Times the log says the users were applied again after a restart (a refused start-up AUTH or
    a changed run_id, whichever came first: the other finds them applied)."""
    return log.count("restarted without them") + log.count("restarted (run_id")


def acl_names(server) -> set[str]:
    with redis.Redis(port=server.port, password=PASSWORD) as admin:
        return {name if isinstance(name, str) else name.decode() for name in admin.acl_users()}


class Writer(threading.Thread):
    """Writes through the proxy until stopped, bounded in count and time: (time, error) of each
    failure, the count of successes."""

    def __init__(self, port: int, seconds: float = 60, count: int = 200_000, retries: int = 40):
        super().__init__(daemon=True)
        self.client = retrying_client(port, retries)
        self.stopped = threading.Event()
        self.errors: list[tuple[float, str]] = []
        self.written = 0
        self.seconds, self.count = seconds, count

    def run(self) -> None:
        deadline = time.monotonic() + self.seconds
        for count in range(self.count):
            if self.stopped.is_set() or time.monotonic() > deadline:
                break
            try:
                self.client.set(f"shop:k{count % 100}", count)
                self.written += 1
            except redis.RedisError as exc:
                self.errors.append((time.monotonic(), str(exc)))
                time.sleep(0.01)
            time.sleep(0.002)
        self.client.close()

    def stop(self) -> None:
        self.stopped.set()
        if self.is_alive():
            self.join(10)


@pytest.mark.parametrize("persistence", [False, True], ids=["no-persistence", "aof"])
def test_restart_is_ridden_out_under_traffic(tmp_path, persistence):
    extra = ("--appendonly", "yes", "--appendfsync", "always") if persistence else ()
    server = RedisServer(None, "--requirepass", PASSWORD, *extra)
    metrics = free_port()
    proxy = policy_proxy(tmp_path, POLICY, f"redis://:{PASSWORD}@127.0.0.1:{server.port}",
                         config=f"metrics: 127.0.0.1:{metrics}\n")
    writer = Writer(proxy.port)
    try:
        assert "redis-guard:shop" in acl_names(server)
        writer.start()
        wait_for(lambda: writer.written > 50, 10, "writes before the restart")
        server.stop(signal.SIGTERM if persistence else signal.SIGKILL)
        time.sleep(0.5)
        server.start()  # the same port; the ACL users are gone with the server's memory
        restarted = time.monotonic()
        before = writer.written
        wait_for(lambda: writer.written > before + 200, 20, "writes after the restart")
        writer.stop()
        late = [(at - restarted, error) for at, error in writer.errors if at > restarted + 0.3]
        assert not late, late
        assert "redis-guard:shop" in acl_names(server)
        assert reapplied(proxy.log) == 1, proxy.log
        assert "start-up command refused" not in proxy.log
        wait_for(lambda: get(metrics, "/ready")[0] == 200, 10, "/ready to say 200")
        with redis.Redis(port=proxy.port) as client:
            assert client.set("shop:after", "1") and client.get("shop:after") == b"1"
    finally:
        writer.stop()
        proxy.stop()
        server.close()


def test_idle_proxy_is_ready_again_after_a_restart(tmp_path):
    """No client touches the proxy: /ready finds the users missing and applies them again."""
    server = RedisServer(None, "--requirepass", PASSWORD)
    metrics = free_port()
    proxy = policy_proxy(tmp_path, POLICY, f"redis://:{PASSWORD}@127.0.0.1:{server.port}",
                         config=f"metrics: 127.0.0.1:{metrics}\n")
    try:
        assert get(metrics, "/ready")[0] == 200
        server.stop(signal.SIGKILL)
        server.start()
        time.sleep(1.1)  # past the probe's cached answer
        wait_for(lambda: get(metrics, "/ready")[0] == 200, 10, "/ready to say 200")
        assert "redis-guard:shop" in acl_names(server)
    finally:
        proxy.stop()
        server.close()


def test_ready_says_503_while_the_users_are_missing(tmp_path):
    """With upstream_acl off and the users made by operators, nothing puts them back: /ready says
    503 naming the user while it is missing, 200 once it is back."""
    server = RedisServer(None, "--requirepass", PASSWORD)
    (tmp_path / "policy.yaml").write_text(POLICY)
    engine = Engine(load_policy(str(tmp_path / "policy.yaml")), CommandTable.from_snapshot())
    users = compile_users(engine, PASSWORD)
    upstream = Upstream(Address("127.0.0.1", server.port), None, PASSWORD, 0)

    def make_users():
        import asyncio

        assert asyncio.run(apply(users, [upstream])).ok

    make_users()
    metrics = free_port()
    proxy = policy_proxy(tmp_path, POLICY, f"redis://:{PASSWORD}@127.0.0.1:{server.port}",
                         config=f"metrics: 127.0.0.1:{metrics}\nupstream_acl: off\n")
    try:
        assert "users found upstream are used" in proxy.log
        assert get(metrics, "/ready")[0] == 200
        with redis.Redis(port=server.port, password=PASSWORD) as admin:
            admin.acl_deluser("redis-guard:shop")
        status, body = wait_for(lambda: (answer := get(metrics, "/ready"))[0] == 503 and answer, 5, "/ready 503")
        assert "redis-guard:shop" in body and "do not log in" in body
        make_users()
        wait_for(lambda: get(metrics, "/ready")[0] == 200, 5, "/ready to say 200")
    finally:
        proxy.stop()
        server.close()


# -- request_timeout -------------------------------------------------------------------------

@pytest.fixture
def hung(tmp_path):
    """A server the test may SIGSTOP, and the passthrough proxy with request_timeout 1 before it."""
    server = RedisServer()
    metrics = free_port()
    config = tmp_path / "config.yaml"
    config.write_text(open(PASSTHROUGH).read() + f"\nmetrics: 127.0.0.1:{metrics}\n"
                      "upstream_options:\n  request_timeout: 1\n")
    proxy = ProxyProcess(server.url, str(config))
    try:
        yield server, proxy, metrics
    finally:
        if server.process.poll() is None:
            os.kill(server.process.pid, signal.SIGCONT)
        proxy.stop()
        server.close()


def ask(port: int, *command, timeout: float = 20) -> tuple[object, float]:
    """One command on a new raw connection: (its reply, seconds it took)."""
    began = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as conn:
        conn.sendall(hiredis.pack_command(command))
        data = b""
        while not parse_all(data):
            chunk = conn.recv(65536)
            assert chunk, "the proxy closed the connection"
            data += chunk
    return parse_all(data)[0], time.monotonic() - began


def test_a_hung_upstream_answers_the_timeout_error(hung):
    server, proxy, metrics = hung
    with redis.Redis(port=proxy.port) as client:
        client.set("k", "v")
    assert metric(metrics, "redis_guard_upstream_up") == 1
    os.kill(server.process.pid, signal.SIGSTOP)
    reply, took = ask(proxy.port, "GET", "k")
    assert isinstance(reply, hiredis.ReplyError) and "request_timeout 1s" in str(reply), reply
    assert 0.9 < took < 4, took
    assert metric(metrics, "redis_guard_upstream_up") == 0
    assert metric(metrics, "redis_guard_upstream_timeouts_total") >= 1
    # Still hung: the next request's new connection times out too (its start-up is not answered)
    reply, took = ask(proxy.port, "GET", "k")
    assert "request_timeout 1s" in str(reply) and took < 4, (reply, took)
    assert metric(metrics, "redis_guard_upstream_up") == 0
    assert get(metrics, "/ready")[0] == 503
    wait_for(lambda: proxy.log.count("is down: no reply within request_timeout 1s") == 1, 5, "the down line")
    os.kill(server.process.pid, signal.SIGCONT)
    reply = wait_for(lambda: (answer := ask(proxy.port, "GET", "k")[0]) == b"v" and answer, 10, "GET to answer again")
    assert reply == b"v"
    wait_for(lambda: metric(metrics, "redis_guard_upstream_up") == 1, 5, "upstream_up 1")
    assert proxy.log.count("is down:") == 1 and "is back up" in proxy.log, proxy.log


def test_blocking_commands_wait_their_own_timeout(hung):
    _server, proxy, _metrics = hung
    reply, took = ask(proxy.port, "BLPOP", "empty", "2")
    assert reply is None and 1.9 < took < 5, (reply, took)
    reply, took = ask(proxy.port, "XREAD", "BLOCK", "2000", "STREAMS", "nostream", "$")
    assert reply is None and 1.9 < took < 5, (reply, took)
    got = {}

    def forever():
        got["reply"] = ask(proxy.port, "BLPOP", "later", "0", timeout=30)

    thread = threading.Thread(target=forever, daemon=True)
    thread.start()
    time.sleep(3)  # three request_timeouts
    assert "reply" not in got
    with redis.Redis(port=proxy.port) as client:
        client.rpush("later", "x")
    thread.join(10)
    assert got["reply"][0] == [b"later", b"x"]
    assert "request_timeout" not in proxy.log


def test_request_timeout_zero_waits(tmp_path):
    server = RedisServer()
    config = tmp_path / "config.yaml"
    config.write_text(open(PASSTHROUGH).read() + "\nupstream_options:\n  request_timeout: 0\n")
    proxy = ProxyProcess(server.url, str(config))
    try:
        with redis.Redis(port=proxy.port, socket_timeout=10) as client:
            assert client.eval(BUSY_SCRIPT, 0, 2000) == 1
    finally:
        proxy.stop()
        server.close()


def test_a_renamed_policy_is_not_brought_back_by_a_restart_or_ready(tmp_path):
    """A reload renames the policy (its old users deleted, upstream_acl.retire); then the server
    restarts without persistence: the keeper and /ready apply the current policy's users only,
    never the old ones again."""
    server = RedisServer(None, "--requirepass", PASSWORD)
    metrics = free_port()
    proxy = policy_proxy(tmp_path, POLICY, f"redis://:{PASSWORD}@127.0.0.1:{server.port}",
                         config=f"metrics: 127.0.0.1:{metrics}\n")
    try:
        assert get(metrics, "/ready")[0] == 200
        (tmp_path / "policy.yaml").write_text(POLICY.replace("name: shop", "name: store"))
        proxy.process.send_signal(signal.SIGHUP)
        wait_for(lambda: acl_names(server) >= {"redis-guard:store"} and "redis-guard:shop" not in acl_names(server),
                 20, "the old policy's user to be deleted")
        time.sleep(1.1)  # past the probe's cached answer
        assert get(metrics, "/ready")[0] == 200
        assert "redis-guard:shop" not in acl_names(server)  # the probe did not apply the old users
        server.stop(signal.SIGKILL)
        server.start()
        time.sleep(1.1)
        wait_for(lambda: get(metrics, "/ready")[0] == 200, 10, "/ready to say 200 (the users applied again)")
        names = acl_names(server)
        assert "redis-guard:store" in names and "redis-guard:shop" not in names, names
        server.stop(signal.SIGKILL)
        server.start()  # again, and a client first this time: the keeper applies them
        with retrying_client(proxy.port) as client:
            assert client.set("shop:x", "1") and client.get("shop:x") == b"1"
        names = acl_names(server)
        assert "redis-guard:store" in names and "redis-guard:shop" not in names, names
    finally:
        proxy.stop()
        server.close()


def test_a_changed_run_id_applies_the_users_again(tmp_path):
    """A server that kept the users across its restart (an aclfile), in a form the policy does not
    give them (changed behind the proxy's back, then ACL SAVE): no AUTH is refused, the changed
    run_id tells the restart, and the users are applied again (each starts with `reset`)."""
    aclfile = tmp_path / "users.acl"
    aclfile.write_text("")
    server = RedisServer(None, "--aclfile", str(aclfile))
    proxy = policy_proxy(tmp_path, POLICY, server.url)
    try:
        with redis.Redis(port=proxy.port) as client:
            assert client.set("shop:k", "v") and client.get("shop:k") == b"v"
        with redis.Redis(port=server.port) as admin:
            admin.execute_command("ACL", "SETUSER", "redis-guard:shop", "-get")
            admin.execute_command("ACL", "SAVE")
        server.stop(signal.SIGKILL)
        server.start()

        def get_works():
            try:
                with redis.Redis(port=proxy.port, socket_timeout=5) as client:
                    return client.get("shop:k") is None  # the server kept no data, and GET is allowed again
            except redis.RedisError:
                return False

        wait_for(get_works, 15, "GET through the proxy to be allowed again")
        wait_for(lambda: "restarted (run_id" in proxy.log, 5, "the restart logged")
        assert proxy.log.count("restarted (run_id") == 1, proxy.log
        assert "restarted without them" not in proxy.log
    finally:
        proxy.stop()
        server.close()

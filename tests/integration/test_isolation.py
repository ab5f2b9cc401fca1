"""No client can hurt another through the shared connections: every case of issue 13 with two or
more real clients through a passthrough proxy, the victim's replies checked one by one and the
upstream inspected directly. (The same against a Redis Cluster: tests/cluster/test_isolation.py.)"""

from __future__ import annotations

import socket
import threading
import time

import hiredis
import pytest

redis = pytest.importorskip("redis")

from tests.servers import ProxyProcess, RedisServer, local_ports, wait_for  # noqa: E402


class Raw:
    """A client that sends exactly the commands it is told and reads replies one by one."""

    def __init__(self, port: int, timeout: float = 5.0):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.reader = hiredis.Reader()
        self.timeout = timeout

    def send(self, *args) -> None:
        self.sock.sendall(hiredis.pack_command(tuple(args)))

    def reply(self, timeout: float | None = None):
        self.sock.settimeout(timeout or self.timeout)
        while (reply := self.reader.gets()) is False:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed")
            self.reader.feed(chunk)
        return reply

    def call(self, *args):
        self.send(*args)
        return self.reply()

    def nothing_within(self, seconds: float) -> bool:
        self.sock.settimeout(seconds)
        try:
            chunk = self.sock.recv(65536)
        except TimeoutError:
            return True
        self.reader.feed(chunk)
        return False

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def server():
    server = RedisServer()
    yield server
    server.close()


@pytest.fixture
def proxy(server):
    process = ProxyProcess(server.url)
    yield process
    process.stop()


def connections(server) -> list[dict]:
    """The server's clients, without the one asking."""
    with redis.Redis(port=server.port) as direct:
        me = direct.client_id()
        return [entry for entry in direct.client_list() if int(entry["id"]) != me]


def test_replconf_ack_never_desyncs_another_clients_replies(server, proxy):
    """Redis sends no reply to REPLCONF ACK on a normal connection: on a shared one every later
    reply would go to the wrong client. It takes a connection of the client's own."""
    redis.Redis(port=server.port).set("victim:secret", "topsecret")
    attacker, victim = Raw(proxy.port), Raw(proxy.port)
    attacker.send("REPLCONF", "ACK", "0")
    assert victim.call("GET", "victim:secret") == b"topsecret"
    assert attacker.nothing_within(0.3)  # as from Redis: nothing
    assert attacker.call("PING") == b"PONG"
    for n in range(20):
        assert victim.call("SET", f"victim:{n}", n) == b"OK" and victim.call("GET", f"victim:{n}") == str(n).encode()
    attacker.close()
    victim.close()


def test_script_debug_turns_only_its_own_connection_into_a_debugger(server, proxy):
    attacker, victim = Raw(proxy.port), Raw(proxy.port)
    assert attacker.call("SCRIPT", "DEBUG", "YES") == b"OK"
    assert victim.call("EVAL", "redis.call('set', KEYS[1], 'written') return 1", "1", "debug:k") == 1
    assert redis.Redis(port=server.port).get("debug:k") == b"written"  # not lost in a debugger's fork
    assert victim.call("SET", "debug:other", "v") == b"OK"
    attacker.close()
    victim.close()


def test_a_script_that_does_not_end_gives_busy_to_others_and_script_kill_stops_it(server, proxy):
    direct = redis.Redis(port=server.port)
    direct.config_set("lua-time-limit", 100)
    direct.set("busy:k", "v")
    runner, other, killer = Raw(proxy.port, 10), Raw(proxy.port), Raw(proxy.port)
    runner.send("EVAL", "while true do end", "0")
    time.sleep(0.3)
    started = time.monotonic()
    reply = other.call("GET", "busy:k")
    assert isinstance(reply, hiredis.ReplyError) and str(reply).startswith("BUSY"), reply
    assert time.monotonic() - started < 2
    assert killer.call("SCRIPT", "KILL") == b"OK"
    killed = runner.reply()
    assert isinstance(killed, hiredis.ReplyError) and "killed" in str(killed).lower()
    assert other.call("GET", "busy:k") == b"v"
    for client in (runner, other, killer):
        client.close()


def test_function_kill_reaches_redis_while_a_function_runs(server, proxy):
    direct = redis.Redis(port=server.port)
    direct.config_set("lua-time-limit", 100)
    direct.function_load("#!lua name=spin\nredis.register_function('spin', function() while true do end end)",
                         replace=True)
    runner, other, killer = Raw(proxy.port, 10), Raw(proxy.port), Raw(proxy.port)
    runner.send("FCALL", "spin", "0")
    time.sleep(0.3)
    assert str(other.call("PING")).startswith("BUSY")
    assert killer.call("FUNCTION", "KILL") == b"OK"
    assert isinstance(runner.reply(), hiredis.ReplyError)
    assert other.call("PING") == b"PONG"
    for client in (runner, other, killer):
        client.close()


def test_client_unpause_never_waits_behind_the_paused_write_and_readers_go_on(server, proxy):
    pauser, writer, reader, unpauser = (Raw(proxy.port) for _ in range(4))
    assert pauser.call("CLIENT", "PAUSE", "10000", "WRITE") == b"OK"
    writer.send("SET", "pause:k", "written")
    time.sleep(0.2)
    assert writer.nothing_within(0.2)  # held back by Redis, as its own client would be
    started = time.monotonic()
    assert reader.call("GET", "pause:other") is None  # a read is not held back
    assert time.monotonic() - started < 1
    assert unpauser.call("CLIENT", "UNPAUSE") == b"OK"
    assert writer.reply() == b"OK"
    assert redis.Redis(port=server.port).get("pause:k") == b"written"
    for client in (pauser, writer, reader, unpauser):
        client.close()


def test_a_blocking_command_runs_before_what_other_clients_send_after_it(server, proxy):
    """XREADGROUP ... BLOCK takes a connection of its own (a warm spare: no connect to wait
    for), so a DEL another client sends after it cannot run first."""
    def run(port):
        direct = redis.Redis(port=server.port)
        direct.delete("order:s")
        direct.xgroup_create("order:s", "g", id="$", mkstream=True)
        blocked, other = Raw(port), Raw(port)
        blocked.send("XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", "order:s", ">")
        time.sleep(0.05)
        assert other.call("XADD", "order:s", "*", "f", "v")
        reply = blocked.reply()
        blocked.close()
        other.close()
        return reply

    direct_reply, proxy_reply = run(server.port), run(proxy.port)
    assert proxy_reply[0][0] == direct_reply[0][0] == b"order:s"  # the entry, not a later read


def test_no_message_after_unsubscribe(server, proxy):
    subscriber, publisher = Raw(proxy.port), Raw(proxy.port)
    assert subscriber.call("SUBSCRIBE", "iso:ch")[0] == b"subscribe"
    assert subscriber.call("UNSUBSCRIBE", "iso:ch")[0] == b"unsubscribe"
    assert publisher.call("PUBLISH", "iso:ch", "late") == 0
    assert subscriber.nothing_within(0.3)
    subscriber.close()
    publisher.close()


def _sync_payload(client: Raw) -> bytes:
    """SYNC's RDB payload: `$<len>\r\n` then the file, or diskless `$EOF:<mark>\r\n` then the
    file and the mark (keepalive newlines before either)."""
    client.send("SYNC")
    data = b""
    client.sock.settimeout(10)
    while True:
        data += client.sock.recv(65536)
        stripped = data.lstrip(b"\n")
        if stripped.startswith(b"$") and b"\r\n" in stripped:
            header, _, rest = stripped.partition(b"\r\n")
            if header.startswith(b"$EOF:"):
                mark = header[5:]
                while not rest.endswith(mark):
                    rest += client.sock.recv(65536)
                return rest[:-len(mark)]
            size = int(header[1:])
            while len(rest) < size:
                rest += client.sock.recv(65536)
            return rest[:size]


def test_replconf_state_stays_on_the_connection_sync_uses(server, proxy):
    """redis-cli --functions-rdb: REPLCONF capa eof, REPLCONF rdb-filter-only functions, then SYNC,
    all on one connection (the filter is state of that connection)."""
    redis.Redis(port=server.port).set("rdb:secret:key", "secret value")
    filtered = Raw(proxy.port, 10)
    assert filtered.call("REPLCONF", "capa", "eof") == b"OK"
    assert filtered.call("REPLCONF", "rdb-filter-only", "functions") == b"OK"
    assert b"rdb:secret:key" not in _sync_payload(filtered)
    filtered.close()
    whole = Raw(proxy.port, 10)
    assert b"rdb:secret:key" in _sync_payload(whole)
    whole.close()


def test_client_kill_never_reaches_the_proxys_own_connections(server, proxy):
    victim = redis.Redis(port=proxy.port)
    victim.set("kill:k", "v")
    killer = Raw(proxy.port)
    shared_ids = {int(entry["id"]) for entry in connections(server)}
    shared_addrs = {entry["addr"] for entry in connections(server)}
    # Connections of the proxy's own: invisible, as connections of another server would be.
    assert killer.call("CLIENT", "KILL", "TYPE", "normal") == 0
    assert killer.call("CLIENT", "KILL", "USER", "default") == 0
    assert killer.call("CLIENT", "KILL", "SKIPME", "no") == 0
    some_id = sorted(shared_ids)[0]
    assert killer.call("CLIENT", "KILL", "ID", str(some_id)) == 0
    reply = killer.call("CLIENT", "KILL", sorted(shared_addrs)[0])
    assert isinstance(reply, hiredis.ReplyError) and str(reply) == "ERR No such client"
    assert shared_ids <= {int(entry["id"]) for entry in connections(server)}  # all still there
    ours = local_ports(proxy.process.pid)
    assert all(int(entry["addr"].rsplit(":", 1)[1]) in ours for entry in connections(server))
    assert victim.get("kill:k") == b"v"
    # Redis's own syntax errors, and a client of the proxy's that is someone else's to kill.
    assert str(killer.call("CLIENT", "KILL", "TYPE", "bogus")) == "ERR Unknown client type 'bogus'"
    assert str(killer.call("CLIENT", "KILL", "USER", "nobody")) == "ERR No such user 'nobody'"
    direct_client = redis.Redis(port=server.port)
    direct_client.client_setname("someone-else")
    assert killer.call("CLIENT", "KILL", "TYPE", "normal") == 1  # the direct one
    pinned = Raw(proxy.port)
    pinned_id = pinned.call("CLIENT", "ID")  # a connection of its own: its client's to lose
    assert killer.call("CLIENT", "KILL", "ID", str(pinned_id)) == 1
    with pytest.raises(ConnectionError):
        pinned.call("PING")
    assert victim.get("kill:k") == b"v"
    killer.close()


def test_client_reply_off_and_monitor_stay_with_their_client(server, proxy):
    quiet, monitor, other = Raw(proxy.port), Raw(proxy.port), Raw(proxy.port)
    quiet.send("CLIENT", "REPLY", "OFF")
    quiet.send("SET", "reply:k", "v")
    assert monitor.call("MONITOR") == b"OK"
    assert other.call("GET", "reply:k") == b"v"
    wait_for(lambda: b"reply:k" in str(monitor.reply(2)).encode(), 5, "the monitor to see the GET")
    assert quiet.nothing_within(0.3)
    for client in (quiet, monitor, other):
        client.close()


def test_no_reply_ever_reaches_another_client_under_concurrent_switching(server, proxy):
    """Clients moving between shared and own connections mid-pipeline while others pipeline on
    the shared one: every reply checked against its request."""
    errors = []

    def worker(n: int):
        try:
            client = redis.Redis(port=proxy.port, protocol=2 + n % 2)
            for round_ in range(30):
                pipe = client.pipeline(transaction=round_ % 3 == 0)
                for i in range(10):
                    pipe.set(f"w{n}:{i}", f"{n}-{round_}-{i}")
                    pipe.get(f"w{n}:{i}")
                if round_ % 5 == 0:
                    pipe.execute_command("BLPOP", f"w{n}:none", "0.01")
                if round_ % 7 == 0:
                    pipe.execute_command("EVAL", "return ARGV[1]", "0", f"{n}-{round_}")
                results = pipe.execute()
                gets = [value for value in results[:20][1::2]]
                assert gets == [f"{n}-{round_}-{i}".encode() for i in range(10)], (n, round_, results)
                if round_ % 7 == 0:
                    assert results[-1] == f"{n}-{round_}".encode()
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(repr(exc))

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors, errors[:3]


def test_replies_owed_to_a_client_that_reset_never_reach_the_next_connection(server, proxy):
    """Clients that ask for large replies and reset their connection at once, each followed by
    new clients: the proxy writes straight to a client's socket descriptor (compiled), and a
    descriptor freed by a reset is the next connection's. Every new client gets exactly its own
    reply and nothing after it."""
    import struct

    with redis.Redis(port=server.port) as direct:
        direct.set("leak:big", b"x" * 300_000)  # several writes' worth: the tail waits in the transport
        for i in range(4):
            direct.set(f"leak:own:{i}", f"value-{i}")
    ask_big = hiredis.pack_command(("GET", "leak:big")) * 3
    reset = struct.pack("ii", 1, 0)  # SO_LINGER on, 0 s: close() sends RST
    deadline = time.monotonic() + 60
    for _ in range(60):
        for _ in range(4):
            gone = socket.create_connection(("127.0.0.1", proxy.port), timeout=5)
            gone.sendall(ask_big)
            gone.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, reset)
            gone.close()
        for i in range(4):
            client = Raw(proxy.port)
            assert client.call("GET", f"leak:own:{i}") == f"value-{i}".encode()
            assert client.nothing_within(0.02)
            client.close()
        assert time.monotonic() < deadline
    assert "Traceback" not in proxy.log

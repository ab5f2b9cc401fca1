"""The server-side scripts of V1 and V2, and T1's injected commands, against a real redis-server.

For every case the plain command runs on a fresh database, then the engine's rewrite of it on
the same setup: the reply bytes (raw sockets, RESP2 and RESP3) and the resulting keyspace (DUMP
of every key) must be the same. With the cap set to exactly the size the plain command reaches,
the script must still write; with one less it must answer -NOPERM and write nothing. Twenty
threads writing at once must never take a collection over its cap.
"""

from __future__ import annotations

import shutil
import socket
import threading
from concurrent.futures import ThreadPoolExecutor

import hiredis
import pytest

from proxy.errors import policy_violation
from proxy.policy.decision import SessionState
from proxy.policy.rules.v2_cardinality import FAMILIES, GROWING
from proxy.resp.replies import ReplySplitter
from tests.policy.test_ttl_rules import decide, table, words
from tests.servers import RedisServer

pytestmark = pytest.mark.skipif(shutil.which("redis-server") is None, reason="redis-server not on PATH")


@pytest.fixture(scope="module")
def server():
    process = RedisServer()  # our own, on a free port; stopped by pid
    yield process
    process.close()


class Raw:
    """One connection, one reply at a time, bytes exactly as Redis sends them."""

    def __init__(self, port: int, protocol: int = 2):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.rest = b""
        if protocol == 3:
            assert self.call("HELLO", "3").startswith(b"%")

    def call(self, *args) -> bytes:
        self.sock.sendall(hiredis.pack_command(tuple(args)))
        splitter = ReplySplitter()
        chunk, self.rest = self.rest, b""
        reply = b""
        while True:
            if not chunk:
                chunk = self.sock.recv(65536)
                assert chunk, "connection closed"
            end, done, _ = splitter.scan(chunk, 0, 1)
            reply += chunk[:end]
            if done:
                self.rest = chunk[end:]
                return reply
            chunk = b""

    def run(self, command) -> bytes:
        return self.call(*words(command))

    def close(self):
        self.sock.close()


@pytest.fixture
def conn(server):
    connections = []

    def open_(protocol=2):
        c = Raw(server.port, protocol)
        connections.append(c)
        return c

    open_(2).run("FLUSHALL")
    yield open_
    for c in connections:
        c.close()


def keyspace(c: Raw) -> list:
    """Every key with its type, value (DUMP) and whether it has a TTL."""
    parser = hiredis.Reader()
    parser.feed(c.run("KEYS *"))
    state = []
    for key in sorted(parser.gets()):
        state.append((key, c.call("TYPE", key), c.call("DUMP", key), c.call("PTTL", key) != b":-1\r\n"))
    return state


def fresh(c: Raw, setup) -> None:
    assert c.run("FLUSHALL") == b"+OK\r\n"
    for command in setup:
        reply = c.run(command)
        assert not reply.startswith(b"-"), (command, reply)


def size_of(c: Raw, command) -> int | None:
    """The size of the collection the command grows (None: missing or of another type)."""
    args = words(command)
    name = args[0].decode().lower()
    size_command = FAMILIES[table()[name].group][1]
    reply = c.call(size_command, args[GROWING[name][2]])
    return int(reply[1:-2]) if reply.startswith(b":") else None


def v2_policy(cap: int) -> str:
    return f"rules: {{V2: {{max_elements: {cap}, per_type: {{hash: {cap}}}}}}}"


def through_policy(c: Raw, policy: str, command, protocol: int):
    state = SessionState()
    state.protocol = protocol
    verdict = decide(policy, command, state=state)
    assert verdict is not None
    if verdict.reject is not None:  # decided without the server (V2: more items pushed than the cap)
        return policy_violation(verdict.reject)
    first, *extra = verdict.commands
    reply = c.call(*first)
    for hidden in extra:
        c.call(*hidden)
    return reply


V2_CASES = [
    # (setup, command)
    ([], "HSET h a 1 b 2"),
    (["HSET h a 0 z 9"], "HSET h a 1 b 2 a 3"),
    (["HSET h a 0 b 0"], "HSET h a 1 b 2"),  # nothing new: passes even at any cap
    (["SET h x"], "HSET h a 1"),  # WRONGTYPE, as Redis says it
    ([], "HMSET h a 1 b 2"),
    (["HSET h a 0"], "HSETNX h a 1"),
    ([], "HSETNX h a 1"),
    (["HSET h a 5"], "HINCRBY h a 5"),
    ([], "HINCRBY h a 5"),
    (["HSET h a x"], "HINCRBY h a 5"),  # ERR hash value is not an integer
    (["HSET h a 1.5"], "HINCRBYFLOAT h a 1.1"),
    ([], "HINCRBYFLOAT h b 2.5e3"),
    ([], "LPUSH l a b c"),
    (["RPUSH l x"], "RPUSH l a b"),
    (["SET l x"], "LPUSH l a"),
    ([], "LPUSHX l a"),
    (["RPUSH l x"], "RPUSHX l a b"),
    (["RPUSH l p q"], "LINSERT l BEFORE p x"),
    (["RPUSH l p q"], "LINSERT l AFTER nope x"),
    ([], "LINSERT l AFTER p x"),
    (["RPUSH src a b"], "LMOVE src dst LEFT RIGHT"),
    ([], "LMOVE src dst LEFT RIGHT"),  # nil
    (["RPUSH src a b", "RPUSH dst c"], "RPOPLPUSH src dst"),
    (["RPUSH src a b"], "LMOVE src src LEFT RIGHT"),  # a rotation adds nothing
    (["RPUSH src a", "SET dst x"], "LMOVE src dst LEFT LEFT"),
    ([], "SADD s a b a"),
    (["SADD s a"], "SADD s a b"),
    (["SADD src m", "SADD dst x"], "SMOVE src dst m"),
    (["SADD src m", "SADD dst m"], "SMOVE src dst m"),
    (["SADD src x"], "SMOVE src dst m"),
    ([], "ZADD z 1 a 2 b"),
    (["ZADD z 1 a"], "ZADD z NX INCR 1 a"),  # nil: a null in RESP3
    (["ZADD z 1 a"], "ZADD z INCR 1.1 a"),  # a double in RESP3
    (["ZADD z 1 a"], "ZADD z XX CH 2 a 3 b"),
    (["ZADD z 1 a"], "ZADD z GT CH 0 a 3 b"),
    ([], "ZADD z x a"),  # ERR value is not a valid float
    (["ZADD z 1 a"], "ZINCRBY z 1.1 a"),
    ([], "ZINCRBY z 2 b"),
    (["SET z x"], "ZINCRBY z 1 a"),
    ([], "GEOADD g 13.361389 38.115556 Palermo 15.087269 37.502669 Catania"),
    (["GEOADD g 13.361389 38.115556 Palermo"], "GEOADD g NX CH 13.4 38.1 Palermo 15.0 37.5 Catania"),
    ([], "GEOADD g 200 100 p"),  # ERR invalid longitude,latitude pair
    # one new element on a non-empty collection: the rejection path runs too
    (["HSET h z 0"], "HSETNX h a 1"),
    (["HSET h z 0"], "HINCRBY h a 1"),
    (["HSET h z 0"], "HINCRBYFLOAT h a 1.5"),
    (["RPUSH src a", "RPUSH dst b"], "LMOVE src dst LEFT RIGHT"),
    (["ZADD z 1 a"], "ZINCRBY z 2.5 b"),
    (["ZADD z 1 a"], "ZADD z INCR 2 b"),
]


@pytest.mark.parametrize("protocol", [2, 3])
@pytest.mark.parametrize("setup,command", V2_CASES)
def test_v2_script_replies_like_the_command(conn, protocol, setup, command):
    c = conn(protocol)
    fresh(c, setup)
    initial = keyspace(c)
    before = size_of(c, command)
    plain = c.run(command)
    plain_state = keyspace(c)
    after = size_of(c, command)

    caps = [1000] + ([after] if after else [])
    for cap in caps:
        fresh(c, setup)
        assert through_policy(c, v2_policy(cap), command, protocol) == plain, f"cap {cap}"
        assert keyspace(c) == plain_state, f"cap {cap}"

    if after and after > (before or 0) and after > 1:
        fresh(c, setup)
        reply = through_policy(c, v2_policy(after - 1), command, protocol)
        key = words(command)[GROWING[words(command)[0].decode().lower()][2]]
        assert reply.startswith(b"-NOPERM key '" + key + b"' breaks rule V2 (collection size): keep "), reply
        name, new = words(command)[0].upper(), after - (before or 0)
        by_script = b" at most %d elements (it has %d, %s would add %d)\r\n" % (after - 1, before or 0, name, new)
        by_engine = b" at most %d elements (%s would add %d)\r\n" % (after - 1, name, new)  # pushes, statically
        assert reply.endswith(by_script) or reply.endswith(by_engine), reply
        assert keyspace(c) == initial  # nothing written


def test_v2_script_inside_a_transaction(conn):
    c = conn()
    expected = []
    for through in (False, True):
        fresh(c, ["SADD s a"])
        assert c.run("MULTI") == b"+OK\r\n"
        for command in ("SADD s a b", "HSET h f v", "ZADD z INCR 1.5 m"):
            if through:
                assert through_policy(c, v2_policy(1000), command, 2) == b"+QUEUED\r\n"
            else:
                assert c.run(command) == b"+QUEUED\r\n"
        expected.append((c.run("EXEC"), keyspace(c)))
    assert expected[0] == expected[1]


def test_v2_rejection_inside_a_transaction_is_that_command_only(conn):
    """Redis runs the rest of EXEC: the script's refusal is one error among the replies."""
    c = conn()
    fresh(c, ["SADD s a"])
    c.run("MULTI")
    through_policy(c, v2_policy(1), "SADD s b", 2)
    c.run("SET k v")
    reply = c.run("EXEC")
    assert reply.startswith(b"*2\r\n-NOPERM key 's' breaks rule V2") and reply.endswith(b"+OK\r\n")


@pytest.mark.parametrize("command,cap,per_write", [
    ("SADD s {w}-{i}", 50, 1),
    ("HSET h {w}-{i} 1 {w}-{i}-b 2", 51, 2),
    ("RPUSH l {w}-{i} x y", 100, 3),
    ("ZADD z {i} {w}-{i}", 64, 1),
])
def test_v2_cap_holds_under_concurrent_writers(conn, server, command, cap, per_write):
    policy = v2_policy(cap)
    writers, rounds = 20, 30
    start = threading.Barrier(writers)

    def writer(w):
        c = Raw(server.port)
        accepted = refused = 0
        try:
            start.wait()
            for i in range(rounds):
                reply = through_policy(c, policy, command.format(w=w, i=i), 2)
                if reply.startswith(b"-NOPERM"):
                    refused += 1
                else:
                    assert reply.startswith(b":"), reply
                    accepted += 1
        finally:
            c.close()
        return accepted, refused

    with ThreadPoolExecutor(writers) as pool:
        results = list(pool.map(writer, range(writers)))
    c = conn()
    size = size_of(c, command.format(w=0, i=0))
    accepted = sum(a for a, _ in results)
    assert size <= cap
    assert size == accepted * per_write  # every write that passed was whole, every refusal wrote nothing
    assert cap - size < per_write  # and the collection was filled up to the cap
    assert accepted + sum(r for _, r in results) == writers * rounds


# -- V1: APPEND ---------------------------------------------------------------------------------

V1_CASES = [
    ([], "APPEND k abc"),
    (["SET k 12345"], "APPEND k abc"),
    (["HSET k a 1"], "APPEND k abc"),  # WRONGTYPE
]


@pytest.mark.parametrize("protocol", [2, 3])
@pytest.mark.parametrize("setup,command", V1_CASES)
def test_v1_append_script_replies_like_the_command(conn, protocol, setup, command):
    c = conn(protocol)
    fresh(c, setup)
    plain = c.run(command)
    plain_state = keyspace(c)
    for limit in (1000, 8):
        fresh(c, setup)
        assert through_policy(c, f"rules: {{V1: {{max_bytes: {limit}}}}}", command, protocol) == plain
        assert keyspace(c) == plain_state


def test_v1_append_over_the_limit_writes_nothing(conn):
    c = conn()
    fresh(c, ["SET k 12345"])
    reply = through_policy(c, "rules: {V1: {max_bytes: 7}}", "APPEND k abc", 2)
    assert reply == (b"-NOPERM key 'k' breaks rule V1 (string size): keep string values at most 7 bytes "
                     b"(APPEND would make it 8 bytes)\r\n")
    assert c.run("GET k") == b"$5\r\n12345\r\n"


# -- T1 inject: what the hidden commands do ------------------------------------------------------

INJECT = "rules: {T1: {action: inject, default_ttl: 600}}"


@pytest.mark.parametrize("setup,command,ttls", [
    # ttls: key -> expected TTL in seconds after the command (600: injected; -1: none)
    ([], "SET k v", {"k": 600}),
    (["SET k old EX 100"], "SET k v", {"k": 600}),  # SET replaces the TTL: the new one is injected
    (["SET k old EX 100"], "SET k v KEEPTTL", {"k": 100}),  # EXPIRE NX leaves it
    ([], "SET k v KEEPTTL", {"k": 600}),
    (["SET k old"], "SETNX k v", {"k": 600}),
    ([], "GETSET k v", {"k": 600}),
    ([], "MSET a 1 b 2", {"a": 600, "b": 600}),
    (["HSET h a 1", "EXPIRE h 100"], "HSET h b 2", {"h": 100}),
    ([], "HSET h b 2", {"h": 600}),
    ([], "INCR c", {"c": 600}),
    (["RPUSH src x"], "LMOVE src dst LEFT LEFT", {"dst": 600, "src": -2}),
    (["SET a 1 EX 100"], "RENAME a b", {"b": 100}),
    (["SET a 1"], "RENAME a b", {"b": 600}),
])
def test_t1_injected_commands(conn, setup, command, ttls):
    c = conn()
    fresh(c, setup)
    plain = c.run(command)
    fresh(c, setup)
    assert through_policy(c, INJECT, command, 2) == plain
    for key, ttl in ttls.items():
        got = int(c.call("TTL", key)[1:-2])
        assert got == ttl if ttl < 0 else ttl - 2 <= got <= ttl, (key, got)

"""Every writer checked (issue 14): the writes whose value only the server knows, checked there
(`_write_check`: COPY/RENAME/RENAMENX, BITOP, *STORE, SORT ... STORE, GEO* STORE, RESTORE, PFADD,
PFMERGE), and what the arguments decide (BITFIELD, BLMOVE, XADD), against a real redis-server.

Each case runs the plain command on a fresh database, then the engine's version of it on the
same setup, in RESP2 and RESP3: a write within the rules must give the same reply bytes and the
same keyspace (DUMP of every key, TTL or not); one that breaks a rule must answer `-NOPERM ...
rule <id>` and leave the keyspace as it was (undone, for RESTORE and the HyperLogLogs).
"""

from __future__ import annotations

import shutil

import hiredis
import pytest

from proxy.policy.decision import SessionState
from tests.policy.test_ttl_rules import decide, words
from tests.policy.test_value_scripts import Raw, fresh, keyspace
from tests.policy.test_value_scripts import through_policy as rewritten
from tests.servers import RedisServer

pytestmark = pytest.mark.skipif(shutil.which("redis-server") is None, reason="redis-server not on PATH")

V1 = "rules: {V1: {max_bytes: 100}}"
V2 = "rules: {V2: {max_elements: 3, per_type: {}}}"
K6 = "rules: {K6: {}}"
ALL = "rules: {K6: {}, T1: {action: inject, default_ttl: 600}, V1: {max_bytes: 100}, V2: {max_elements: 3, per_type: {}}}"
SAME = None
S50, S80, S150 = "x" * 50, "y" * 80, "z" * 150
GEO = "GEOADD g 13.36 38.11 a 15.08 37.50 b 13.50 38.00 c 14.00 38.00 d"


def through_policy(c: Raw, policy: str, command, protocol: int) -> bytes:
    """The reply to what the proxy sends for `command`: the command itself when it passes."""
    state = SessionState()
    state.protocol = protocol
    if decide(policy, command, state=state) is None:
        return c.call(*words(command))
    return rewritten(c, policy, command, protocol)


@pytest.fixture(scope="module")
def server():
    process = RedisServer()
    yield process
    process.close()


@pytest.fixture
def conn(server):
    opened = []

    def open_(protocol=2):
        opened.append(Raw(server.port, protocol))
        return opened[-1]

    yield open_
    for c in opened:
        c.close()


CASES = [
    # (policy, setup, command, SAME or the rule that refuses it)
    (V1, [f"SET a {S50}"], "COPY a b", SAME),
    (V1, [f"SET a {S150}"], "COPY a b", "V1"),  # a big string is not copied into another
    (V1, [f"SET a {S150}"], "RENAME a b", "V1"),
    (V1, [f"SET a {S50}"], "RENAMENX a b", SAME),
    (V1, [], "COPY missing b", SAME),  # :0
    (V1, [], "RENAME missing b", SAME),  # -ERR no such key
    (V2, ["SADD a 1 2 3"], "COPY a b", SAME),
    (V2, ["SADD a 1 2 3 4"], "COPY a b", "V2"),
    (V2, ["RPUSH a 1 2 3 4"], "RENAMENX a b", "V2"),
    (V2, ["HSET a f v", "SADD b 1"], "COPY a b REPLACE", SAME),
    (K6, ["RPUSH a x"], "COPY a d:hash", "K6"),  # a list under a hash's name
    (K6, ["RPUSH a x"], "COPY a d:list", SAME),
    (K6, ["HSET a f v"], "RENAME a d:hash", SAME),
    (K6, ["ZADD a 1 m"], "RENAME a d:string", "K6"),
    (K6, ["SET a v"], "RENAMENX a d:string", SAME),
    (V1, [f"SET a {S50}", f"SET b {S80}"], "BITOP OR d a b", SAME),
    (V1, [f"SET a {S50}", f"SET b {S150}"], "BITOP XOR d a b", "V1"),
    (V1, [f"SET a {S150}"], "BITOP NOT d a", "V1"),
    (V1, ["HSET a f v"], "BITOP OR d a", SAME),  # WRONGTYPE, as Redis says it
    (V2, ["SADD a 1 2", "SADD b 2 3"], "SUNIONSTORE d a b", SAME),
    (V2, ["SADD a 1 2", "SADD b 3 4", "SADD d x"], "SUNIONSTORE d a b", "V2"),  # d keeps its value
    (V2, ["SADD a 1 2 3 4", "SADD b 4"], "SINTERSTORE d a b", SAME),
    (V2, ["SADD a 1 2 3 4 5", "SADD b 5"], "SDIFFSTORE d a b", "V2"),
    (V2, ["SET a x"], "SUNIONSTORE d a", SAME),  # WRONGTYPE
    (V2, ["ZADD a 1 x 2 y", "ZADD b 3 z"], "ZUNIONSTORE d 2 a b WEIGHTS 1 2 AGGREGATE MAX", SAME),
    (V2, ["ZADD a 1 x 2 y", "SADD b z w"], "ZUNIONSTORE d 2 a b", "V2"),  # sets count too
    (V2, ["ZADD a 1 x 2 y 3 z 4 w", "ZADD b 1 x"], "ZINTERSTORE d 2 a b", SAME),
    (V2, ["ZADD a 1 x 2 y 3 z 4 w", "ZADD b 1 v"], "ZDIFFSTORE d 2 a b", "V2"),
    (V2, ["ZADD a 1 x 2 y 3 z 4 w"], "ZRANGESTORE d a 0 2", SAME),
    (V2, ["ZADD a 1 x 2 y 3 z 4 w"], "ZRANGESTORE d a 0 -1", "V2"),
    (V2, ["ZADD a 1 x 2 y 3 z 4 w"], "ZRANGESTORE d a 1 +inf BYSCORE LIMIT 0 3", SAME),
    (V2, ["RPUSH l 3 1 2 4"], "SORT l STORE d", "V2"),
    (V2, ["RPUSH l 3 1 2 4"], "SORT l LIMIT 0 3 STORE d", SAME),
    (V2, ["RPUSH l 3 1", "SET w_3 1", "SET w_1 2"], "SORT l BY w_* GET # GET w_* STORE d", "V2"),  # 4 items stored
    (V2, ["RPUSH l 3 1"], "SORT l ALPHA DESC STORE d", SAME),
    (V2, [GEO], "GEOSEARCHSTORE d g FROMLONLAT 14 38 BYRADIUS 500 km", "V2"),
    (V2, [GEO], "GEOSEARCHSTORE d g FROMLONLAT 14 38 BYRADIUS 500 km COUNT 3 STOREDIST", SAME),
    (V2, [GEO], "GEORADIUS g 14 38 500 km STORE d", "V2"),
    (V2, [GEO], "GEORADIUS g 14 38 500 km COUNT 2 ASC STORE d", SAME),
    (V2, [GEO], "GEORADIUSBYMEMBER g a 500 km STOREDIST d", "V2"),
    (V2, [GEO], "GEORADIUSBYMEMBER g a 50 km STORE d", SAME),
    (ALL, ["SADD a 1 2", "SADD b 2 3"], "SUNIONSTORE d:set a b", "T1"),  # T1's hidden EXPIRE follows
    (ALL, ["RPUSH a x y"], "COPY a d:list", SAME),
    (ALL, ["RPUSH a x y"], "RENAME a d:zset", "K6"),
]


@pytest.mark.parametrize("protocol", [2, 3])
@pytest.mark.parametrize("policy, setup, command, refused", CASES)
def test_server_checked_writes(conn, protocol, policy, setup, command, refused):
    c = conn(protocol)
    fresh(c, setup)
    plain = c.run(command)
    plain_state = keyspace(c)
    fresh(c, setup)
    before = keyspace(c)
    reply = through_policy(c, policy, command, protocol)
    if refused is None or refused == "T1":
        assert reply == plain
        state = keyspace(c)
        if refused == "T1":  # the same, and the key written has a TTL now
            assert [k[:3] for k in state] == [k[:3] for k in plain_state] and all(k[3] for k in state if k[0] == b"d:set")
        else:
            assert state == plain_state
    else:
        assert reply.startswith(b"-NOPERM ") and f"rule {refused} ".encode() in reply, reply
        assert keyspace(c) == before


def _dump(c, setup) -> bytes:
    fresh(c, setup)
    parser = hiredis.Reader()
    parser.feed(c.call("DUMP", "src"))
    return parser.gets()


@pytest.mark.parametrize("protocol", [2, 3])
@pytest.mark.parametrize("setup, target, existing, refused", [
    (["SADD src 1 2 3"], "k", [], SAME),
    (["SADD src 1 2 3 4"], "k", [], "V2"),
    (["SADD src 1 2 3 4"], "k", ["SADD k a", "EXPIRE k 500"], "V2"),  # REPLACE undone: k as it was
    (["HSET src a 1 b 2 c 3 d 4"], "k", [], "V2"),
    ([f"SET src {S150}"], "k", [], "V1"),
    ([f"SET src {S50}"], "k", ["RPUSH k old"], SAME),
    (["RPUSH src a"], "k:hash", [], "K6"),  # the payload's type byte: a list
    (["XADD src * a 1", "XADD src * b 2", "XADD src * c 3", "XADD src * d 4"], "k", [], "V2"),
])
def test_restore(conn, protocol, setup, target, existing, refused):
    c = conn(protocol)
    payload = _dump(c, setup)
    command = ["RESTORE", target, "0", payload, "REPLACE"]
    fresh(c, existing)
    plain = c.call(*command)
    plain_state = keyspace(c)
    fresh(c, existing)
    before = keyspace(c)
    policy = "rules: {K6: {}, V1: {max_bytes: 100}, V2: {max_elements: 3, per_type: {}}}"
    reply = through_policy(c, policy, command, protocol)
    if refused is None:
        assert reply == plain and keyspace(c) == plain_state
    else:
        assert reply.startswith(b"-NOPERM ") and f"rule {refused} ".encode() in reply, reply
        assert keyspace(c) == before
    fresh(c, existing)
    assert through_policy(c, policy, ["RESTORE", target, "0", b"not a payload"], protocol) == \
        c.call("RESTORE", target, "0", b"not a payload")  # Redis's own error


def test_restore_without_replace_on_an_existing_key(conn):
    c = conn()
    payload = _dump(c, ["SADD src 1 2 3 4"])
    fresh(c, ["SET k v"])
    assert through_policy(c, V2, ["RESTORE", "k", "0", payload], 2).startswith(b"-BUSYKEY")
    assert c.run("GET k") == b"$1\r\nv\r\n"


@pytest.mark.parametrize("protocol", [2, 3])
def test_hyperloglogs_turning_dense_are_undone(conn, protocol):
    """PFADD of many elements turns a sparse HyperLogLog (tens of bytes) into a dense one of
    12,304 bytes: over a 10 KB V1 limit it is refused and the HyperLogLog left as it was."""
    c = conn(protocol)
    policy = "rules: {V1: {max_bytes: 10240}}"
    many = [f"e{i}" for i in range(3000)]
    fresh(c, ["PFADD h a b c", "EXPIRE h 500"])
    before = keyspace(c)
    reply = through_policy(c, policy, ["PFADD", "h", *many], protocol)
    assert reply.startswith(b"-NOPERM ") and b"rule V1" in reply and b"12304" in reply, reply
    assert keyspace(c) == before and c.run("PFCOUNT h") == b":3\r\n"
    assert through_policy(c, policy, ["PFADD", "h", "d", "e"], protocol) == b":1\r\n"
    fresh(c, [])
    assert through_policy(c, policy, ["PFADD", "big", *many], protocol).startswith(b"-NOPERM ")
    assert c.run("EXISTS big") == b":0\r\n"
    c.call("PFADD", "dense", *many)  # made without the proxy
    fresh_state = keyspace(c)
    assert through_policy(c, policy, "PFMERGE d dense", protocol).startswith(b"-NOPERM ")
    assert keyspace(c) == fresh_state


@pytest.mark.parametrize("command, refused", [
    ("BITFIELD b SET u8 #99 1", SAME),  # bytes 99 (offset 792 bits) + 1 = 100
    ("BITFIELD b SET u8 #100 1", "V1"),
    ("BITFIELD b INCRBY i16 792 1", "V1"),  # bits 792..807: 101 bytes
    ("BITFIELD b GET u8 #1000", SAME),  # a read grows nothing
    ("BITFIELD b OVERFLOW SAT SET u8 0 300", SAME),
])
def test_bitfield_offsets(conn, command, refused):
    c = conn()
    fresh(c, [])
    reply = through_policy(c, V1, command, 2)
    if refused is None:
        fresh(c, [])
        assert reply == c.run(command)
    else:
        assert reply.startswith(b"-NOPERM ") and b"rule V1" in reply and c.run("EXISTS b") == b":0\r\n"


def test_streams_are_capped(conn):
    c = conn()
    policy = "rules: {V2: {max_elements: 3, per_type: {}}}"
    fresh(c, [])
    for _ in range(3):
        assert through_policy(c, policy, "XADD s * f v", 2).startswith(b"$")
    assert through_policy(c, policy, "XADD s * f v", 2).startswith(b"-NOPERM ")
    assert through_policy(c, policy, "XADD s MAXLEN 2 * f v", 2).startswith(b"$")  # trimmed to 2
    assert c.run("XLEN s") == b":2\r\n"
    assert through_policy(c, policy, "XADD s MAXLEN ~ 2 * f v", 2).startswith(b"$")  # 3: still within
    assert through_policy(c, policy, "XADD s NOMKSTREAM * f v", 2).startswith(b"-NOPERM ")


def test_blocking_moves_are_refused(conn):
    c = conn()
    fresh(c, ["RPUSH src a"])
    reply = through_policy(c, V2, "BLMOVE src dst LEFT RIGHT 0", 2)
    assert reply.startswith(b"-NOPERM ") and b"use LMOVE" in reply
    assert c.run("LLEN src") == b":1\r\n"

"""C3's server-side size check and C4's rewrite against a real redis-server, on raw sockets: the
rewritten command must answer exactly what the client's own command answers, in RESP2 and RESP3,
unless the collection is over the limit."""

from __future__ import annotations

import socket

import hiredis
import pytest

from proxy.commands.table import CommandTable
from proxy.policy.decision import SessionState
from proxy.policy.engine import Engine
from proxy.policy.loader import load_policy_text
from proxy.resp.replies import ReplySplitter
from tests.servers import RedisServer

TABLE = CommandTable.from_snapshot()
LIMITED = ["HGETALL", "HKEYS", "HVALS", "SMEMBERS", "SINTER", "SUNION", "LRANGE", "ZRANGE", "ZREVRANGE",
           "ZRANGEBYSCORE", "XRANGE", "SINTERSTORE"]
ENGINE = Engine(load_policy_text(
    "rules:\n  C4: {}\n  C3:\n    commands:\n"
    + "".join(f"      {name}: {{max: 100}}\n" for name in LIMITED)), TABLE)


@pytest.fixture(scope="module")
def server():
    # Our own server on a free port, stopped by its pid: the data below is this module's.
    process = RedisServer()
    yield process
    process.close()


class Raw:
    """One connection speaking raw RESP; `call` returns the exact bytes of one reply."""

    def __init__(self, port: int, protocol: int):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.splitter = ReplySplitter()
        self.protocol = protocol
        if protocol == 3:
            assert self.call(b"HELLO", b"3").startswith(b"%")

    def call(self, *args) -> bytes:
        self.sock.sendall(hiredis.pack_command(tuple(a if isinstance(a, bytes) else str(a).encode() for a in args)))
        data = b""
        while True:
            chunk = self.sock.recv(1 << 20)
            assert chunk, "server closed the connection"
            data += chunk
            _, done, _ = self.splitter.scan(chunk, 0, 1)
            if done:
                return data

    def via_policy(self, *args) -> bytes:
        """The command as the proxy sends it under ENGINE: rewritten, or as it is."""
        args = [a if isinstance(a, bytes) else str(a).encode() for a in args]
        state = SessionState()
        state.protocol = self.protocol
        plan = ENGINE.plan_for(args)
        verdict = ENGINE.decide(plan, args, (), state) if plan else None
        assert verdict is None or verdict.reject is None
        if verdict is not None and verdict.commands:
            [command] = verdict.commands
            assert command[0] in (b"EVAL", b"EVAL_RO", b"UNLINK")
            return self.call(*command)
        return self.call(*args)

    def close(self):
        self.sock.close()


@pytest.fixture(scope="module")
def data(server):
    c = Raw(server.port, 2)
    c.call("FLUSHALL")
    c.call("HSET", "small:h", *[x for i in range(20) for x in (f"field{i}", f"value{i}")])
    c.call("HSET", "big:h", *[x for i in range(101) for x in (f"f{i}", f"v{i}")])
    c.call("SADD", "small:s", *[f"member{i}" for i in range(30)])
    c.call("SADD", "small:s2", *[f"member{i}" for i in range(0, 60, 2)])
    c.call("SADD", "small:ints", *range(0, 50, 3))
    c.call("SADD", "big:s", *[f"m{i}" for i in range(150)])
    c.call("RPUSH", "small:l", *[f"item{i}" for i in range(100)])
    c.call("RPUSH", "big:l", *[f"item{i}" for i in range(300)])
    c.call("ZADD", "small:z", *[x for i in range(40) for x in (f"{i / 3:.17g}", f"z{i}")])
    c.call("ZADD", "small:z", "inf", "top", "-inf", "bottom", "1e300", "huge")
    c.call("ZADD", "big:z", *[x for i in range(200) for x in (str(i), f"z{i}")])
    for i in range(5):
        c.call("XADD", "small:x", f"{i + 1}-0", "f", f"v{i}")
    c.call("SET", "small:str", "v")
    c.close()


SAME = [
    ["HGETALL", "small:h"], ["HKEYS", "small:h"], ["HVALS", "small:h"], ["SMEMBERS", "small:s"],
    ["SMEMBERS", "small:ints"], ["SINTER", "small:s", "small:s2"], ["SUNION", "small:s", "small:ints"],
    ["LRANGE", "small:l", "0", "-1"], ["LRANGE", "big:l", "250", "-1"], ["LRANGE", "big:l", "-150", "-60"],
    ["ZRANGE", "small:z", "0", "-1", "WITHSCORES"], ["ZRANGE", "small:z", "0", "-1", "REV"],
    ["ZRANGE", "small:z", "-inf", "+inf", "BYSCORE", "WITHSCORES"], ["ZREVRANGE", "big:z", "150", "-1", "WITHSCORES"],
    ["ZRANGEBYSCORE", "small:z", "(1", "+inf", "WITHSCORES"], ["XRANGE", "small:x", "-", "+"],
    ["HGETALL", "missing"], ["SMEMBERS", "missing"], ["LRANGE", "missing", "0", "-1"],
    ["HGETALL", "small:str"], ["LRANGE", "small:h", "0", "-1"], ["ZRANGE", "small:z", "0", "-1", "BYSCORE", "BYLEX"],
    ["HGETALL"], ["LRANGE", "small:l", "0", "-1", "extra"],
]


def canonical(reply: bytes, protocol: int):
    """RESP3 maps and sets are unordered (and come out of a Lua table in another order): compare
    their header and their elements; everything else byte for byte."""
    if protocol == 3 and reply[:1] in (b"%", b"~"):
        reader = hiredis.Reader()
        reader.feed(reply)
        value = reader.gets()
        return reply.split(b"\r\n", 1)[0], value if isinstance(value, dict) else sorted(value)
    return reply


@pytest.mark.parametrize("protocol", [2, 3])
@pytest.mark.parametrize("call", SAME, ids=[" ".join(c) for c in SAME])
def test_script_answers_what_the_command_answers(server, data, protocol, call):
    c = Raw(server.port, protocol)
    try:
        plain = c.call(*call)
        via = c.via_policy(*call)
        if protocol == 2 or plain[:1] not in (b"%", b"~"):
            assert via == plain
        else:
            assert canonical(via, protocol) == canonical(plain, protocol)
    finally:
        c.close()


# Bounded by their arguments, or refused by Redis before they run: sent as they are.
NOT_REWRITTEN = [["LRANGE", "big:l", "-150", "-60"], ["HGETALL"], ["LRANGE", "small:l", "0", "-1", "extra"]]


def test_calls_above_were_really_rewritten():
    state = SessionState()
    for call in SAME:
        args = [a.encode() for a in call]
        verdict = ENGINE.decide(ENGINE.plan_for(args), args, (), state)
        assert (verdict is not None and verdict.commands[0][0] in (b"EVAL", b"EVAL_RO")) == (
            call not in NOT_REWRITTEN), call


BIG = [
    (["HGETALL", "big:h"], "key 'big:h' holds more than 100 elements; read it incrementally with HSCAN key <cursor> COUNT 100"),
    (["SMEMBERS", "big:s"], "key 'big:s' holds more than 100 elements; read it incrementally with SSCAN key <cursor> COUNT 100"),
    (["SINTER", "small:s", "big:s"], "a key it reads holds more than 100 elements; read it incrementally with SSCAN key <cursor> COUNT 100"),
    (["LRANGE", "big:l", "0", "-1"], "key 'big:l' holds more than 100 elements; read it in pages of at most 100 elements (LRANGE key 0 99, then 100 ...)"),
    (["LRANGE", "big:l", "199", "-1"], "the range would return more than 100 elements of key 'big:l'; read it in pages of at most 100 elements (LRANGE key 0 99, then 100 ...)"),
    (["ZRANGE", "big:z", "0", "-2", "WITHSCORES"], "the range would return more than 100 elements of key 'big:z'; read it in pages of at most 100 elements (ZRANGE key 0 99, then 100 ..., or ZSCAN)"),
    (["ZRANGEBYSCORE", "big:z", "-inf", "+inf"], "key 'big:z' holds more than 100 elements; add LIMIT <offset> 100 and read page by page"),
]


@pytest.mark.parametrize("protocol", [2, 3])
@pytest.mark.parametrize("call, advice", BIG, ids=[" ".join(c) for c, _ in BIG])
def test_script_rejects_a_collection_over_the_limit(server, data, protocol, call, advice):
    c = Raw(server.port, protocol)
    try:
        assert c.via_policy(*call) == (
            f"-NOPERM command {call[0]} breaks rule C3 (O(N) reads on small collections only): {advice}\r\n").encode()
        assert c.via_policy("LRANGE", "big:l", "200", "-1").startswith(b"*100\r\n")  # 100: within the limit
    finally:
        c.close()


def test_script_write_commands_and_transactions(server, data):
    c = Raw(server.port, 2)
    try:
        assert c.via_policy("SINTERSTORE", "out:s", "small:s", "small:s2") == b":15\r\n"
        assert c.call("SCARD", "out:s") == b":15\r\n"
        assert c.via_policy("SINTERSTORE", "out:s", "small:s", "big:s").startswith(b"-NOPERM command SINTERSTORE")
        assert c.call("SCARD", "out:s") == b":15\r\n"  # nothing written
        # Inside MULTI the script is queued like the command, and EXEC carries its reply.
        assert c.call("MULTI") == b"+OK\r\n"
        assert c.via_policy("HGETALL", "small:h") == b"+QUEUED\r\n"
        assert c.via_policy("HGETALL", "big:h") == b"+QUEUED\r\n"
        exec_reply = c.call("EXEC")
        plain = c.call("HGETALL", "small:h")
        assert exec_reply.startswith(b"*2\r\n" + plain + b"-NOPERM command HGETALL breaks rule C3")
    finally:
        c.close()


def test_error_text_with_line_breaks_in_the_key_stays_one_line(server, data):
    c = Raw(server.port, 2)
    try:
        c.call("RPUSH", "bad\r\nkey", *range(200))
        reply = c.via_policy("LRANGE", b"bad\r\nkey", "0", "-1")
        assert reply.startswith(b"-NOPERM command LRANGE") and reply.count(b"\r\n") == 1
        assert b"key 'bad  key'" in reply
    finally:
        c.close()


@pytest.mark.parametrize("protocol", [2, 3])
def test_c4_unlink_answers_what_del_answers(server, data, protocol):
    c = Raw(server.port, protocol)
    try:
        for args in (["k4:a", "k4:b", "k4:none"], ["k4:none"]):
            c.call("SET", "k4:a", "1"), c.call("RPUSH", "k4:b", *range(1000))
            plain = c.call("DEL", *args)
            c.call("SET", "k4:a", "1"), c.call("RPUSH", "k4:b", *range(1000))
            assert c.via_policy("DEL", *args) == plain
            assert c.call("EXISTS", *args) == b":0\r\n"
    finally:
        c.close()

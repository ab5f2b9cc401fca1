"""T1 (every key has a TTL) under generated traffic: whatever pipelines and transactions of writes
and TTL commands, valid or not, a client sends through the proxy, no key is left on the server
without a TTL.

Hypothesis draws pipelines from a small alphabet (a few keys, two databases): writes that create
keys without a TTL, TTL commands with good and bad options and values (overflows, signs,
options Redis refuses, XX/GT, KEEPTTL with EX...), SELECT, MULTI/EXEC/DISCARD, WATCH, DEL,
RENAME/COPY/MOVE. Each pipeline goes to the proxy in one write (T1 `reject` with T3 bounds), all
replies are read, then the server itself is asked for every key's PTTL in both databases.
"""

from __future__ import annotations

import socket

import hiredis
import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.servers import RedisServer, policy_proxy

POLICY = """\
name: t1-property
rules:
  T1: {action: reject}
  T3: {min_ttl: 1, max_ttl: 100000}
"""
KEYS = ["k1", "k2", "h1", "l1"]
TTLS = ["60", "0", "-1", "abc", "+5", "010", "5000000", "9223372036854776", "9223372036854775807", "1", "4000000000"]

key = st.sampled_from(KEYS)
ttl = st.sampled_from(TTLS)
expire_option = st.sampled_from([[], ["NX"], ["XX"], ["GT"], ["LT"], ["NX", "XX"], ["FOO"]])
set_option = st.sampled_from([[], ["NX"], ["XX"], ["GET"], ["KEEPTTL"]])

writes = st.one_of(
    st.builds(lambda k: ["SET", k, "v"], key),
    st.builds(lambda k, o: ["SET", k, "v", *o], key, set_option),
    st.builds(lambda k: ["HSET", k, "f", "v"], key),
    st.builds(lambda k: ["INCR", k], key),
    st.builds(lambda k: ["APPEND", k, "x"], key),
    st.builds(lambda k: ["LPUSH", k, "x"], key),
    st.builds(lambda k: ["SETNX", k, "v"], key),
    st.builds(lambda a, b: ["MSET", a, "1", b, "2"], key, key),
)
ttl_commands = st.one_of(
    st.builds(lambda c, k, t, o: [c, k, t, *o], st.sampled_from(["EXPIRE", "PEXPIRE", "EXPIREAT", "PEXPIREAT"]),
              key, ttl, expire_option),
    st.builds(lambda k, o, u, t, o2: ["SET", k, "w", *o, u, t, *o2], key, set_option,
              st.sampled_from(["EX", "PX", "EXAT", "PXAT"]), ttl, set_option),
    st.builds(lambda c, k, t: [c, k, t, "w"], st.sampled_from(["SETEX", "PSETEX"]), key, ttl),
    st.builds(lambda k, u, t, p: ["GETEX", k, u, t, *p], key, st.sampled_from(["EX", "PX", "EXAT"]), ttl,
              st.sampled_from([[], ["PERSIST"]])),
    st.builds(lambda k: ["PERSIST", k], key),
)
others = st.one_of(
    st.sampled_from([["SELECT", "0"], ["SELECT", "1"], ["MULTI"], ["EXEC"], ["DISCARD"], ["GET", "k1"]]),
    st.builds(lambda k: ["WATCH", k], key),
    st.builds(lambda k: ["DEL", k], key),
    st.builds(lambda a, b: ["RENAME", a, b], key, key),
    st.builds(lambda a, b: ["COPY", a, b], key, key),
    st.builds(lambda k: ["MOVE", k, "1"], key),
)
pipelines = st.lists(st.one_of(writes, ttl_commands, ttl_commands, others), min_size=1, max_size=14)


@pytest.fixture(scope="module")
def t1_proxy(tmp_path_factory):
    server = RedisServer()
    process = policy_proxy(tmp_path_factory.mktemp("t1"), POLICY, server.url, config="upstream_acl: off\n")
    direct = [redis.Redis(port=server.port, db=db) for db in (0, 1)]
    yield process, direct
    for client in direct:
        client.close()
    process.stop()
    server.close()


def send_pipeline(port: int, commands: list[list[str]]) -> list:
    """One write of every command, then every reply (one each), as hiredis reads them."""
    payload = b"".join(hiredis.pack_command(tuple(command)) for command in commands)
    reader = hiredis.Reader()
    replies = []
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(payload)
        while len(replies) < len(commands):
            data = sock.recv(65536)
            assert data, f"connection closed after {len(replies)} of {len(commands)} replies"
            reader.feed(data)
            while (reply := reader.gets()) is not False:
                replies.append(reply)
    return replies


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pipelines)
def test_every_key_written_has_a_ttl(t1_proxy, commands):
    process, direct = t1_proxy
    direct[0].flushall()
    send_pipeline(process.port, commands)
    for db, client in enumerate(direct):
        left = {name.decode(): client.pttl(name) for name in client.keys("*")}
        assert all(value != -1 for value in left.values()), (db, left, commands)


def test_the_alphabet_reaches_both_outcomes(t1_proxy):
    """The generator's pipelines do write keys (some with TTLs) and get refused: the property
    above is not true for want of writes."""
    process, (direct, _) = t1_proxy
    direct.flushall()
    replies = send_pipeline(process.port, [["SET", "k1", "v"], ["EXPIRE", "k1", "60"], ["SET", "k2", "v"],
                                           ["EXPIRE", "k2", "60", "XX"]])
    assert replies[0] == b"OK" and replies[1] == 1
    assert isinstance(replies[2], hiredis.ReplyError) and "rule T1" in str(replies[2])
    assert direct.pttl("k1") > 0 and not direct.exists("k2")

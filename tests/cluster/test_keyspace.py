"""Whole-keyspace commands over a cluster, sans I/O: node-encoded SCAN cursors and the merges."""

import pytest

from proxy.backends.cluster.keyspace import (
    decode_cursor,
    encode_cursor,
    merge_concat,
    merge_min,
    merge_ok,
    merge_random,
    merge_sum,
    scan_reply,
)


@pytest.mark.parametrize("position, node_cursor", [(0, 0), (1, 0), (2, 7), (0, 1 << 53), (1023, 12345)])
def test_cursor_round_trip(position, node_cursor):
    cursor = encode_cursor(position, node_cursor)
    assert cursor < 1 << 64
    assert decode_cursor(b"%d" % cursor) == (position, node_cursor)


@pytest.mark.parametrize("text", [b"", b"-1", b"abc", b"1" * 21, b"%d" % (1 << 64)])
def test_not_a_cursor(text):
    assert decode_cursor(text) is None


def _scan(cursor: bytes, *keys: bytes) -> bytes:
    elements = b"".join(b"$%d\r\n%s\r\n" % (len(key), key) for key in keys)
    return b"*2\r\n$%d\r\n%s\r\n*%d\r\n" % (len(cursor), cursor, len(keys)) + elements


@pytest.mark.parametrize("reply, position, masters, cursor", [
    (_scan(b"17", b"a"), 0, 3, encode_cursor(0, 17)),  # same master, further on
    (_scan(b"0", b"a"), 0, 3, 1),  # master 0 done: master 1 from its start
    (_scan(b"0"), 1, 3, 2),
    (_scan(b"0", b"z"), 2, 3, 0),  # last master done: the client's loop ends
    (_scan(b"5"), 2, 3, encode_cursor(2, 5)),
])
def test_scan_reply_cursor(reply, position, masters, cursor):
    out = scan_reply(reply, position, masters)
    text = b"%d" % cursor
    assert out.startswith(b"*2\r\n$%d\r\n%s\r\n" % (len(text), text))
    assert out.endswith(reply[reply.index(b"\r\n*") + 2:])  # the keys, byte for byte


def test_scan_error_passes():
    assert scan_reply(b"-ERR syntax error\r\n", 0, 3) == b"-ERR syntax error\r\n"


@pytest.mark.parametrize("merge, replies, expected", [
    (merge_sum, [b":1\r\n", b":2\r\n", b":0\r\n"], b":3\r\n"),
    (merge_sum, [b":1\r\n", b"-ERR x\r\n"], b"-ERR x\r\n"),
    (merge_min, [b":1\r\n", b":0\r\n"], b":0\r\n"),
    (merge_ok, [b"+OK\r\n", b"+OK\r\n"], b"+OK\r\n"),
    (merge_ok, [b"+OK\r\n", b"-READONLY x\r\n"], b"-READONLY x\r\n"),
    (merge_concat, [b"*1\r\n$1\r\na\r\n", b"*0\r\n", b"*2\r\n$1\r\nb\r\n$1\r\nc\r\n"],
     b"*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n"),
    (merge_random, [b"$-1\r\n", b"$-1\r\n"], b"$-1\r\n"),
    (merge_random, [b"_\r\n", b"_\r\n"], b"_\r\n"),
])
def test_merges(merge, replies, expected):
    assert merge(replies) == expected


def test_random_key_only_from_masters_that_have_one():
    picked = {merge_random([b"$-1\r\n", b"$1\r\na\r\n", b"$1\r\nb\r\n"]) for _ in range(200)}
    assert picked == {b"$1\r\na\r\n", b"$1\r\nb\r\n"}


# -- keyless commands to every node: the merges the COMMAND INFO tips choose --------------------

from proxy.backends.cluster.keyspace import (  # noqa: E402
    merge_first,
    merge_for,
    merge_info,
    merge_logical_and,
    merge_one_ok,
    merge_slowlog,
    merge_with_args,
)
from proxy.commands.table import CommandTable  # noqa: E402
from proxy.session.behaviour import FANOUT, NO_CLUSTER, PASS, SCAN, WAIT, Behaviour  # noqa: E402

TABLE = CommandTable.from_snapshot()


@pytest.mark.parametrize("name, merge", [
    ("script|load", merge_ok), ("script|flush", merge_ok), ("script|exists", merge_logical_and),
    ("function|load", merge_ok), ("function|delete", merge_ok), ("config|set", merge_ok),
    ("slowlog|len", merge_sum), ("slowlog|reset", merge_ok), ("dbsize", merge_sum), ("memory|purge", merge_ok),
    ("info", merge_info), ("config|get", merge_first), ("function|list", merge_first),
    ("keys", merge_concat), ("randomkey", merge_random), ("slowlog|get", None),
])
def test_merge_chosen_by_tips_or_table(name, merge):
    spec = next(spec for spec in TABLE.walk() if spec.name == name)
    assert merge_for(name, spec.tips) is merge


def test_tips_are_read_from_the_snapshot():
    spec = next(spec for spec in TABLE.walk() if spec.name == "script|exists")
    assert spec.tips == {"request_policy:all_shards", "response_policy:agg_logical_and"}


@pytest.mark.parametrize("name, action", [
    ("script|load", FANOUT), ("script|exists", FANOUT), ("config|set", FANOUT), ("config|get", FANOUT),
    ("slowlog|get", FANOUT), ("latency|latest", FANOUT), ("info", FANOUT), ("function|load", FANOUT),
    ("cluster|slots", NO_CLUSTER), ("cluster|nodes", NO_CLUSTER),
    ("ping", PASS), ("scan", SCAN), ("wait", WAIT),  # their own handling stays (PING: to one master)
])
def test_cluster_column(name, action):
    behaviour = Behaviour(TABLE)
    container, _, sub = name.partition("|")
    actions = behaviour.subcommands[1][container] if sub else behaviour.actions[1]
    assert actions[sub or container] == action
    standalone = behaviour.subcommands[0][container] if sub else behaviour.actions[0]
    assert standalone[sub or container] not in (FANOUT, NO_CLUSTER)  # one server answers itself


@pytest.mark.parametrize("replies, expected", [
    ([b"*2\r\n:1\r\n:0\r\n", b"*2\r\n:1\r\n:1\r\n"], b"*2\r\n:1\r\n:0\r\n"),
    ([b"*1\r\n:1\r\n", b"*1\r\n:1\r\n", b"*1\r\n:0\r\n"], b"*1\r\n:0\r\n"),
    ([b"*0\r\n", b"*0\r\n"], b"*0\r\n"),
    ([b"*1\r\n:1\r\n", b"-NOSCRIPT x\r\n"], b"-NOSCRIPT x\r\n"),
])
def test_logical_and(replies, expected):
    assert merge_logical_and(replies) == expected


def test_one_succeeded():
    assert merge_one_ok([b"-NOTBUSY x\r\n", b"+OK\r\n"]) == b"+OK\r\n"
    assert merge_one_ok([b"-NOTBUSY x\r\n", b"-NOTBUSY y\r\n"]) == b"-NOTBUSY x\r\n"


def _entry(entry_id: int, time: int) -> bytes:
    return (b"*6\r\n:%d\r\n:%d\r\n:5\r\n*1\r\n$3\r\nset\r\n$9\r\n127.0.0.1\r\n$0\r\n\r\n" % (entry_id, time))


def test_slowlog_get_newest_first_and_counted():
    a = b"*2\r\n" + _entry(1, 300) + _entry(0, 100)
    b = b"*1\r\n" + _entry(0, 200)
    assert merge_slowlog(-1)([a, b]) == b"*3\r\n" + _entry(1, 300) + _entry(0, 200) + _entry(0, 100)
    assert merge_slowlog(2)([a, b]) == b"*2\r\n" + _entry(1, 300) + _entry(0, 200)
    assert merge_with_args("slowlog|get", [b"SLOWLOG", b"GET"])([a, b]).startswith(b"*3\r\n")
    assert merge_slowlog(10)([a, b"-ERR x\r\n"]) == b"-ERR x\r\n"


def _info(text: bytes, verbatim=False) -> bytes:
    if verbatim:
        return b"=%d\r\ntxt:%s\r\n" % (len(text) + 4, text)
    return b"$%d\r\n%s\r\n" % (len(text), text)


@pytest.mark.parametrize("verbatim", [False, True])
def test_info_one_server(verbatim):
    first = b"# Server\r\nredis_version:7.0.15\r\n\r\n# Cluster\r\ncluster_enabled:1\r\n\r\n# Keyspace\r\n" \
            b"db0:keys=3,expires=1,avg_ttl=100\r\n"
    second = b"# Server\r\nredis_version:7.0.15\r\n\r\n# Cluster\r\ncluster_enabled:1\r\n\r\n# Keyspace\r\n" \
             b"db0:keys=5,expires=3,avg_ttl=200\r\n"
    third = b"# Server\r\nredis_version:7.0.15\r\n\r\n# Cluster\r\ncluster_enabled:1\r\n\r\n# Keyspace\r\n"
    merged = merge_info([_info(first, verbatim), _info(second, verbatim), _info(third, verbatim)])
    text = first.replace(b"cluster_enabled:1", b"cluster_enabled:0").replace(
        b"db0:keys=3,expires=1,avg_ttl=100", b"db0:keys=8,expires=4,avg_ttl=175")
    assert merged == _info(text, verbatim)


def test_info_keyspace_only_on_other_masters():
    empty = b"# Keyspace\r\n"
    merged = merge_info([_info(empty), _info(b"# Keyspace\r\ndb0:keys=2,expires=0,avg_ttl=0\r\n")])
    assert merged == _info(b"# Keyspace\r\ndb0:keys=2,expires=0,avg_ttl=0\r\n")


def test_info_error_passes():
    assert merge_info([_info(b"# Server\r\n"), b"-ERR x\r\n"]) == b"-ERR x\r\n"

"""Whole-keyspace commands over a cluster, sans I/O: node-encoded SCAN cursors and the merges."""

import pytest

from proxy.cluster.keyspace import (
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

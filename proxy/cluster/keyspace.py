"""Commands over the whole keyspace of a cluster, sans I/O: SCAN cursors that name their node,
and how the replies of every master become the one reply a client of a single server expects.

A client's SCAN loop must see each key once although the keys live on several masters: the
proxy walks the masters one after another, in the order of `SlotMap.masters()`, and hands the
client a cursor that carries both the master's own cursor and the master's position:
`node_cursor << NODE_BITS | position`. A master's cursor 0 (its walk is over) becomes the next
master's start, and the last master's 0 is the client's 0. Redis cursors are below 2**54, so the
client's cursor stays an unsigned 64-bit number, as clients expect. The merges take the exact
bytes of each master's reply (in master order) and return reply bytes; an error from any master
is the reply.
"""

from __future__ import annotations

import random

from ..routing.multikey import split_array

NODE_BITS = 10  # up to 1024 masters
NODE_MASK = (1 << NODE_BITS) - 1


def decode_cursor(cursor: bytes) -> tuple[int, int] | None:
    """(master position, the master's own cursor), None for what is not a cursor."""
    if not cursor.isdigit() or len(cursor) > 20:
        return None
    value = int(cursor)
    if value >= 1 << 64:
        return None
    return value & NODE_MASK, value >> NODE_BITS


def encode_cursor(position: int, node_cursor: int) -> int:
    return node_cursor << NODE_BITS | position


def scan_reply(reply: bytes, position: int, masters: int) -> bytes:
    """A master's SCAN reply with its cursor replaced by the client's cursor."""
    if reply[:1] != b"*":
        return reply  # an error: the client sees it
    cursor_element, keys = split_array(reply)
    node_cursor = int(cursor_element.split(b"\r\n")[1])
    if node_cursor == 0:
        client_cursor = position + 1 if position + 1 < masters else 0
    else:
        client_cursor = encode_cursor(position, node_cursor)
    text = b"%d" % client_cursor
    return b"*2\r\n$%d\r\n%s\r\n" % (len(text), text) + keys


def _first_error(replies) -> bytes | None:
    for reply in replies:
        if reply[:1] in (b"-", b"!"):
            return reply
    return None


def merge_sum(replies) -> bytes:
    """DBSIZE: the sum of every master's count."""
    error = _first_error(replies)
    if error is not None:
        return error
    return b":%d\r\n" % sum(int(reply[1:].split(b"\r\n")[0]) for reply in replies)


def merge_min(replies) -> bytes:
    """WAIT: the writes are replicated to at least the smallest count of every master written."""
    error = _first_error(replies)
    if error is not None:
        return error
    return b":%d\r\n" % min(int(reply[1:].split(b"\r\n")[0]) for reply in replies)


def merge_ok(replies) -> bytes:
    """FLUSHALL, FLUSHDB, SCRIPT FLUSH...: +OK once every master said it."""
    return _first_error(replies) or replies[0]


def merge_random(replies, choice=random.choice) -> bytes:
    """RANDOMKEY: a key of a master that has one, picked at random; nil when all are empty."""
    error = _first_error(replies)
    if error is not None:
        return error
    keys = [reply for reply in replies if reply[:1] == b"$" and not reply.startswith(b"$-1")]
    return choice(keys) if keys else replies[0]


def merge_concat(replies) -> bytes:
    """KEYS: every master's keys in one array."""
    error = _first_error(replies)
    if error is not None:
        return error
    elements = [element for reply in replies for element in split_array(reply)]
    return b"*%d\r\n" % len(elements) + b"".join(elements)


# Commands sent to every master, with how their replies merge (all lower-case names).
FANOUT = {
    b"dbsize": merge_sum,
    b"randomkey": merge_random,
    b"flushall": merge_ok,
    b"flushdb": merge_ok,
    b"keys": merge_concat,
}

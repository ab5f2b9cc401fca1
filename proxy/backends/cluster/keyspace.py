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

from .routing.multikey import split_array

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


# -- keyless commands that concern every node (COMMAND DOCS tips) -------------------------------
#
# Redis 7 gives the cluster-client contract of a keyless command as tips in COMMAND INFO:
# `request_policy:all_shards` / `all_nodes` (send it to every master; the proxy reaches masters
# only) and a `response_policy` for how the replies become one. The proxy merges them as a cluster
# client does, and answers as one server would: `merge_for(name, tips)` is driven by the tips, with
# `SPECIAL` for what the tips leave open (`response_policy:special`, or no policy at all).


def merge_max(replies) -> bytes:
    error = _first_error(replies)
    if error is not None:
        return error
    return b":%d\r\n" % max(int(reply[1:].split(b"\r\n")[0]) for reply in replies)


def merge_one_ok(replies) -> bytes:
    """one_succeeded (SCRIPT KILL...): the first success, else the first error."""
    return next((reply for reply in replies if reply[:1] not in (b"-", b"!")), replies[0])


def _integers(reply: bytes) -> list[int]:
    return [int(element[1:-2]) for element in split_array(reply)]


def _logical(replies, combine) -> bytes:
    error = _first_error(replies)
    if error is not None:
        return error
    columns = [_integers(reply) for reply in replies]
    if len({len(column) for column in columns}) != 1:
        return replies[0]  # (never: every master got the same arguments)
    merged = [combine(values) for values in zip(*columns)]
    return b"*%d\r\n" % len(merged) + b"".join(b":%d\r\n" % value for value in merged)


def merge_logical_and(replies) -> bytes:
    """SCRIPT EXISTS: a script exists only if every master has it (element by element)."""
    return _logical(replies, lambda values: int(all(values)))


def merge_logical_or(replies) -> bytes:
    return _logical(replies, lambda values: int(any(values)))


def merge_first(replies) -> bytes:
    """Every master must answer; the first one's reply stands for all (CONFIG GET, FUNCTION LIST,
    MEMORY DOCTOR...: the same on every master once every master got the same changes)."""
    return _first_error(replies) or replies[0]


def _bulk_text(reply: bytes) -> tuple[bytes, bytes] | None:
    """(type prefix for re-encoding, text) of a bulk or verbatim string reply."""
    if reply[:1] == b"$":
        head, _, rest = reply.partition(b"\r\n")
        return b"", rest[:int(head[1:])]
    if reply[:1] == b"=":
        head, _, rest = reply.partition(b"\r\n")
        body = rest[:int(head[1:])]
        return body[:4], body[4:]
    return None


def _keyspace_line(lines: list[bytes]) -> bytes:
    """db0:keys=..,expires=..,avg_ttl=.. of several masters as one: counts summed, avg_ttl
    weighted by the keys with an expiry."""
    totals: dict[bytes, int] = {}
    weighted = 0
    for line in lines:
        fields = dict(part.split(b"=", 1) for part in line.split(b":", 1)[1].split(b","))
        for name, value in fields.items():
            if name == b"avg_ttl":
                weighted += int(value) * int(fields.get(b"expires", b"0"))
            else:
                totals[name] = totals.get(name, 0) + int(value)
        totals.setdefault(b"avg_ttl", 0)
    expires = totals.get(b"expires", 0)
    totals[b"avg_ttl"] = weighted // expires if expires else 0
    db = lines[0].split(b":", 1)[0]
    return db + b":" + b",".join(b"%s=%d" % item for item in totals.items())


def merge_info(replies, cluster_enabled: bool = False) -> bytes:
    """INFO as one server answers it: the first master's text, the keyspace section summed over
    every master, and `cluster_enabled:0` (the proxy presents itself as a standalone server;
    `cluster_enabled:1` as the one-node cluster of `face: cluster`, `merge_info_cluster`)."""
    error = _first_error(replies)
    if error is not None:
        return error
    texts = [_bulk_text(reply) for reply in replies]
    if any(text is None for text in texts):
        return replies[0]
    prefix, first = texts[0]
    per_db: dict[bytes, list[bytes]] = {}
    for _prefix, text in texts:
        for line in text.split(b"\r\n"):
            if line.startswith(b"db") and b":keys=" in line:
                per_db.setdefault(line.split(b":", 1)[0], []).append(line)
    out = []
    for line in first.split(b"\r\n"):
        if line.startswith(b"db") and b":keys=" in line:
            continue  # (every master's, summed, under the section's title)
        if line == b"cluster_enabled:1" and not cluster_enabled:
            line = b"cluster_enabled:0"
        out.append(line)
        if line == b"# Keyspace":
            out.extend(_keyspace_line(per_db[db]) for db in sorted(per_db, key=lambda db: int(db[2:] or 0)))
    body = prefix + b"\r\n".join(out)
    head = b"=" if prefix else b"$"
    return head + b"%d\r\n" % len(body) + body + b"\r\n"


def merge_info_cluster(replies) -> bytes:
    return merge_info(replies, cluster_enabled=True)


def _slowlog_time(entry: bytes) -> int:
    # *6\r\n:<id>\r\n:<timestamp>\r\n...
    return int(entry.split(b"\r\n", 3)[2][1:])


def merge_slowlog(count: int):
    """SLOWLOG GET [count]: every master's entries, newest first, `count` of them (-1: all)."""
    def merge(replies) -> bytes:
        error = _first_error(replies)
        if error is not None:
            return error
        entries = [entry for reply in replies for entry in split_array(reply)]
        entries.sort(key=_slowlog_time, reverse=True)
        if count >= 0:
            entries = entries[:count]
        return b"*%d\r\n" % len(entries) + b"".join(entries)
    return merge


def merge_latency(replies) -> bytes:
    """LATENCY LATEST/HISTORY: every master's events in one array."""
    return merge_concat(replies)


RESPONSE_POLICIES = {
    "all_succeeded": merge_ok,
    "one_succeeded": merge_one_ok,
    "agg_sum": merge_sum,
    "agg_min": merge_min,
    "agg_max": merge_max,
    "agg_logical_and": merge_logical_and,
    "agg_logical_or": merge_logical_or,
}

# What the tips leave open (`response_policy:special` or none), and keyless commands that concern
# every node but carry no tips in 7.0. None: the merge takes the arguments (`merge_with_args`).
SPECIAL = {
    "info": merge_info,
    "slowlog|get": None,
    "latency|latest": merge_latency,
    "latency|history": merge_latency,
    "latency|doctor": merge_first,
    "latency|graph": merge_first,
    "latency|histogram": merge_first,
    "memory|doctor": merge_first,
    "memory|stats": merge_first,
    "memory|malloc-stats": merge_first,
    "config|get": merge_first,
    "config|resetstat": merge_ok,
    "config|rewrite": merge_ok,
    "function|list": merge_first,
    "role": merge_first,  # (presented as a master without replicas: presented.py)
    "acl|log": merge_first,  # (its entries' laddr the proxy's: presented.py; RESET on every master)
}


def fans_out(name: str, tips) -> bool:
    """A keyless command that concerns every node: to every master."""
    return name in SPECIAL or "request_policy:all_shards" in tips or "request_policy:all_nodes" in tips


def every_node(tips) -> bool:
    """A keyless command whose state Redis keeps on each node, replicas included, and that changes it
    (`request_policy:all_nodes` answered `all_succeeded`: SCRIPT LOAD/FLUSH, CONFIG SET, SLOWLOG
    RESET, LATENCY RESET): to every replica too, so that a replica a failover promotes has it.
    (FUNCTION LOAD/DELETE/FLUSH are `all_shards`: a master replicates functions to its replicas.)"""
    return "request_policy:all_nodes" in tips and "response_policy:all_succeeded" in tips


def merge_for(name: str, tips):
    """The merge of every master's reply to `name` (None: it takes the arguments)."""
    if name in SPECIAL:
        return SPECIAL[name]
    for tip in tips:
        if tip.startswith("response_policy:"):
            merge = RESPONSE_POLICIES.get(tip.partition(":")[2])
            if merge is not None:
                return merge
    return FANOUT.get(name.encode(), merge_first)


def merge_with_args(name: str, args):
    """The merge of a command whose merge depends on its arguments (SLOWLOG GET's count)."""
    if name == "slowlog|get":
        count = 10
        if len(args) > 2:
            try:
                count = int(args[2])
            except ValueError:
                count = 10  # (Redis answers the error; the merge passes the first error on)
        return merge_slowlog(count)
    raise KeyError(name)

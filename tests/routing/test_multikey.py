"""Planner decisions, splitting and merging: tables against a fixed map (byte-exact), then the
same decisions and merged replies against a real cluster, compared with a standalone
redis-server answering the unsplit command (RESP2 and RESP3)."""

from __future__ import annotations

import shlex

import hiredis
import pytest

from proxy.backends.cluster.routing.multikey import (
    SPLIT_COMMANDS,
    Forward,
    Planner,
    Reject,
    Split,
    SubCommand,
    merge_all_ok,
    merge_sum,
    merge_values,
    split_array,
)
from proxy.backends.cluster.routing.redirect import CLUSTERDOWN_SLOT_NOT_SERVED, CROSSSLOT, ClusterError, classify_error
from proxy.backends.cluster.routing.slotmap import SlotMap
from proxy.backends.cluster.routing.slots import hash_slot
from proxy.config import Address

from .raw_client import Conn, call

A, B, C = (Address("10.0.0.%d" % i, 6379) for i in range(1, 4))
MAP = SlotMap.from_ranges([(0, 5460, A, []), (5461, 10922, B, []), (10923, 16383, C, [])])
GAP = SlotMap.from_ranges([(0, 5460, A, []), (5461, 10922, B, [])])  # 10923-16383 unowned
# Slots of the keys used below: a 15495 (C), {a}x 15495 (C), foo 12182 (C), x 16287 (C),
# b 3300 (A), k2 449 (A), c 7365 (B), bar 5061 (A), d 11298 (C).
assert [hash_slot(k) for k in (b"a", b"{a}x", b"foo", b"b", b"c")] == [15495, 15495, 12182, 3300, 7365]


@pytest.fixture(scope="module")
def planner(table) -> Planner:
    return Planner(table)


def args_of(line: str) -> list[bytes]:
    return [a.encode() for a in shlex.split(line)]


ANY = Forward(None, None)
# (command line, expected decision: a Forward, a Reject, or "split")
DECISIONS = [
    ("PING", ANY),
    ("GET a", Forward(15495, C)),
    ("get b", Forward(3300, A)),
    ("NOSUCHCOMMAND a b", ANY),
    ("CLIENT LIST", ANY),
    ("OBJECT ENCODING c", Forward(7365, B)),
    ("EVAL 'return 1' 0", ANY),
    ("EVAL 'return 1' 2 a {a}x", Forward(15495, C)),
    ("EVAL 'return 1' 2 a b", Reject(CROSSSLOT)),
    ("MGET a {a}x", Forward(15495, C)),
    ("MGET a", Forward(15495, C)),
    ("MGET a b", "split"),
    ("mget a b c", "split"),
    ("MGET a foo", "split"),  # two slots on one node: still split (Redis checks slots, not nodes)
    ("DEL a b", "split"),
    ("UNLINK a b", "split"),
    ("EXISTS a b a", "split"),
    ("TOUCH a b", "split"),
    ("MSET a 1 b 2", "split"),
    ("MSET a 1 {a}x 2", Forward(15495, C)),
    ("MSET a 1 b", Reject(CROSSSLOT)),  # not whole pairs: Redis Cluster says CROSSSLOT too
    ("MSETNX a 1 b 2", Reject(CROSSSLOT)),  # atomic: never split
    ("RENAME a b", Reject(CROSSSLOT)),
    ("RENAME a {a}x", Forward(15495, C)),
    ("RENAME a b c", Forward(15495, C)),  # arity error: Redis answers it before looking at slots
    ("MGET", ANY),  # arity error, no key
    ("SUNIONSTORE d a b", Reject(CROSSSLOT)),
    ("SORT a STORE b", Reject(CROSSSLOT)),
    ("SORT a BY w_* GET o_*", Forward(15495, C)),
    ("XREAD COUNT 1 STREAMS a b 0 0", Reject(CROSSSLOT)),
    ("BLMPOP 0 2 a b LEFT", Reject(CROSSSLOT)),
    ("SPUBLISH a hello", Forward(15495, C)),  # shard channels route by slot
    ("SSUBSCRIBE a b", Reject(CROSSSLOT)),
    ("WATCH a b", Reject(CROSSSLOT)),
    ("PFCOUNT a b", Reject(CROSSSLOT)),
]


@pytest.mark.parametrize(("line", "expected"), DECISIONS, ids=[d[0] for d in DECISIONS])
def test_decisions(planner: Planner, line: str, expected) -> None:
    decision = planner.plan(args_of(line), MAP.master_for_slot)
    if expected == "split":
        assert isinstance(decision, Split)
        assert decision.merger is SPLIT_COMMANDS[line.split()[0].lower()]
    else:
        assert decision == expected


@pytest.mark.parametrize(("line", "expected"), [
    ("GET a", Reject(CLUSTERDOWN_SLOT_NOT_SERVED)),
    ("GET b", Forward(3300, A)),
    ("MGET b c", "split"),
    ("MGET b a", Reject(CLUSTERDOWN_SLOT_NOT_SERVED)),
    ("RENAME a b", Reject(CROSSSLOT)),
    ("PING", ANY),
])
def test_unowned_slots(planner: Planner, line: str, expected) -> None:
    decision = planner.plan(args_of(line), GAP.master_for_slot)
    assert isinstance(decision, Split) if expected == "split" else decision == expected


# (command line, [(node, slot, sub-command line, key indexes)], by_node)
SPLITS = [
    ("MGET a b {a}x c", [(C, 15495, "MGET a {a}x", (0, 2)), (A, 3300, "MGET b", (1,)), (B, 7365, "MGET c", (3,))],
     {C: [0], A: [1], B: [2]}),
    ("mget b a foo b", [(A, 3300, "mget b b", (0, 3)), (C, 15495, "mget a", (1,)), (C, 12182, "mget foo", (2,))],
     {A: [0], C: [1, 2]}),
    ("MSET a 1 b '' {a}x 'x y'", [(C, 15495, "MSET a 1 {a}x 'x y'", (0, 2)), (A, 3300, "MSET b ''", (1,))],
     {C: [0], A: [1]}),
    ("DEL x a", [(C, 16287, "DEL x", (0,)), (C, 15495, "DEL a", (1,))], {C: [0, 1]}),
    ("EXISTS a b a", [(C, 15495, "EXISTS a a", (0, 2)), (A, 3300, "EXISTS b", (1,))], {C: [0], A: [1]}),
]


@pytest.mark.parametrize(("line", "subs", "by_node"), SPLITS, ids=[s[0] for s in SPLITS])
def test_split(planner: Planner, line: str, subs, by_node) -> None:
    split = planner.plan(args_of(line), MAP.master_for_slot)
    assert isinstance(split, Split)
    expected = tuple(SubCommand(node, slot, tuple(args_of(sub)), keys) for node, slot, sub, keys in subs)
    assert split.subcommands == expected
    assert split.key_count == sum(len(s.keys) for s in expected)
    assert split.by_node() == by_node
    for sub in split.subcommands:
        assert sub.encode() == b"*%d\r\n" % len(sub.args) + b"".join(
            b"$%d\r\n%s\r\n" % (len(a), a) for a in sub.args)


def test_split_keeps_binary_arguments(planner: Planner) -> None:
    args = [b"MSET", b"\x00{a}", b"v\r\n1", b"\xff", b"", "ключ".encode(), b"\x00"]
    split = planner.plan(args, MAP.master_for_slot)
    assert isinstance(split, Split)
    assert sorted(a for sub in split.subcommands for a in sub.args[1:]) == sorted(args[1:])
    for sub in split.subcommands:
        assert all(hash_slot(k) == sub.slot for k in sub.args[1::2])


def _split_for(sub_keys: list[tuple[int, ...]], merger) -> Split:
    subs = tuple(SubCommand(A, i, (b"X",), keys) for i, keys in enumerate(sub_keys))
    return Split(subs, sum(map(len, sub_keys)), merger)


# (key indexes per sub-command, sub-replies, merged reply)
MERGE_VALUES = [
    ([(0, 2), (1,)], [b"*2\r\n$1\r\n1\r\n$-1\r\n", b"*1\r\n$1\r\n2\r\n"], b"*3\r\n$1\r\n1\r\n$1\r\n2\r\n$-1\r\n"),
    ([(1,), (0,)], [b"*1\r\n$0\r\n\r\n", b"*1\r\n$4\r\n\r\n\r\n\r\n"], b"*2\r\n$4\r\n\r\n\r\n\r\n$0\r\n\r\n"),
    ([(2,), (0, 1)], [b"*1\r\n_\r\n", b"*2\r\n$2\r\n\x00\xff\r\n_\r\n"], b"*3\r\n$2\r\n\x00\xff\r\n_\r\n_\r\n"),
    ([(0,), (1,)], [b"*1\r\n$3\r\nabc\r\n", b"-ERR boom\r\n"], b"-ERR boom\r\n"),
    ([(0,), (1,)], [b"-MOVED 1 h:1\r\n", b"-ERR second\r\n"], b"-MOVED 1 h:1\r\n"),
    ([(0, 1, 2)], [b"*3\r\n:1\r\n*2\r\n+a\r\n$-1\r\n%1\r\n+k\r\n+v\r\n"], b"*3\r\n:1\r\n*2\r\n+a\r\n$-1\r\n%1\r\n+k\r\n+v\r\n"),
]


@pytest.mark.parametrize(("keys", "replies", "merged"), MERGE_VALUES)
def test_merge_values(keys, replies, merged) -> None:
    assert _split_for(keys, merge_values).merge(replies) == merged


@pytest.mark.parametrize(("replies", "merged"), [
    ([b":1\r\n", b":0\r\n", b":2\r\n"], b":3\r\n"),
    ([b":0\r\n"], b":0\r\n"),
    ([b":9223372036854775807\r\n", b":1\r\n"], b":9223372036854775808\r\n"),
    ([b":1\r\n", b"-READONLY You can't write against a read only replica.\r\n"],
     b"-READONLY You can't write against a read only replica.\r\n"),
])
def test_merge_sum(replies, merged) -> None:
    assert _split_for([(i,) for i in range(len(replies))], merge_sum).merge(replies) == merged


@pytest.mark.parametrize(("replies", "merged"), [
    ([b"+OK\r\n", b"+OK\r\n"], b"+OK\r\n"),
    ([b"+OK\r\n", b"-OOM command not allowed when used memory > 'maxmemory'.\r\n", b"-ERR x\r\n"],
     b"-OOM command not allowed when used memory > 'maxmemory'.\r\n"),
])
def test_merge_all_ok(replies, merged) -> None:
    assert _split_for([(i,) for i in range(len(replies))], merge_all_ok).merge(replies) == merged


@pytest.mark.parametrize(("merger", "keys", "replies"), [
    (merge_values, [(0, 1)], [b"*1\r\n$1\r\nx\r\n"]),  # fewer values than keys
    (merge_values, [(0,)], [b"$1\r\nx\r\n"]),
    (merge_values, [(0,)], [b"*1\r\n$1\r\nx\r\n:1\r\n"]),  # trailing bytes
    (merge_values, [(0,)], [b"*1\r\n$3\r\nx\r\n"]),  # cut short
    (merge_values, [(0,)], [b"*-1\r\n"]),
    (merge_sum, [(0,)], [b"+OK\r\n"]),
    (merge_all_ok, [(0,)], [b"+QUEUED\r\n"]),
    (merge_sum, [(0,), (1,)], [b":1\r\n"]),  # a reply missing
])
def test_merge_refuses_unexpected_replies(merger, keys, replies) -> None:
    with pytest.raises(ValueError):
        _split_for(keys, merger).merge(replies)


@pytest.mark.parametrize(("reply", "elements"), [
    (b"*0\r\n", []),
    (b"*2\r\n$-1\r\n$1\r\n*\r\n", [b"$-1\r\n", b"$1\r\n*\r\n"]),
    (b"*2\r\n*1\r\n:1\r\n~1\r\n#t\r\n", [b"*1\r\n:1\r\n", b"~1\r\n#t\r\n"]),
])
def test_split_array(reply: bytes, elements: list[bytes]) -> None:
    assert split_array(reply) == elements


# -- against a real cluster and a standalone server -------------------------------------


def _live_planner(cluster, table):
    first = cluster.addresses[0]
    return Planner(table), SlotMap.from_cluster_shards(call(first, "CLUSTER", "SHARDS"), first)


def _run_split(split: Split, conns: dict[Address, Conn]) -> bytes:
    replies: list[bytes] = [b""] * len(split.subcommands)
    for node, indexes in split.by_node().items():
        got = conns[node].raw(*(split.subcommands[i].args for i in indexes))  # one pipeline per node
        for i, reply in zip(indexes, got):
            replies[i] = reply
    return split.merge(replies)


P = "rg-routing:"
LIVE_SCRIPT = [
    f"MSET {P}a 1 {P}b '' {P}c 'x\r\ny' {P}d 4 {P}{{t}}1 5 {P}{{t}}2 6",
    f"MGET {P}a {P}nope {P}b {P}c {P}{{t}}2 {P}d {P}a {P}{{t}}1",
    f"EXISTS {P}a {P}a {P}nope {P}c {P}{{t}}1",
    f"TOUCH {P}a {P}nope {P}d",
    f"DEL {P}a {P}nope {P}b",
    f"MGET {P}a {P}b {P}c {P}d",
    f"UNLINK {P}c {P}d {P}{{t}}1 {P}{{t}}2 {P}a",
    f"MGET {P}c {P}d {P}{{t}}1",
    f"MSET {P}e 1 {P}f",  # malformed: CROSSSLOT here, and not split
]


@pytest.mark.parametrize("protocol", [2, 3])
def test_live_split_and_merge_match_a_standalone_server(cluster, redis_server, table, protocol) -> None:
    planner, slotmap = _live_planner(cluster, table)
    conns = {a: Conn(a) for a in slotmap.masters()}
    direct = Conn(redis_server.port)
    try:
        for conn in [*conns.values(), direct]:
            conn.raw(("HELLO", str(protocol)))
        split_count = 0
        for line in LIVE_SCRIPT:
            args = args_of(line)
            decision = planner.plan(args, slotmap.master_for_slot)
            theirs = direct.raw(args)[0]
            if isinstance(decision, Split):
                split_count += 1
                assert len({s.node for s in decision.subcommands}) > 1
                assert _run_split(decision, conns) == theirs, line
            else:
                assert decision == Reject(CROSSSLOT) and line.startswith("MSET") and args[-1].endswith(b"f")
                assert conns[slotmap.masters()[0]].raw(args)[0] == CROSSSLOT
        assert split_count == len(LIVE_SCRIPT) - 1
    finally:
        direct.raw(("DEL", *[f"{P}{k}" for k in ("a", "b", "c", "d", "e", "f", "{t}1", "{t}2")]))
        for conn in [*conns.values(), direct]:
            conn.close()


# Commands whose decision is checked against what the cluster itself answers.
LIVE_DECISIONS = [
    "GET a", "SET b 1", "MGET a {a}x", "RENAME a b", "RENAME nope {nope}2", "RENAME a b c",
    "SUNIONSTORE d a b", "EVAL 'return 1' 2 a b", "EVAL 'return 1' 2 a {a}x", "MSETNX a 1 b 2",
    "MSET a 1 b", "SORT a STORE b", "XREAD COUNT 1 STREAMS a b 0 0", "SPUBLISH a hello",
    "SPUBLISH b hello", "SSUBSCRIBE a b", "PFCOUNT a b", "OBJECT ENCODING c", "DEL a", "EXISTS a {a}b",
    "WATCH a b", "BLMPOP 0 2 a b LEFT",
]


@pytest.mark.parametrize("line", LIVE_DECISIONS)
def test_live_decisions_match_the_cluster(cluster, table, line) -> None:
    planner, slotmap = _live_planner(cluster, table)
    args = args_of(line)
    decision = planner.plan(args, slotmap.master_for_slot)
    try:
        if isinstance(decision, Reject):
            for node in slotmap.masters():  # every node refuses it the same way
                with Conn(node) as conn:
                    assert conn.raw(args)[0] == decision.reply
            return
        assert isinstance(decision, Forward) and decision.node is not None
        with Conn(decision.node) as conn:
            reply = conn.raw(args)[0]
        assert classify_error(reply) is None, reply  # runs there (or fails for its own reasons)
        for other in slotmap.masters():
            if other != decision.node:
                with Conn(other) as conn:
                    wrong = conn.raw(args)[0]
                if reply.startswith(b"-ERR wrong number of arguments"):
                    assert wrong == reply
                else:
                    assert classify_error(wrong) is ClusterError.MOVED
                    assert wrong.endswith(b" 127.0.0.1:%d\r\n" % decision.node.port)
    finally:
        for key in (b"a", b"b", b"d", b"{a}x"):
            call(slotmap.master_for_key(key), "DEL", key)


def test_live_same_node_two_slots_is_crossslot(cluster) -> None:
    """Why splits are per slot: a node refuses keys of two slots even when it owns both."""
    first = cluster.addresses[0]
    slotmap = SlotMap.from_cluster_shards(call(first, "CLUSTER", "SHARDS"), first)
    node = slotmap.master_for_key(b"a")
    other = next(b"k%d" % i for i in range(10000)
                 if slotmap.master_for_key(b"k%d" % i) == node and hash_slot(b"k%d" % i) != hash_slot(b"a"))
    with Conn(node) as conn:
        assert conn.raw((b"MGET", b"a", other))[0] == CROSSSLOT
    assert hiredis.pack_command((b"MGET", b"a")) == SubCommand(node, 0, (b"MGET", b"a"), (0,)).encode()

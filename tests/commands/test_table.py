import json
import timeit

import pytest

from proxy.commands import DEFAULT_SNAPSHOT, CommandSpec, CommandTable, KeySpec

from .cases import as_bytes


def test_snapshot_is_redis_7_0(table: CommandTable) -> None:
    assert table.redis_version.startswith("7.0.")
    assert len(table) > 200
    assert sum(len(c.subcommands) for c in table) > 100
    assert all(isinstance(c, CommandSpec) for c in table.walk())


@pytest.mark.parametrize("name", [b"get", b"GET", b"Get", b"gEt"])
def test_lookup_is_case_insensitive(table: CommandTable, name: bytes) -> None:
    assert table.lookup([name, b"k"]) is table["get"]


@pytest.mark.parametrize(("args", "expected"), [
    ([b"CLIENT", b"SETNAME", b"x"], "client|setname"),
    ([b"client", b"setname", b"x"], "client|setname"),
    ([b"Client", b"SetName", b"x"], "client|setname"),
    ([b"CONFIG", b"get", b"*"], "config|get"),
    ([b"OBJECT", b"ENCODING", b"k"], "object|encoding"),
    ([b"xgroup", b"CREATE", b"k", b"g", b"$"], "xgroup|create"),
    ([b"CLIENT"], "client"),  # missing subcommand: the container
    ([b"CLIENT", b"NOSUCH"], "client"),  # unknown subcommand: the container
    ([b"GET", b"setname"], "get"),  # not a container
])
def test_lookup_resolves_subcommands(table: CommandTable, args, expected: str) -> None:
    spec = table.lookup(args)
    assert spec is not None and spec.name == expected


@pytest.mark.parametrize("args", [[], [b"NOSUCH"], [b""], [b"client|setname"]])
def test_lookup_unknown(table: CommandTable, args) -> None:
    assert table.lookup(args) is None


def test_containment_and_get(table: CommandTable) -> None:
    assert "get" in table and b"GET" in table and "CLIENT|SETNAME" in table
    assert "nosuch" not in table and 42 not in table
    assert table.get("Client|SetName") is table["client"].subcommands["setname"]
    with pytest.raises(KeyError):
        table["nosuch"]
    assert table["client|setname"].container == "client" and table["get"].container is None


@pytest.mark.parametrize(("name", "flags", "acl", "group"), [
    ("keys", {"readonly"}, {"keyspace", "read", "slow", "dangerous"}, "generic"),
    ("flushall", {"write"}, {"keyspace", "write", "slow", "dangerous"}, "server"),
    ("blpop", {"write", "blocking"}, {"write", "list", "slow", "blocking"}, "list"),
    ("get", {"readonly", "fast"}, {"read", "string", "fast"}, "string"),
    ("set", {"write", "denyoom"}, {"write", "string", "slow"}, "string"),
    ("hset", {"write", "denyoom", "fast"}, {"write", "hash", "fast"}, "hash"),
    ("zadd", {"write", "denyoom", "fast"}, {"write", "sortedset", "fast"}, "sorted-set"),
    ("sadd", {"write", "denyoom", "fast"}, {"write", "set", "fast"}, "set"),
    ("xadd", {"write", "denyoom", "fast"}, {"write", "stream", "fast"}, "stream"),
    ("geoadd", {"write", "denyoom"}, {"write", "geo", "slow"}, "geo"),
    ("pfadd", {"write", "denyoom", "fast"}, {"write", "hyperloglog", "fast"}, "hyperloglog"),
    ("setbit", {"write", "denyoom"}, {"write", "bitmap", "slow"}, "bitmap"),
    ("eval", {"noscript", "movablekeys"}, {"scripting", "slow"}, "scripting"),
    ("multi", {"noscript", "fast"}, {"transaction", "fast"}, "transactions"),
    ("subscribe", {"pubsub", "noscript"}, {"pubsub", "slow"}, "pubsub"),
    ("auth", {"noscript", "no_auth"}, {"connection", "fast"}, "connection"),
    ("client|setname", {"noscript"}, {"connection", "slow"}, "connection"),
    ("config|set", {"admin", "noscript"}, {"admin", "slow", "dangerous"}, "server"),
    ("cluster|info", set(), {"slow"}, "cluster"),
    ("sort", {"write", "denyoom", "movablekeys"}, {"write", "dangerous"}, "generic"),
])
def test_flags_acl_and_group_are_redis_own(table: CommandTable, name, flags, acl, group) -> None:
    spec = table[name]
    assert flags <= spec.flags
    assert acl <= spec.acl_categories
    assert spec.group == group
    assert not any(c.startswith("@") or c != c.lower() for c in spec.acl_categories)
    assert all(f == f.lower() for f in spec.flags)


def test_key_spec_shapes(table: CommandTable) -> None:
    (ks,) = table["get"].key_specs
    assert (ks.begin_search.kind, ks.begin_search.pos) == ("index", 1)
    assert (ks.find_keys.kind, ks.find_keys.lastkey, ks.find_keys.keystep) == ("range", 0, 1)
    (ks,) = table["xread"].key_specs
    assert (ks.begin_search.kind, ks.begin_search.keyword, ks.begin_search.startfrom) == ("keyword", "STREAMS", 1)
    assert (ks.find_keys.lastkey, ks.find_keys.limit) == (-1, 2)
    (ks,) = table["eval"].key_specs
    assert (ks.find_keys.kind, ks.find_keys.keynumidx, ks.find_keys.firstkey) == ("keynum", 0, 1)
    assert table["migrate"].key_specs[1].flags == {"RW", "ACCESS", "DELETE", "INCOMPLETE"}
    assert table["set"].key_specs[0].flags == {"RW", "ACCESS", "UPDATE", "VARIABLE_FLAGS"}
    assert table["sort"].key_specs[2].begin_search.kind == "unknown"
    assert table["mset"].key_specs[0].find_keys.keystep == 2


def test_has_keys(table: CommandTable) -> None:
    assert table["get"].has_keys and table["object|encoding"].has_keys
    assert not table["object"].has_keys and not table["ping"].has_keys
    assert not table["spublish"].has_keys  # its key spec is NOT_KEY (a shard channel)
    assert table["eval"].has_keys


def test_from_replies_reads_hiredis_bytes_like_the_snapshot(table: CommandTable) -> None:
    data = json.loads(DEFAULT_SNAPSHOT.read_text())
    live = CommandTable.from_replies(as_bytes(data["command_info"]), as_bytes(data["command_docs"]))
    assert list(live.walk()) == list(table.walk())
    assert [dict(c.subcommands) for c in live] == [dict(c.subcommands) for c in table]


def test_from_replies_accepts_resp3_maps_and_missing_docs() -> None:
    info = [[b"get", 2, [b"readonly"], 1, 1, 1, [b"@read"], [], [
        {b"flags": [b"RO"], b"begin_search": {b"type": b"index", b"spec": {b"index": 1}},
         b"find_keys": {b"type": b"range", b"spec": {b"lastkey": 0, b"keystep": 1, b"limit": 0}}}], []], None]
    t = CommandTable.from_replies(info, None)
    assert t["get"].group is None
    assert t.key_positions([b"GET", b"k"])[0][0] == 1


def test_pre_7_servers_get_legacy_range_specs() -> None:
    """Redis 6 COMMAND INFO: no key specs, subcommands or DOCS; first/last/step only."""
    info = [
        [b"get", 2, [b"readonly", b"fast"], 1, 1, 1, [b"@read", b"@string", b"@fast"]],
        [b"mset", -3, [b"write", b"denyoom"], 1, -1, 2, [b"@write", b"@string", b"@slow"]],
        [b"eval", -3, [b"noscript", b"movablekeys"], 0, 0, 0, [b"@slow", b"@scripting"]],
        [b"ping", -1, [b"stale", b"fast"], 0, 0, 0],  # Redis 5: no ACL categories
    ]
    t = CommandTable.from_replies(info, ReplyErrorLike())
    assert [i for i, _ in t.key_positions([b"MSET", b"a", b"1", b"b", b"2"])] == [1, 3]
    assert [i for i, _ in t.key_positions([b"get", b"k"])] == [1]
    assert not t["eval"].has_keys and t["ping"].acl_categories == frozenset()


class ReplyErrorLike(Exception):
    pass


def test_lookup_is_cheap(table: CommandTable) -> None:
    """The hot path: a dict hit on the exact bytes, no allocation for upper/lower case."""
    args = [b"GET", b"key"]
    n = 20000
    per_call = min(timeit.repeat(lambda: table.lookup(args), number=n, repeat=3)) / n
    assert per_call < 5e-6  # typically ~0.15 µs; generous for slow CI machines


def test_key_spec_is_hashable_and_frozen(table: CommandTable) -> None:
    ks = table["get"].key_specs[0]
    assert isinstance(ks, KeySpec) and hash(ks) == hash(ks)
    with pytest.raises(AttributeError):
        ks.flags = frozenset()  # type: ignore[misc]
    assert hash(table["client"])  # subcommands are left out of eq/hash

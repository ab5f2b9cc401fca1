"""Valid random arguments for any command of the table, from the `arguments` of COMMAND DOCS (sans-IO).

    docs = CommandDocs.from_snapshot()
    ns = Namespace("rg03")
    made = Generator(docs).make("zunionstore", random.Random(7), ns)
    made.args  # [b'ZUNIONSTORE', b'{rg03}:z', b'2', b'{rg03}:a', b'{rg03}:s', b'WEIGHTS', b'1', b'3']
    made.keys  # the key arguments, all in the namespace

The grammar is Redis's own (types key, string, integer, double, pattern, unix-time, pure-token,
oneof, block; flags optional, multiple, multiple_token; tokens). What the grammar cannot say is
filled in by name, in the tables below, each for a reason: keys, channels and patterns stay in
the caller's `Namespace` (one hash tag, so a cluster keeps them in one slot); numbers are small
(an offset of 2**31 would allocate 256 MB); a blocking command's timeout is a few milliseconds,
never 0 (forever); a `numkeys` counts the keys that follow it; the `multiple` arguments of one
sequence repeat the same number of times (XREAD's keys and ids, ZUNIONSTORE's keys and weights);
client ids name no client (CLIENT UNBLOCK must not reach another test client). Commands whose
DOCS list no arguments but whose arity wants some get theirs from `NO_DOCS`.

`CommandDocs` also reads the command tips of COMMAND INFO (`nondeterministic_output`,
`nondeterministic_output_order`) and the flags, which callers use to decide how a reply is checked.
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass, field

from proxy.commands.table import DEFAULT_SNAPSHOT

# Scripts a generated EVAL may run: short, deterministic, touching only the keys they are given.
SCRIPTS = (
    "return 1",
    "return ARGV[1]",
    "return {KEYS[1], ARGV[1]}",
    "return redis.call('get', KEYS[1])",
    "return redis.call('incr', KEYS[1])",
    "return redis.call('set', KEYS[1], ARGV[1] or 'x')",
    "return redis.pcall('lpush', KEYS[1], 'e')",
    "return redis.call('exists', KEYS[1])",
    "return redis.error_reply('ERR from script')",
    "return {1, 'two', {3}}",
)
# A library callers load on their servers before using FCALL (FUNCTION LOAD itself is not generated).
LIBRARY_NAME = "rgtest"
LIBRARY = (
    "#!lua name=rgtest\n"
    "redis.register_function('rg_get', function(keys, args) return redis.call('get', keys[1]) end)\n"
    "redis.register_function{function_name='rg_ro', callback=function(keys, args) return #keys end,"
    " flags={'no-writes'}}\n"
    "redis.register_function('rg_incr', function(keys, args) return redis.call('incr', keys[1]) end)\n"
)
FUNCTIONS = ("rg_get", "rg_ro", "rg_incr", "nosuchfn")
# DUMP of the string "v" by Redis 7.0 (RDB version 10), so that RESTORE can succeed.
DUMP_OF_V = b"\x00\x01v\n\x00\x91\x08\xce\xb2\x198\x8a\xce"

VALUES = (b"v", b"1", b"-3", b"2.5", b"", b"hello world", b"x" * 70, b"0", b"a", b"b", b"c", b"\x00\xff")
FIELDS = (b"f1", b"f2", b"f3", b"a", b"b", b"1", b"2")
# Long enough to be far in the future (2100) and in the past; never something that expires mid-run.
UNIX_SECONDS = (b"1", b"4102444800")
UNIX_MILLISECONDS = (b"1", b"4102444800000")
STREAM_IDS = (b"0-1", b"1-1", b"2-0", b"5-5", b"0", b"$", b">", b"9999999999999-0")
CLIENT_ID_NOBODY = b"999999999"  # far above the ids a test's servers hand out

# Blocking commands and their timeout arguments: ms where the grammar says integer.
BLOCKING_MILLISECONDS = {("xread", "milliseconds"), ("xreadgroup", "milliseconds"), ("wait", "timeout")}


def _choice(values):
    return lambda rng, ns, cmd: rng.choice(values)


def _int_range(low: int, high: int):
    return lambda rng, ns, cmd: b"%d" % rng.randint(low, high)


# (command, argument name) first, then (argument name, type), then the argument name, then the type.
BY_NAME_AND_TYPE = {
    ("start", "string"): _choice((b"-", b"0-1", b"1", b"0")),  # XRANGE, XPENDING, XAUTOCLAIM
    ("end", "string"): _choice((b"+", b"5-5", b"9999999999999")),
    ("min", "string"): _choice((b"-", b"[a", b"(b")),  # ZRANGEBYLEX and friends
    ("max", "string"): _choice((b"+", b"[c", b"(z")),
    ("min", "double"): _choice((b"-inf", b"0", b"(1", b"1.5")),  # ZRANGEBYSCORE and friends
    ("max", "double"): _choice((b"+inf", b"5", b"(10", b"2")),
    ("start", "integer"): _int_range(-3, 5),
    ("stop", "integer"): _int_range(-3, 5),
    ("end", "integer"): _int_range(-3, 10),
}
BY_COMMAND_AND_NAME = {
    ("select", "index"): _int_range(0, 3),
    ("move", "db"): _int_range(0, 3),
    ("copy", "destination-db"): _int_range(0, 3),
    ("wait", "numreplicas"): _int_range(0, 1),
    ("hello", "protover"): _choice((b"2", b"3", b"3", b"2", b"4")),
    ("zrange", "start"): _choice((b"0", b"-1", b"1", b"(1", b"[a", b"-inf", b"-")),
    ("zrange", "stop"): _choice((b"-1", b"3", b"(5", b"[z", b"+inf", b"+")),
    ("setrange", "offset"): _int_range(0, 64),
    ("setbit", "offset"): _int_range(0, 512),
    ("getbit", "offset"): _int_range(0, 512),
    ("xadd", "threshold"): _choice((b"0", b"3", b"1-1", b"10")),
    ("xtrim", "threshold"): _choice((b"0", b"3", b"1-1", b"10")),
    ("lolwut", "version"): _choice((b"5", b"6")),
    ("bitfield", "offset"): _int_range(0, 64),
    ("bitfield_ro", "offset"): _int_range(0, 64),
    ("bitfield", "value"): _int_range(-5, 300),
    ("setbit", "value"): _int_range(0, 1),
    ("config|get", "parameter"): _choice((b"maxmemory", b"timeout", b"*max-*-entries*", b"appendonly")),
    ("client|tracking", "prefix"): lambda rng, ns, cmd: ns.prefix(rng),
    ("scan", "type"): _choice((b"string", b"list", b"hash", b"zset", b"set", b"stream")),
}
BY_NAME = {
    "channel": lambda rng, ns, cmd: ns.channel(rng),
    "shardchannel": lambda rng, ns, cmd: ns.channel(rng),
    "script": _choice(tuple(s.encode() for s in SCRIPTS)),
    "sha1": _choice(tuple(hashlib.sha1(s.encode()).hexdigest().encode() for s in SCRIPTS) + (b"0" * 40,)),
    "function": _choice(tuple(f.encode() for f in FUNCTIONS)),
    "serialized-value": _choice((DUMP_OF_V, b"not a payload")),
    "id": _choice(STREAM_IDS),
    "last-id": _choice((b"0-1", b"5-5", b"9999999999999-0")),
    "max_deleted_entry_id": _choice((b"0-0", b"1-1")),
    "min-idle-time": _choice((b"0", b"10")),
    "group": _choice((b"g1", b"g2")),
    "groupname": _choice((b"g1", b"g2")),
    "consumer": _choice((b"c1", b"c2")),
    "consumername": _choice((b"c1", b"c2")),
    "connection-name": lambda rng, ns, cmd: ns.tag + b"-" + rng.choice((b"a", b"b")),
    "clientname": lambda rng, ns, cmd: ns.tag + b"-" + rng.choice((b"a", b"b")),
    "username": _choice((b"default", b"nosuchuser")),
    "password": _choice((b"pw", b"")),
    "section": _choice((b"server", b"keyspace", b"clients", b"everything")),
    "operation": _choice((b"AND", b"OR", b"XOR", b"NOT", b"NOPE")),
    "encoding": _choice((b"u8", b"i16", b"u4", b"i64")),
    "command": _choice((b"get", b"set", b"nosuchcommand")),
    "command-name": _choice((b"get", b"set", b"client", b"nosuchcommand")),
    "category": _choice((b"read", b"keyspace")),
    "categoryname": _choice((b"read", b"keyspace", b"nosuch")),
    "library-name-pattern": _choice((b"rg*", b"*")),
    "event": _choice((b"command", b"fast-command")),
    "yes/no": _choice((b"yes", b"no")),
    "threshold": _choice((b"0", b"3", b"10")),
    "message": lambda rng, ns, cmd: rng.choice((ns.tag, b"hello", b"")),
    "value": lambda rng, ns, cmd: ns.value(rng),
    "element": lambda rng, ns, cmd: ns.value(rng),
    "arg": lambda rng, ns, cmd: ns.value(rng),
    "member": _choice(FIELDS), "member1": _choice(FIELDS), "member2": _choice(FIELDS),
    "field": _choice(FIELDS), "pivot": _choice(FIELDS),
    # integers
    "count": _int_range(0, 5),
    "cursor": _choice((b"0",)),
    "client-id": _choice((CLIENT_ID_NOBODY,)),
    "seconds": _int_range(1000, 100000),
    "milliseconds": _int_range(1000000, 100000000),
    "ttl": _choice((b"0", b"100000000")),
    "numreplicas": _int_range(0, 1),
    "offset": _int_range(-2, 20),
    "index": _int_range(-3, 5),
    "increment": _int_range(-5, 5),
    "decrement": _int_range(-5, 5),
    "bit": _int_range(0, 1),
    "len": _int_range(0, 5),
    "limit": _int_range(0, 5),
    "rank": _choice((b"1", b"-1", b"2")),
    "num-matches": _int_range(0, 3),
    "weight": _int_range(0, 3),
    "frequency": _int_range(1, 10),
    "entries_read": _int_range(0, 5),
    "entries_added": _int_range(0, 5),
    "ms": _int_range(0, 100),
    "bits": _int_range(1, 64),
    # doubles
    "longitude": lambda rng, ns, cmd: b"%.4f" % rng.uniform(-180, 180),
    "latitude": lambda rng, ns, cmd: b"%.4f" % rng.uniform(-85, 85),
    "radius": lambda rng, ns, cmd: b"%.1f" % rng.uniform(1, 5000),
    "width": lambda rng, ns, cmd: b"%.1f" % rng.uniform(1, 5000),
    "height": lambda rng, ns, cmd: b"%.1f" % rng.uniform(1, 5000),
    "score": lambda rng, ns, cmd: rng.choice((b"1", b"2.5", b"-3", b"0", b"+inf", b"7")),
}


def _timeout_seconds(rng, ns, cmd):
    return b"0.0%d" % rng.randint(1, 4)  # 10..40 ms: never 0, which blocks forever


def _timeout_milliseconds(rng, ns, cmd):
    return b"%d" % rng.randint(5, 40)


BY_TYPE = {
    "key": lambda rng, ns, cmd: ns.key(rng),
    "string": lambda rng, ns, cmd: ns.value(rng),
    "integer": _int_range(-2, 10),
    "double": lambda rng, ns, cmd: rng.choice((b"1", b"2.5", b"-1.5", b"0", b"10")),
    "unix-time": lambda rng, ns, cmd: rng.choice(UNIX_SECONDS),
}

# Commands whose DOCS give no arguments although their arity wants some: argument lists to draw from.
NO_DOCS = {
    "replconf": ((b"ACK", b"0"), (b"GETACK", b"*"), (b"listening-port", b"1"), (b"capa", b"eof")),
    "command|getkeys": ((b"SET", b"k", b"v"), (b"MGET", b"a", b"b"), (b"NOSUCH", b"x")),
    "command|getkeysandflags": ((b"SET", b"k", b"v"), (b"LMOVE", b"a", b"b", b"LEFT", b"RIGHT")),
    "debug": ((b"HELP",),),
}


class Namespace:
    """The names one client may use: keys `{tag}:x`, channels, patterns and values carrying its tag,
    so that a reply holding another client's bytes is seen."""

    KEYS = (b"a", b"b", b"c", b"s", b"z", b"h", b"l", b"x")

    def __init__(self, tag: str):
        self.tag = tag.encode()
        self.keys = tuple(b"{%s}:%s" % (self.tag, k) for k in self.KEYS)

    def key(self, rng) -> bytes:
        return rng.choice(self.keys)

    def prefix(self, rng) -> bytes:
        return b"{%s}:" % self.tag

    def channel(self, rng) -> bytes:
        return b"{%s}.ch%d" % (self.tag, rng.randint(1, 2))  # a shard channel in the keys' slot

    def key_pattern(self, rng) -> bytes:
        return b"{%s}:%s" % (self.tag, rng.choice((b"*", b"?", b"[ab]*")))

    def channel_pattern(self, rng) -> bytes:
        return b"{%s}.ch%s" % (self.tag, rng.choice((b"*", b"?", b"[12]")))

    def value(self, rng) -> bytes:
        roll = rng.random()
        if roll < 0.01:
            return self.tag + b"-" + b"L" * 100_000  # a reply bigger than one read
        return rng.choice(VALUES) if roll < 0.7 else self.tag + b"-" + rng.choice((b"1", b"2", b"3"))


@dataclass
class Made:
    name: str  # the table's name: 'get', 'client|setname'
    args: list[bytes]
    keys: list[bytes] = field(default_factory=list)


@dataclass(frozen=True)
class Doc:
    name: str
    arity: int
    flags: frozenset
    tips: frozenset
    arguments: tuple  # each a dict: name, type, token, flags, arguments


class CommandDocs:
    """Every command and subcommand (`container|sub`) with its DOCS arguments, arity, flags and tips."""

    def __init__(self, docs: dict[str, Doc]):
        self.docs = docs

    @classmethod
    def from_replies(cls, command_info, command_docs) -> CommandDocs:
        infos: dict[str, list] = {}

        def info_walk(entry):
            infos[_s(entry[0]).lower()] = entry
            for sub in (entry[9] if len(entry) > 9 else []):
                info_walk(sub)

        for entry in command_info:
            info_walk(entry)
        raw_docs: dict[str, dict] = {}

        def docs_walk(name, body):
            body = _pairs(body)
            raw_docs[_s(name).lower()] = body
            subs = body.get("subcommands") or []
            for sub_name, sub_body in (_pairs(subs).items() if isinstance(subs, list) else subs.items()):
                docs_walk(sub_name, sub_body)

        for name, body in (_pairs(command_docs).items()):
            docs_walk(name, body)
        docs = {}
        for name, info in infos.items():
            body = raw_docs.get(name, {})
            docs[name] = Doc(name, int(info[1]), frozenset(_s(f).lower() for f in info[2]),
                             frozenset(_s(t) for t in (info[7] if len(info) > 7 else [])),
                             tuple(_argument(a) for a in body.get("arguments") or ()))
        return cls(docs)

    @classmethod
    def from_snapshot(cls, path=None) -> CommandDocs:
        with open(path or DEFAULT_SNAPSHOT, encoding="utf-8") as f:
            data = json.load(f)
        return cls.from_replies(data["command_info"], data["command_docs"])

    def names(self) -> list[str]:
        """Every command that can be sent: top-level commands without subcommands, and subcommands."""
        containers = {name.split("|")[0] for name in self.docs if "|" in name}
        return sorted(name for name in self.docs if name not in containers)

    def __getitem__(self, name: str) -> Doc:
        return self.docs[name]


def _s(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _pairs(flat) -> dict:
    if isinstance(flat, dict):
        return {_s(k): v for k, v in flat.items()}
    return {_s(k): v for k, v in zip(flat[::2], flat[1::2])}


def _argument(raw) -> dict:
    arg = _pairs(raw)
    return {
        "name": _s(arg["name"]),
        "type": _s(arg["type"]),
        "token": _s(arg["token"]) if "token" in arg else None,
        "flags": frozenset(_s(f) for f in arg.get("flags") or ()),
        "arguments": tuple(_argument(a) for a in arg.get("arguments") or ()),
    }


class Generator:
    """`make(name, rng, namespace)`: one valid-by-grammar call of a command, with its keys."""

    def __init__(self, docs: CommandDocs):
        self.docs = docs

    def make(self, name: str, rng: random.Random, ns: Namespace) -> Made:
        doc = self.docs[name]
        least = doc.arity if doc.arity > 0 else -doc.arity
        for _ in range(20):  # all-optional grammars (CLIENT KILL's filters) may come out too short
            made = Made(name, [part.upper().encode() for part in name.split("|")])
            if name in NO_DOCS:
                made.args += list(rng.choice(NO_DOCS[name]))
            else:
                self._sequence(doc.arguments, made, rng, ns)
            self._fix(made, rng, ns)
            if len(made.args) >= least:
                break
        return made

    def _sequence(self, arguments, made: Made, rng, ns) -> None:
        repeat = rng.randint(1, 3)  # the multiple arguments of one sequence repeat alike
        numkeys_at = None
        for arg in arguments:
            if arg["name"] == "numkeys" and arg["type"] == "integer":
                numkeys_at = len(made.args)
                made.args.append(b"0")
                continue
            flags = arg["flags"]
            if "optional" in flags and rng.random() < 0.5:
                continue
            times = repeat if "multiple" in flags else 1
            before = len(made.keys)
            for i in range(times):
                if arg["token"] is not None and arg["type"] != "pure-token" and (i == 0 or "multiple_token" in flags):
                    made.args.append(arg["token"].encode())
                self._one(arg, made, rng, ns)
            if numkeys_at is not None and arg["type"] == "key":
                made.args[numkeys_at] = b"%d" % (len(made.keys) - before)
                numkeys_at = None

    def _one(self, arg, made: Made, rng, ns) -> None:
        kind = arg["type"]
        command = made.name
        if kind == "pure-token":
            made.args.append(arg["token"].encode())
        elif kind == "oneof":
            self._sequence([rng.choice(arg["arguments"])], made, rng, ns)
        elif kind == "block":
            self._sequence(arg["arguments"], made, rng, ns)
        elif kind == "key":
            key = ns.key(rng)
            made.keys.append(key)
            made.args.append(key)
        elif kind == "pattern":
            made.args.append(self._pattern(command, arg["name"], rng, ns))
        else:
            made.args.append(self._value(command, arg, rng, ns))

    def _value(self, command: str, arg, rng, ns) -> bytes:
        name, kind = arg["name"], arg["type"]
        if (command, name) in BLOCKING_MILLISECONDS:
            return _timeout_milliseconds(rng, ns, command)
        if name == "timeout" and kind == "double":
            return _timeout_seconds(rng, ns, command)
        if kind == "unix-time":
            return rng.choice(UNIX_MILLISECONDS if "milliseconds" in name else UNIX_SECONDS)
        make = (BY_COMMAND_AND_NAME.get((command, name)) or BY_NAME_AND_TYPE.get((name, kind))
                or BY_NAME.get(name) or BY_TYPE[kind])
        return make(rng, ns, command)

    @staticmethod
    def _pattern(command: str, name: str, rng, ns) -> bytes:
        if "subscribe" in command or command.startswith("pubsub|"):
            return ns.channel_pattern(rng)
        if command in ("keys", "scan", "sort", "sort_ro"):
            return ns.key_pattern(rng)
        return rng.choice((b"*", b"a*", b"f?"))

    @staticmethod
    def _fix(made: Made, rng, ns) -> None:
        """What a grammar cannot say, per command."""
        args = made.args
        if made.name == "client|tracking" and b"BCAST" in args and b"PREFIX" not in args:
            # BCAST without a prefix tracks every key: other clients' writes would reach this one.
            args += [b"PREFIX", ns.prefix(rng)]

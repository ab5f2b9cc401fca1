"""Every command that writes a value, and what each value rule (K6, V1, V2, V3) does about it.

`value_kinds(spec)` reads from the command table alone what a command can leave in a key: a key
spec flagged OW, INSERT or UPDATE makes it a writer, and its COMMAND DOCS group says of which
type (bitmaps and HyperLogLogs are strings, geo sets sorted sets); the generic commands say no
type, so `GENERIC` names what they write (COPY and RENAME carry any type, SORT ... STORE a list;
EXPIRE and MOVE change no value). A rule is relevant to a writer when the writer can leave a value
of a type the rule bounds (`RELEVANT`). For every relevant pair the rule either checks the
command (its `applies_to`) or `UNCHECKED` says why not, in words a user can read in
`docs/policy.md`; tests/policy/test_writers.py fails on a writer of the table that is neither, so a
command new to Redis cannot slip past the value rules unnoticed. Sans-IO, nothing runs per command.
"""

from __future__ import annotations

from .rules._types import GROUP_TYPES

VALUE_FLAGS = frozenset({"OW", "INSERT", "UPDATE"})
ANY = frozenset({"string", "hash", "list", "set", "zset", "stream", "vectorset"})
COLLECTIONS = frozenset({"hash", "list", "set", "zset", "vectorset"})

# Generic and server commands with written keys: what value they leave.
GENERIC = {
    "copy": ANY, "rename": ANY, "renamenx": ANY, "restore": ANY, "restore-asking": ANY,
    "sort": frozenset({"list"}),
    "eval": ANY, "evalsha": ANY, "fcall": ANY,  # whatever the script writes
    "expire": frozenset(), "pexpire": frozenset(), "expireat": frozenset(), "pexpireat": frozenset(),
    "persist": frozenset(), "move": frozenset(),  # a TTL, or the same value in another database
}

# The types of value each rule bounds.
RELEVANT = {"K6": ANY, "V1": frozenset({"string"}), "V2": COLLECTIONS | {"stream"}, "V3": COLLECTIONS}

SCRIPTS = ("a script: C6 checks the names of its declared keys and Redis's ACL (the second wall) its "
           "commands and keys; names, TTLs and sizes of what it writes are not checked: scripts: deny")
NUMBER = "a number the command computes: a few bytes, never the client's"
STORED = "moves or copies an element already stored (checked when it was written)"
RESTORED = ("the payload is not decoded element by element (RESTORE is denied by the baseline guard; "
            "an operator who allows it gets V1, V2 and K6 checked)")
NO_ENTRY = "changes a consumer group or an entry id, not the stream's entries"
FIELD_TTLS = ("sets or removes the TTLs of existing hash fields (T3 bounds the TTLs it sets), "
              "writes no field")
REMOVES = "removes elements: the collection only shrinks"

# (rule, command) -> why the rule does not check it.
UNCHECKED = {
    **{(rule, name): SCRIPTS for rule in RELEVANT for name in ("eval", "evalsha", "fcall")},
    ("V1", "incr"): NUMBER, ("V1", "decr"): NUMBER, ("V1", "incrby"): NUMBER, ("V1", "decrby"): NUMBER,
    ("V1", "incrbyfloat"): NUMBER,
    ("V1", "getex"): "changes the TTL only",
    ("V2", "lset"): "replaces an element: the count stays",
    ("V3", "hincrby"): NUMBER, ("V3", "hincrbyfloat"): NUMBER,
    **{("V3", name): STORED for name in ("lmove", "blmove", "rpoplpush", "brpoplpush", "smove", "sunionstore",
                                         "sinterstore", "sdiffstore", "zunionstore", "zinterstore", "zdiffstore",
                                         "zrangestore", "georadius", "georadiusbymember", "geosearchstore", "sort",
                                         "copy", "rename", "renamenx")},
    ("V3", "restore"): RESTORED, ("V3", "restore-asking"): RESTORED,
    **{("V2", name): NO_ENTRY for name in ("xack", "xclaim", "xsetid", "xgroup|create", "xgroup|createconsumer",
                                           "xgroup|setid")},
    # Redis 7.4 / 8.x
    **{(rule, name): FIELD_TTLS for rule in ("V2", "V3")
       for name in ("hexpire", "hpexpire", "hexpireat", "hpexpireat", "hpersist", "hgetex")},
    ("V2", "xackdel"): REMOVES, ("V2", "vrem"): REMOVES, ("V3", "vrem"): REMOVES,
    ("V2", "vsetattr"): "replaces the attributes of an existing element: the count stays",
}


def value_kinds(spec) -> frozenset:
    """The types of value this command (or subcommand) can leave in a key (empty: none)."""
    if spec.name in GENERIC:
        return GENERIC[spec.name]
    if "write" not in spec.flags or not any(not ks.flags.isdisjoint(VALUE_FLAGS) for ks in spec.key_specs):
        return frozenset()  # (a module's read commands have key specs flagged UPDATE too: VCARD)
    kind = GROUP_TYPES.get(spec.group)
    return frozenset({kind}) if kind is not None else frozenset()


def writers(table):
    """(spec, its value kinds) of every command and subcommand of the table that writes a value."""
    for spec in table.walk():
        if spec.subcommands:
            continue
        kinds = value_kinds(spec)
        if kinds:
            yield spec, kinds

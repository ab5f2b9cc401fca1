"""The TTL facts T1, T2 and T3 share (and K10 reads): the one table of TTL arguments, which keys
a write can create, the TTLs the proxy writes, and the keys exempt from having one.

`TTL_TABLE` says which argument of a command is a TTL and which option keeps or clears one;
`ttl_args` reads a call with it (`call_ttl_args`: once per call for every rule that asks).
`CREATION` says what the key specs cannot about creating a key (`creates`, `may_create` and
`creation` read the key-spec flags and it; t1_ttl.py's docstring tells the theory). `InjectedTtl`
marks the TTL arguments the proxy wrote (T1 writes them, T2 jitters them), and `PersistentKeys`
is the `persistent` setting and the key schema's `ttl: none` (T1 and T3). Sans-IO.
"""

from __future__ import annotations

import fnmatch
import re

from ._fields import xadd_options

# SET/GETEX options that give a TTL: word -> (seconds per unit, absolute Unix time)
TTL_OPTIONS = {b"ex": (1.0, False), b"px": (0.001, False), b"exat": (1.0, True), b"pxat": (0.001, True)}

# command -> where its TTL is. Every one of them acts on the key at argument 1.
#   ("options", i)            SET/GETEX options from argument i on: EX s | PX ms | EXAT t |
#                             PXAT t-ms | KEEPTTL (keep the current TTL) | PERSIST (remove it)
#   ("at", i, unit, absolute) argument i is a TTL in `unit` seconds, or a Unix time
#   ("restore", i)            RESTORE: milliseconds at i, 0 for none, ABSTTL makes it a Unix time
#   ("persist",)              removes the TTL
TTL_TABLE = {
    "set": ("options", 3),
    "getex": ("options", 2),
    "setex": ("at", 2, 1.0, False),
    "psetex": ("at", 2, 0.001, False),
    "expire": ("at", 2, 1.0, False),
    "pexpire": ("at", 2, 0.001, False),
    "expireat": ("at", 2, 1.0, True),
    "pexpireat": ("at", 2, 0.001, True),
    "restore": ("restore", 2),
    "restore-asking": ("restore", 2),
    "persist": ("persist",),
}

# Redis 7.4 / 8's hash-field TTLs: command -> where the TTL of the fields is, as in TTL_TABLE
# ("options": HSETEX's / HGETEX's EX|PX|EXAT|PXAT, read up to FIELDS). Kept apart from TTL_TABLE:
# they give the fields a TTL, never the key (T1 must not count them), and T3 bounds them like a
# key's. HPERSIST and HGETEX ... PERSIST leave the fields to live as long as the key: allowed.
FIELD_TTL_TABLE = {
    "hsetex": ("options", 2),
    "hgetex": ("options", 2),
    "hexpire": ("at", 2, 1.0, False),
    "hpexpire": ("at", 2, 0.001, False),
    "hexpireat": ("at", 2, 1.0, True),
    "hpexpireat": ("at", 2, 0.001, True),
}

# What the key specs cannot say about creating a key (T1; K10 reads "carries"):
#   "never"          touches an existing key only (LPUSHX, LINSERT, LSET, XSETID, ...)
#   "carries"        the destination takes the source's TTL (COPY, RENAME, RENAMENX)
#   ("with", WORD)   creates only with this option (XGROUP CREATE ... MKSTREAM)
#   ("without", W)   creates unless this option is given (XADD ... NOMKSTREAM)
CREATION = {
    "lpushx": "never", "rpushx": "never", "linsert": "never", "lset": "never",
    "xsetid": "never", "xgroup|createconsumer": "never",
    "copy": "carries", "rename": "carries", "renamenx": "carries",
    "xgroup|create": ("with", b"mkstream"),
    "xadd": ("without", b"nomkstream"),
}


class TtlArgs:
    """What one command does to the TTL of the key at argument 1."""

    __slots__ = ("ttls", "keep", "clear")

    def __init__(self):
        self.ttls: list[tuple[int, float, bool]] = []  # (argument index, unit in seconds, absolute)
        self.keep = False  # KEEPTTL
        self.clear = False  # PERSIST, GETEX ... PERSIST


def call_ttl_args(call) -> TtlArgs | None:
    """ttl_args of the call, worked out once for all the TTL rules that ask."""
    found = call.memo
    if found is None:
        found = call.memo = (ttl_args(call.name, call.args),)
    return found[0]


def field_ttl_args(name: str, args) -> TtlArgs | None:
    """The hash-field TTL arguments of a command (FIELD_TTL_TABLE; None: it sets none)."""
    entry = FIELD_TTL_TABLE.get(name)
    return None if entry is None else _read_ttl_args(entry, args, b"fields")


def ttl_args(name: str, args) -> TtlArgs | None:
    """The TTL arguments of a command (None: the command has no TTL semantics)."""
    entry = TTL_TABLE.get(name)
    if entry is None:
        return None
    return _read_ttl_args(entry, args, None)


def _read_ttl_args(entry, args, stop: bytes | None) -> TtlArgs:
    found = TtlArgs()
    kind = entry[0]
    count = len(args)
    if kind == "options":
        i = entry[1]
        while i < count:
            word = args[i].lower()
            if word == stop:
                break  # the fields follow: their names are no options
            option = TTL_OPTIONS.get(word)
            if option is not None and i + 1 < count:
                found.ttls.append((i + 1, option[0], option[1]))
                i += 2
                continue
            if word == b"keepttl":
                found.keep = True
            elif word == b"persist":
                found.clear = True
            i += 1
    elif kind == "at":
        if entry[1] < count:
            found.ttls.append((entry[1], entry[2], entry[3]))
    elif kind == "restore":
        at = entry[1]
        if at < count and args[at] != b"0":
            absolute = any(arg.lower() == b"absttl" for arg in args[4:])
            found.ttls.append((at, 0.001, absolute))
    else:  # persist
        found.clear = True
    return found


def creates(spec, ks_flags) -> bool:
    """Whether the key found with these key-spec flags may be created by the command."""
    if "INSERT" in ks_flags or "OW" in ks_flags:
        return "write" in spec.flags
    return "denyoom" in spec.flags and "RW" in ks_flags and "UPDATE" in ks_flags


def may_create(spec) -> bool:
    """At policy load: can this command create any key at all?"""
    if CREATION.get(spec.name) == "never":
        return False
    return any(creates(spec, ks.flags) for ks in spec.key_specs)


def creation(spec, args) -> str:
    """Per call: 'never', 'carries' or 'creates' (the key specs decide per key)."""
    rule = CREATION.get(spec.name)
    if rule is None:
        return "creates"
    if isinstance(rule, str):
        return rule
    how, word = rule
    present = _has_option(spec.name, args, word)
    return "creates" if present == (how == "with") else "never"


def _has_option(name: str, args, word: bytes) -> bool:
    if name == "xadd":  # XADD key [options, in any order] id field value...
        return word in xadd_options(args)[0]
    return any(arg.lower() == word for arg in args[3:])


class InjectedTtl(bytes):
    """A TTL argument the proxy wrote (T2 jitters these whatever its `client_ttls`)."""

    __slots__ = ()


def glob_matcher(patterns):
    """One compiled match for fnmatch-style globs on a decoded key; None when there are none."""
    if not patterns:
        return None
    match = re.compile("|".join(f"(?:{fnmatch.translate(p)})" for p in patterns), re.S).match
    return lambda key: match(key.decode("utf-8", "surrogateescape")) is not None


class PersistentKeys:
    """What T1 and T3 share: keys matching a `persistent` glob are exempt (`exempt(key)`), and so
    are the key schema's patterns with `ttl: none` once the rule takes the schema."""

    def read_persistent(self, settings) -> None:
        self.persistent = settings.strings("persistent")
        self.exempt = glob_matcher(self.persistent)
        self.schema = None

    def take_ttl_schema(self, schema) -> bool:
        """Take the key schema if it says anything of TTLs (then True)."""
        if schema is None or all(pattern.ttl is None for pattern in schema):
            return False
        self.schema = schema
        self.exempt = schema.ttl_exempt(self.exempt)
        return True

    def key_patterns(self, spec):
        # The key is read only to exempt it: through the globs, unless the schema decides too
        # (its placeholders check values).
        if self.schema is not None:
            return None
        return tuple(fnmatch.translate(p) for p in self.persistent)

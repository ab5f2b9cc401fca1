"""K10: the key schema (seed 004) enforced: keys follow the declared patterns, and every command
on a declared key is of the pattern's type.

The patterns are the policy's top-level `schema:` (`policy/schema.py`); the loader hands them to
the rule (`use_schema`). K10 is both a key rule and a command rule:

* strict (`strict: true`, the default): a key that matches no pattern is rejected, on every
  command with keys (reads, deletes and WATCH too: an undeclared key is a mistake wherever it
  appears). This is a key rule: the patterns join the engine's one combined match per key.
* always: a command whose type family (its COMMAND DOCS group, through `_types.GROUP_TYPES`) is not
  the pattern's declared type is rejected before Redis sees it, reads included (`GET` on a hash
  pattern would be a WRONGTYPE error; `SET` on it would replace the hash). Generic commands (DEL,
  EXPIRE, TTL, TYPE, SCAN...) are type-neutral, with the exceptions in `GENERIC_TYPED`: SORT reads
  a list, set or sorted set and STORE writes a list; COPY/RENAME/RENAMENX carry the source's type
  (`_ttl.CREATION`) to a destination that must be declared of the same type; RESTORE writes
  the type its payload's first byte names (the RDB type). The sorted-set
  commands in `SET_OR_ZSET_SOURCES` read plain sets too (Redis counts each member with score 1).

With `strict: false` undeclared keys pass; the type of declared ones is still checked.
"""

from __future__ import annotations

from ... import errors
from ..base import NO_ARGUMENTS, CommandRule, KeyRule, PolicyError, register
from ._keyshape import key_bytes, subject, text
from ._ttl import CREATION
from ._types import GROUP_TYPES
from ._write_check import RESTORES, payload_type

WRITE_FLAGS = frozenset({"OW", "INSERT", "UPDATE"})
SORTABLE = frozenset({"list", "set", "zset"})
# Generic commands that still imply a type: name -> (the types of the keys read, of a key written)
GENERIC_TYPED = {"sort": (SORTABLE, frozenset({"list"})), "sort_ro": (SORTABLE, frozenset({"list"}))}
# Sorted-set commands whose source keys may be plain sets (zunionInterDiffGenericCommand)
SET_OR_ZSET_SOURCES = frozenset({"zunion", "zinter", "zdiff", "zintercard", "zunionstore", "zinterstore",
                                 "zdiffstore"})
SET_OR_ZSET = frozenset({"set", "zset"})


@register
class KeySchema(KeyRule, CommandRule):
    id = "K10"
    order = 210
    title = "key schema"

    def __init__(self, settings):
        super().__init__(settings)
        self.strict = settings.get("strict", True, kind=bool)
        self.schema = None

    def use_schema(self, schema) -> None:
        if schema is None:
            raise PolicyError("rule K10 needs the policy's 'schema:' section: the key patterns it enforces")
        self.schema = schema
        self.pattern = schema.any_pattern if self.strict else ""

    # -- strict: every key has a pattern ----------------------------------------------------------

    def check_key(self, key: str):
        if not self.strict:
            return None
        data = key_bytes(key)
        if self.schema.match(data) is not None:
            return None
        closest, reason = self.schema.closest(data)
        return self.finding(subject(key), errors.schema_unknown_key(closest, reason))

    # -- the type family of every command on a declared key ---------------------------------------

    def applies_to(self, spec) -> bool:
        return spec.has_keys and (spec.group in GROUP_TYPES or spec.name in GENERIC_TYPED
                                  or CREATION.get(spec.name) == "carries" or spec.name in RESTORES)

    def reads_from(self, spec) -> int | None:
        if spec.name in RESTORES:
            return None  # the payload's first byte: decided every time
        return NO_ARGUMENTS  # the keys' patterns and the command's group only

    def check(self, call):
        spec = call.spec
        args = call.args
        match = self.schema.match
        keys = call.keys
        if spec.name in RESTORES:
            return self._restored(call, keys)
        if spec.group not in GROUP_TYPES and spec.name not in GENERIC_TYPED:
            return self._carried(call, keys)
        for index, ks in keys:
            pattern = match(args[index])
            if pattern is None:
                continue
            expected = self._expected(spec, ks)
            if pattern.type not in expected:
                family = GROUP_TYPES.get(spec.group) or "/".join(sorted(expected))
                return self.finding(f"key '{text(args[index])}'",
                                    errors.schema_wrong_type(call.name.upper(), family, pattern))
        return None

    @staticmethod
    def _expected(spec, ks) -> frozenset:
        typed = GENERIC_TYPED.get(spec.name)
        if typed is not None:
            return typed[1] if not ks.flags.isdisjoint(WRITE_FLAGS) else typed[0]
        if spec.name in SET_OR_ZSET_SOURCES and "RO" in ks.flags:
            return SET_OR_ZSET
        return frozenset((GROUP_TYPES[spec.group],))

    def _carried(self, call, keys):
        """COPY/RENAME/RENAMENX source destination: the destination gets the source's type."""
        if len(keys) < 2:
            return None
        args = call.args
        source = self.schema.match(args[keys[0][0]])
        target = self.schema.match(args[keys[1][0]])
        if source is None or target is None or source.type == target.type:
            return None
        return self.finding(f"key '{text(args[keys[1][0]])}'",
                            errors.schema_carried_type(call.name.upper(), source, target))

    def _restored(self, call, keys):
        """RESTORE key ttl payload: the payload's type against the key's pattern."""
        args = call.args
        restored = payload_type(args[3]) if len(args) > 3 else None
        pattern = self.schema.match(args[1]) if restored is not None else None
        if pattern is None or pattern.type == restored:
            return None
        return self.finding(f"key '{text(args[1])}'", errors.schema_wrong_type("RESTORE", restored, pattern))

    def describe(self) -> str:
        count = len(self.schema) if self.schema is not None else 0
        what = f"{count} key pattern{'s' if count != 1 else ''}: commands of the declared type only"
        return what + ("; keys matching no pattern rejected" if self.strict else "; undeclared keys allowed")

"""T3: TTLs within bounds: not forever, not absurdly short.

A CommandRule on every command with a TTL argument (`_ttl.TTL_TABLE`: `SET ... EX/PX/EXAT/PXAT`,
SETEX, PSETEX, GETEX, EXPIRE/PEXPIRE/EXPIREAT/PEXPIREAT, RESTORE with a TTL). The TTL in seconds
(a Unix time counts from now) must lie in [`min_ttl`, `max_ttl`]; a negative or past TTL, which
deletes the key, is below any minimum. Redis 7.4/8's hash-field TTLs (`_ttl.FIELD_TTL_TABLE`:
HSETEX, HGETEX, HEXPIRE, HPEXPIRE, HEXPIREAT, HPEXPIREAT) keep the same bounds; HPERSIST and
HGETEX ... PERSIST are allowed (the fields then live as long as the key). `PERSIST k` and
`GETEX k PERSIST` are rejected: a key without a TTL is "forever". Keys matching a `persistent`
glob (as T1's) are exempt from both. A key of the key schema takes its pattern's word
(`use_schema`): `ttl: none` exempts it, `ttl: {min, max}` replaces the rule's bounds (a side left out keeps the rule's).
Arguments that are not integers are left for Redis to refuse.
"""

from __future__ import annotations

import time

from ...errors import schema_limit
from ..base import NO_ARGUMENTS, CommandRule, PolicyError, register
from ._durations import duration
from ._keyshape import text
from ._ttl import FIELD_TTL_TABLE, TTL_TABLE, PersistentKeys, call_ttl_args, field_ttl_args, ttl_args


@register
class TtlBounds(PersistentKeys, CommandRule):
    id = "T3"
    order = 303
    title = "TTL bounds"

    def __init__(self, settings):
        super().__init__(settings)
        self.min_ttl = settings.get("min_ttl", 1, kind=(int, float), minimum=0)
        self.max_ttl = settings.get("max_ttl", 2592000, kind=(int, float), minimum=0)
        if self.max_ttl < self.min_ttl:
            raise settings.error("max_ttl", f"'max_ttl' ({self.max_ttl}) is below 'min_ttl' ({self.min_ttl})")
        self.read_persistent(settings)
        self.bounds = _bounds_advice(self.min_ttl, self.max_ttl)
        self.pattern_bounds: dict[str, tuple] = {}  # schema pattern -> (min, max, advice)

    def use_schema(self, schema) -> None:
        if not self.take_ttl_schema(schema):
            return
        for pattern in schema:
            if pattern.ttl is None or not pattern.ttl.bounded:
                continue
            low = pattern.ttl.min_ttl if pattern.ttl.min_ttl is not None else self.min_ttl
            high = pattern.ttl.max_ttl if pattern.ttl.max_ttl is not None else self.max_ttl
            if high < low:
                raise PolicyError(f"schema: pattern '{pattern.pattern}': its TTL bounds and T3's leave no TTL "
                                  f"({duration(low)} to {duration(high)}): give both min and max", pattern.line)
            self.pattern_bounds[pattern.pattern] = (low, high, schema_limit(_bounds_advice(low, high), pattern))

    def applies_to(self, spec) -> bool:
        return spec.name in TTL_TABLE or spec.name in FIELD_TTL_TABLE

    def reads_from(self, spec) -> int:
        entry = TTL_TABLE.get(spec.name) or FIELD_TTL_TABLE[spec.name]
        return entry[1] if len(entry) > 1 else NO_ARGUMENTS

    def check(self, call):
        args = call.args
        if len(args) < 2:
            return None
        fields = call.name in FIELD_TTL_TABLE
        if fields:
            info = field_ttl_args(call.name, args)
            info.clear = False  # HGETEX ... PERSIST: the fields live as long as the key
        else:
            info = call_ttl_args(call) if args is call.args else ttl_args(call.name, args)
        if info is None or not (info.ttls or info.clear):
            return None
        key = args[1]
        if self.exempt is not None and self.exempt(key):
            return None
        low, high, bounds = self.min_ttl, self.max_ttl, self.bounds
        if self.pattern_bounds:
            pattern = self.schema.match(key)
            if pattern is not None and pattern.pattern in self.pattern_bounds:
                low, high, bounds = self.pattern_bounds[pattern.pattern]
        if info.clear:
            return self.finding(f"key '{text(key)}'", f"do not make it persistent: {bounds}")
        for index, unit, absolute in info.ttls:
            try:
                number = int(args[index])
            except ValueError:
                continue
            if absolute:
                call.volatile = True  # the verdict changes with the clock
            seconds = number * unit - (time.time() if absolute else 0)
            if seconds < low or seconds > high:
                got = duration(seconds) if seconds > 0 else "an expiry that deletes the key at once"
                if fields:
                    got = duration(seconds) if seconds > 0 else "an expiry that deletes the fields at once"
                    return self.finding(f"fields of key '{text(key)}'", f"{bounds} (got {got})")
                return self.finding(f"key '{text(key)}'", f"{bounds} (got {got})")
        return None

    def describe(self) -> str:
        return f"TTLs from {duration(self.min_ttl)} to {duration(self.max_ttl)}; PERSIST rejected"


def _bounds_advice(low, high) -> str:
    return f"use a TTL between {duration(low)} and {duration(high)}"

"""T2: random jitter on TTLs, so that keys written together do not all expire together.

A RewriteRule that runs after T1 (the rule order: T1, T2, T3, V...). It looks at every TTL
argument of the commands the rewrite chain sends so far (`_ttl.TTL_TABLE` says where they are:
`SET ... EX/PX/EXAT/PXAT`, SETEX, PSETEX, GETEX, the EXPIRE family, RESTORE) and multiplies it by
a factor drawn uniformly from [1 - jitter, 1 + jitter]: always when T1 injected it (an
`InjectedTtl` argument), and also on the client's own TTLs when `client_ttls: true`. A Unix time
(EXAT, PXAT, EXPIREAT, PEXPIREAT, RESTORE ... ABSTTL) has its distance from now jittered. The
result is a whole number in the argument's unit, at least 1. Arguments that are not integers
are left for Redis to refuse.

T2 reads the rewrite chain's whole output through `Call.commands` and returns the complete
list. An engine without `Call.commands` hands a rewrite rule only the first command of the
previous output: T2 then jitters T1's `SET ... EX ttl` but not its hidden `EXPIRE k ttl NX`.
Jittered TTLs are not checked against T3's bounds (T3 judges the client's arguments).

The random source is `self.random` (a `random.Random`): tests seed it.
"""

from __future__ import annotations

import random
import time

from ..base import RewriteRule, current_commands, register
from ._ttl import TTL_TABLE, InjectedTtl, may_create, ttl_args


def command_name(args) -> str:
    """The lower-case name of a raw command (`args[0]`), for `TTL_TABLE`."""
    return args[0].decode("latin-1").lower() if args else ""


@register
class TtlJitter(RewriteRule):
    id = "T2"
    order = 302
    title = "TTL jitter"

    def __init__(self, settings):
        super().__init__(settings)
        self.jitter = settings.get("jitter", 0.1, kind=(int, float), minimum=0)
        if self.jitter >= 1:
            raise settings.error("jitter", f"'jitter' must be below 1 (a fraction of the TTL), got {self.jitter!r}")
        self.client_ttls = settings.get("client_ttls", False, kind=bool)
        self.random = random.Random()

    def applies_to(self, spec) -> bool:
        if self.jitter == 0:
            return False
        # TTLs T1 may inject come with the commands that can create a key
        return may_create(spec) or (self.client_ttls and spec.name in TTL_TABLE)

    def rewrite(self, call):
        commands = current_commands(call)
        changed = None
        for position, args in enumerate(commands):
            name = command_name(args)
            if name not in TTL_TABLE:
                continue
            info = ttl_args(name, args)
            for index, unit, absolute in info.ttls:
                value = args[index]
                if not (self.client_ttls or isinstance(value, InjectedTtl)):
                    continue
                jittered = self._jitter(value, unit, absolute)
                if jittered is None:
                    continue
                if changed is None:
                    changed = list(commands)
                if changed[position] is args:
                    changed[position] = list(args)
                changed[position][index] = jittered
        return changed

    def _jitter(self, value: bytes, unit: float, absolute: bool) -> bytes | None:
        try:
            number = int(value)
        except ValueError:
            return None
        factor = self.random.uniform(1 - self.jitter, 1 + self.jitter)
        if not absolute:
            if number <= 0:
                return None  # deletes the key: nothing to spread
            return str(max(1, round(number * factor))).encode()
        now = time.time() / unit
        remaining = number - now
        if remaining <= 0:
            return None
        return str(max(int(now) + 1, round(now + remaining * factor))).encode()

    def describe(self) -> str:
        which = "injected and client TTLs" if self.client_ttls else "injected TTLs"
        return f"±{self.jitter:g} of the TTL, at random, on {which}"

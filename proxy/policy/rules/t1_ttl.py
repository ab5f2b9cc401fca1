"""T1: every key a write can create (or strip of its TTL) is left with a TTL.

Theory of operation
-------------------
*Which keys a command can create* comes from the command table, not from a list of names:
a key whose key spec is flagged `INSERT` or `OW` (on a write command), or `RW` + `UPDATE` on a
command flagged `denyoom` (it may grow memory: HSET, ZADD, INCR, SETRANGE, XADD...). `OW` also
means "overwritten": SET, MSET, *STORE leave the key without the TTL it had. What no flag says is
in two documented tables of `_ttl.py`: `TTL_TABLE` (which argument is a TTL, which option keeps
or clears one; T2 and T3 read it too) and `CREATION` (commands the flags over-report: LPUSHX only
touches an existing list; and COPY/RENAME, whose destination takes the source's TTL).

`action: reject` (a CommandRule, `RequireTtl`) is static: the proxy does not ask the server
whether the key exists. A write that can create a key passes when it sets a TTL itself (`SET ...
EX`, SETEX, PSETEX, RESTORE with a TTL: when that TTL is invalid Redis writes nothing), when a
later command of the same pipeline is certain to give the key one (`_ttl_certain`: EXPIRE and
its kin with valid options, never XX or GT, a TTL Redis accepts; `SET k ... EX` without NX;
SETEX, PSETEX; `GETEX k EX` after a string write; that later command passes the whole policy
itself, and nothing between them changes the database, ends the run or carries the key away; the
first `LATER_SCAN` commands are looked at), or, inside MULTI, when an earlier command of the open
transaction certainly gave the key a TTL and this one keeps it (`SET k v EX 60` then `INCR k`;
the session clears `state.expiring` at EXEC/DISCARD, this rule fills it). So every write of a
counter or a hash field carries its EXPIRE; that is what "TTL mandatory" means without a
round trip. `SET ... KEEPTTL` counts as no TTL (a new key has none) unless something above gives
one. `PERSIST k` and `GETEX k PERSIST` are rejected. A transaction sent one command at a time
(MULTI; HSET k; EXPIRE k; EXEC, each awaited) cannot be judged at the HSET: see the report on a
pending-keys check at EXEC.

`action: inject` (a RewriteRule, `InjectTtl`): `SET` without a TTL gets `EX <default_ttl>`;
`SET ... KEEPTTL` and every other creating write (SETNX, GETSET, MSET: one per key, HSET, LPUSH,
INCR, RENAME's destination...) are followed by a hidden `EXPIRE key <default_ttl> NX`, which
gives a TTL only to a key that has none (so an existing TTL is never shortened or extended; needs
Redis 7.0). Inside MULTI the output is the same; the session sends the hidden commands after
EXEC, since their replies would change EXEC's. PERSIST / GETEX PERSIST are rejected in `check`.
Injected TTL arguments are `InjectedTtl` bytes, so that T2 can tell them from the client's.

Keys matching a `persistent` glob (fnmatch, case-sensitive, on the key decoded as UTF-8) are
exempt. The key schema has the last word on its keys (`use_schema`): a pattern with `ttl: none`
is exempt, one with a required TTL is not, whatever the globs say; `inject` gives a key whose
pattern bounds its TTL the default TTL brought within those bounds. Scripts (EVAL, FCALL) create
keys the proxy cannot see: C6 decides about them.
"""

from __future__ import annotations

from ..base import NO_ARGUMENTS, CommandRule, RewriteRule, Rule, current_commands, register, same_command
from ._keyshape import text
from ._ttl import (
    CREATION,
    TTL_TABLE,
    InjectedTtl,
    PersistentKeys,
    call_ttl_args,
    creates,
    creation,
    may_create,
    ttl_args,
)
from ._ttl_certain import DELETED, TTL, later_gives_ttl, ttl_outcome
from ._types import GROUP_TYPES

LATER_SCAN = 512  # how many later commands of a pipeline T1 looks through for an EXPIRE


def ttl_reads_from(spec) -> int:
    """The first argument whose bytes say something about a TTL (`CommandRule.reads_from`):
    SET/GETEX options and RESTORE's TTL and ABSTTL; TTL_TABLE's "at" arguments are read by T3
    only, T1 needs just their presence."""
    entry = TTL_TABLE.get(spec.name)
    start = entry[1] if entry is not None and entry[0] in ("options", "restore") else NO_ARGUMENTS
    if isinstance(CREATION.get(spec.name), tuple):  # MKSTREAM / NOMKSTREAM among the options
        start = min(start, 2)
    return start


# -- the rule -----------------------------------------------------------------------------------


@register
class TtlRequired(Rule):
    """T1 as the policy names it; `action` chooses the class that does the work."""

    id = "T1"
    order = 301
    title = "every key has a TTL"

    @classmethod
    def from_settings(cls, settings):
        action = settings.get("action", "reject", kind=str, choices=("reject", "inject"))
        rule = (InjectTtl if action == "inject" else RequireTtl)(settings)
        settings.check_unused()
        return rule


class _TtlCommon(PersistentKeys):
    id = "T1"
    title = "every key has a TTL"

    def __init__(self, settings):
        super().__init__(settings)
        self.action = settings.get("action", "reject", kind=str, choices=("reject", "inject"))
        self.default_ttl = settings.get("default_ttl", 3600, kind=int, minimum=1)
        self.read_persistent(settings)
        self.ttl = InjectedTtl(str(self.default_ttl).encode())
        self.pattern_ttls: dict[str, InjectedTtl] = {}  # schema pattern -> the TTL injected for it

    def use_schema(self, schema) -> None:
        if not self.take_ttl_schema(schema):
            return
        for pattern in schema:
            if pattern.ttl is not None and pattern.ttl.bounded:
                low, high = pattern.ttl.min_ttl or 1, pattern.ttl.max_ttl or self.default_ttl
                ttl = min(max(self.default_ttl, low), high)
                if ttl != self.default_ttl:
                    self.pattern_ttls[pattern.pattern] = InjectedTtl(str(ttl).encode())

    def ttl_for(self, key: bytes) -> InjectedTtl:
        """The TTL to inject for this key: the default, within its schema pattern's bounds."""
        if self.pattern_ttls:
            pattern = self.schema.match(key)
            if pattern is not None:
                return self.pattern_ttls.get(pattern.pattern, self.ttl)
        return self.ttl

    def describe(self) -> str:
        what = ("reject writes that leave a key without a TTL" if self.action == "reject"
                else f"add a TTL of {self.default_ttl} s to writes that leave a key without one")
        if self.persistent:
            what += f"; persistent: {', '.join(self.persistent)}"
        return what + "; PERSIST rejected"

    def _persist_finding(self, call, info):
        """PERSIST k / GETEX k PERSIST on a key that is not persistent."""
        if info is None or not info.clear or len(call.args) < 2:
            return None
        key = call.args[1]
        if self.exempt is not None and self.exempt(key):
            return None
        return self.finding(f"key '{text(key)}'", "do not remove its TTL: keys of this policy expire "
                            "(set a new TTL with EXPIRE instead)")

    def _needing_ttl(self, call, info):
        """(index, key, clears its TTL) of every key this write may leave without a TTL."""
        spec = call.spec
        how = creation(spec, call.args)
        if how == "never":
            return
        args = call.args
        sets_ttl = info is not None and bool(info.ttls)
        for index, ks in call.keys or ():
            flags = ks.flags
            if not creates(spec, flags):
                continue
            key = args[index]
            if sets_ttl and index == 1:
                continue
            if self.exempt is not None and self.exempt(key):
                continue
            # OW (not INSERT-only): the write replaces the value and with it the TTL; so do SET
            # and GETSET whatever their flags (SET ... GET is RW), unless KEEPTTL
            if call.name == "set":
                clears = not info.keep
            else:
                clears = call.name == "getset" or ("OW" in flags and "INSERT" not in flags)
            yield index, key, clears, how


# Inside MULTI, what makes the keys given a TTL earlier in the transaction count no more: a
# change of database (every key), a key moved away (MOVE); and every command whose key specs
# delete (DELETE, RM: DEL, GETDEL, LPOP, RENAME's source...).
SETTLES = frozenset({"select", "swapdb", "flushdb", "flushall"})
MOVES_AWAY = frozenset({"move"})


def forgets(spec) -> bool:
    """Can this command (in a transaction) end the TTL bookkeeping of a key?"""
    return spec.name in SETTLES or spec.name in MOVES_AWAY or any(
        "DELETE" in ks.flags or "RM" in ks.flags for ks in spec.key_specs)


class RequireTtl(_TtlCommon, CommandRule):
    """`action: reject`."""

    def __init__(self, settings):
        super().__init__(settings)
        self.forgetting: set[str] = set()  # commands that end a key's bookkeeping in MULTI (`forgets`)
        self.writing: set[str] = set()  # commands that may create a key or change its TTL

    def applies_to(self, spec) -> bool:
        if forgets(spec):
            self.forgetting.add(spec.name)  # RENAME, LMOVE, SMOVE also write: both apply
        if may_create(spec) or spec.name in TTL_TABLE:
            self.writing.add(spec.name)
        return spec.name in self.writing or spec.name in self.forgetting

    def reads_from(self, spec) -> int:
        return ttl_reads_from(spec)  # and `call.later`, which makes a call volatile

    # A later command gives a key its TTL only when it names it at argument 1 and the policy
    # passes it (later_gives_ttl, ttl_outcome).
    reads_later = True

    def check(self, call):
        if call.name in self.forgetting and call.state.in_multi:
            self._forget(call)
        if call.name not in self.writing:
            return None
        info = call_ttl_args(call)
        found = self._persist_finding(call, info)
        if found is not None:
            return found
        state = call.state
        keys = call.keys
        if info is not None and info.ttls and not state.in_multi and len(keys) == 1 and keys[0][0] == 1:
            return None  # the common `SET k v EX n`: it gives its only key a TTL itself
        cleared = None
        for _index, key, clears, how in self._needing_ttl(call, info):
            if how == "carries":
                continue
            if state.in_multi and not clears and key in state.expiring:
                continue
            if not later_gives_ttl(call.later, key, _writes_string(call), call.engine, LATER_SCAN):
                finding = self.finding(f"key '{text(key)}'", self._advice(call, key, info))
                if not state.in_multi:
                    return finding
                # A transaction sent command by command may still give it a TTL before EXEC:
                # the session checks what is still owed then.
                state.owed[key] = finding
            if clears:
                cleared = (cleared or []) + [key]
        if state.in_multi:
            self._track(call, info, cleared)
        return None

    def _advice(self, call, key: bytes, info) -> str:
        then = f"send EXPIRE {text(key)} <seconds> after it in the same pipeline or transaction"
        if call.name == "set":
            if info is not None and info.keep:
                return f"KEEPTTL leaves a new key without a TTL: use EX <seconds> instead, or {then}"
            return f"add EX <seconds> (or PX, EXAT, PXAT), or {then}"
        return then

    @staticmethod
    def _track(call, info, cleared) -> None:
        """Inside MULTI: remember the keys this command certainly leaves with a TTL (for the next
        ones). EXPIRE and its kin give one only to a key that exists: one written earlier in the
        transaction; SET without XX, SETEX and PSETEX write the key themselves."""
        state = call.state
        expiring = state.expiring
        args = call.args
        if info is not None and len(args) > 1:
            key = args[1]
            if info.clear:
                expiring.discard(key)
            else:
                outcome = ttl_outcome(args, key, False)
                if outcome == DELETED:
                    state.forget(key)
                    return
                writes = call.name in ("setex", "psetex") or (
                    call.name == "set" and b"xx" not in (arg.lower() for arg in args[3:]))
                if outcome == TTL and (writes or key in state.owed or key in expiring):
                    expiring.add(key)
                    return
        for key in cleared or ():
            expiring.discard(key)  # replaced: the TTL it had is gone (the later EXPIRE gives one)

    @staticmethod
    def _forget(call) -> None:
        """Inside MULTI: a change of database, or keys deleted or moved away."""
        state = call.state
        if call.name in SETTLES:
            state.settle()
            return
        args = call.args
        for index, ks in call.keys or ():
            if call.name in MOVES_AWAY or "DELETE" in ks.flags or "RM" in ks.flags:
                state.forget(args[index])


def _writes_string(call) -> bool:
    """Does the write leave a string (so that a later GETEX or SET ... GET applies to it)?"""
    return GROUP_TYPES.get(call.spec.group) == "string"


class InjectTtl(_TtlCommon, RewriteRule):
    """`action: inject`."""

    server_commands = frozenset({"expire"})  # the hidden EXPIRE key ttl NX

    def applies_to(self, spec) -> bool:
        return may_create(spec) or spec.name in ("persist", "getex")

    def check(self, call):
        return self._persist_finding(call, call_ttl_args(call))

    def rewrite(self, call):
        commands = current_commands(call)
        args = commands[0]
        if not same_command(call, args):
            return None  # an earlier rewrite sent something else
        info = ttl_args(call.name, args)
        first = args
        extras = []
        seen = set()
        for _index, key, _clears, _how in self._needing_ttl(call, info):
            if call.name == "set" and not info.keep:
                first = [*args, b"EX", self.ttl_for(key)]
            elif key not in seen:
                seen.add(key)
                extras.append([b"EXPIRE", key, self.ttl_for(key), b"NX"])
        if first is args and not extras:
            return None
        return [first, *commands[1:], *extras]

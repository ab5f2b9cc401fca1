"""Is a later command of a pipeline certain to give a key its TTL? (T1's `action: reject`)

A write passes T1 on the strength of a later command only when that command will apply: this
module reads the later command as redis-server 7 reads it (src/expire.c `expireGenericCommand`,
src/t_string.c `parseExtendedStringArgumentsOrReply` and `getExpireMillisecondsOrReply`), for a
key that the earlier write has just created or replaced, so that it exists and has no TTL:

* EXPIRE/PEXPIRE/EXPIREAT/PEXPIREAT key n [NX|XX|GT|LT]...: the options Redis accepts, not NX
  with XX/GT/LT nor GT with LT; XX and GT never apply to a key without a TTL (GT counts "no TTL"
  as infinite); n a strict integer that Redis's overflow checks let through (seconds * 1000, plus
  the time now for the relative forms). A TTL of 0 or less deletes the key: no key, no key
  without a TTL.
* SET key value [NX|XX] [GET] EX|PX|EXAT|PXAT t: valid options (no KEEPTTL with a TTL, one kind
  of TTL option: `EX 5 EX 6` is EX 6), t > 0 and no overflow; not NX (the key exists); with GET only after a
  string write
  (GET on another type is a WRONGTYPE error and nothing is set).
* SETEX/PSETEX key t value: four arguments, t > 0, no overflow.
* GETEX key EX|PX|EXAT|PXAT t: one TTL option and no PERSIST, after a string write only.

`later_gives_ttl` walks the commands after the write and stops (gives up) at anything between
that could keep the later command from running in the same database on the same key: a command
that switches the session's connection or state (the session's own connection-state commands:
MULTI, SELECT, RESET, QUIT, WAIT, CLIENT, subscriptions...; a blocking command), the end of a transaction,
SWAPDB/FLUSH* aside, and a
command that carries the key's value elsewhere (RENAME, COPY, MOVE, MIGRATE with the key as a
source). Sans-IO; the clock is read for the overflow checks only.
"""

from __future__ import annotations

import time

from ...resp.exact import string2ll
from ...session.behaviour import EXCEPTIONS, PASS

LLONG_MAX = (1 << 63) - 1
LLONG_MIN = -(1 << 63)

EXPIRE_COMMANDS = {  # name -> (milliseconds per unit, relative to now)
    b"expire": (1000, True), b"pexpire": (1, True), b"expireat": (1000, False), b"pexpireat": (1, False),
}
SET_TTL_OPTIONS = {b"ex": (1000, True), b"px": (1, True), b"exat": (1000, False), b"pxat": (1, False)}
EXPIRE_FLAGS = frozenset({b"nx", b"xx", b"gt", b"lt"})

# Between the write and its TTL: commands that end the run of commands sent together, or change
# the database or connection the next ones run on.
STOP = frozenset({*(name.encode() for name, (standalone, _cluster) in EXCEPTIONS.items()
                    if standalone != PASS and "|" not in name),
                  b"client", b"subscribe", b"psubscribe", b"ssubscribe", b"unsubscribe", b"punsubscribe",
                  b"sunsubscribe", b"exec", b"discard", b"swapdb", b"migrate"})
# Commands that carry a source key's value to another name or database (the copy has no TTL yet).
CARRIERS = frozenset({b"rename", b"renamenx", b"copy", b"move"})


def now_ms() -> int:
    return int(time.time() * 1000)


TTL, DELETED = "ttl", "deleted"  # what a command certainly does to the key: a TTL, or deletes it


def _expire_outcome(args, unit: int, relative: bool) -> str | None:
    flags = set()
    for option in args[3:]:
        option = option.lower()
        if option not in EXPIRE_FLAGS:
            return None  # Unsupported option
        flags.add(option)
    if b"nx" in flags and flags & {b"xx", b"gt", b"lt"}:
        return None
    if b"gt" in flags and b"lt" in flags:
        return None
    if b"xx" in flags or b"gt" in flags:
        return None  # the key has no TTL yet: XX and GT do not apply
    when = string2ll(args[2])
    if when is None:
        return None
    if unit == 1000:
        if when > LLONG_MAX // 1000 or when < LLONG_MIN // 1000:
            return None
        when *= 1000
    now = now_ms()
    base = now if relative else 0
    if when > LLONG_MAX - base:
        return None
    return TTL if when + base > now else DELETED  # checkAlreadyExpired: a time past deletes it


def _ttl_outcome(value: bytes, unit: int, relative: bool) -> str | None:
    """getExpireMillisecondsOrReply: a positive strict integer that does not overflow; an
    absolute time already past deletes the key."""
    number = string2ll(value)
    if number is None or number <= 0 or (unit == 1000 and number > LLONG_MAX // 1000):
        return None
    number *= unit
    now = now_ms()
    if relative:
        return TTL if number <= LLONG_MAX - now else None
    return TTL if number > now else DELETED


def _set_options(args, start: int, is_set: bool):
    """(ttl option, its value, flags) of SET/GETEX options, or None when Redis refuses them."""
    flags = set()
    ttl = None
    i = start
    count = len(args)
    while i < count:
        option = args[i].lower()
        if is_set and option in (b"nx", b"xx", b"get"):
            if (option == b"nx" and b"xx" in flags) or (option == b"xx" and b"nx" in flags):
                return None
            flags.add(option)
        elif option == (b"keepttl" if is_set else b"persist"):  # no TTL with it
            if ttl is not None:
                return None
            flags.add(option)
        elif option in SET_TTL_OPTIONS and i + 1 < count:
            if (ttl is not None and ttl[0] != option) or b"keepttl" in flags or b"persist" in flags:
                return None  # EX with PX (or KEEPTTL, PERSIST): syntax error; EX twice: the last
            ttl = (option, args[i + 1])
            i += 1
        else:
            return None  # syntax error
        i += 1
    return ttl, flags


def ttl_outcome(args, key: bytes, wrote_string: bool) -> str | None:
    """What `args` certainly does to `key` (existing, no TTL): TTL (it gets one), DELETED (a
    TTL already past), or None (maybe nothing: refused, or not applying). `wrote_string`: the
    key holds a string (GET and GETEX need one)."""
    if len(args) < 3 or args[1] != key:
        return None
    name = args[0].lower()
    expire = EXPIRE_COMMANDS.get(name)
    if expire is not None:
        return _expire_outcome(args, *expire)
    if name in (b"setex", b"psetex"):
        return _ttl_outcome(args[2], 1000 if name == b"setex" else 1, True) if len(args) == 4 else None
    if name == b"set" or name == b"getex":
        is_set = name == b"set"
        parsed = _set_options(args, 3 if is_set else 2, is_set)
        if parsed is None:
            return None
        ttl, flags = parsed
        if ttl is None or b"nx" in flags:
            return None
        if (b"get" in flags or not is_set) and not wrote_string:
            return None
        return _ttl_outcome(ttl[1], *SET_TTL_OPTIONS[ttl[0]])
    return None


def gives_ttl_certainly(args, key: bytes, wrote_string: bool) -> bool:
    """Does `args` certainly leave `key` (existing, no TTL) with a TTL, or delete it?"""
    return ttl_outcome(args, key, wrote_string) is not None


def _passing_names(table) -> frozenset:
    """The names, as clients spell them (lower and upper case), of the commands that matter to
    `later_gives_ttl` only when their argument 1 is the key: neither a STOP, nor blocking, nor a
    container (whose subcommand may block)."""
    names = set()
    for spec in table:
        if spec.subcommands or "blocking" in spec.flags or spec.name.encode() in STOP:
            continue
        names.add(spec.name.encode())
        names.add(spec.name.upper().encode())
    return frozenset(names)


_PASSING: dict[int, tuple] = {}  # id(table) -> (table, its _passing_names)


_PASSING: dict[int, tuple] = {}  # id(table) -> (table, its _passing_names)
# The scans of the last pipeline looked through (one list of commands): (key, wrote_string,
# engine) -> (result, the command that decided it or None, scanned through). A pipeline of writes
# without TTL on one key would otherwise look through `limit` commands each.
_SCANS: list = [None, 0, {}]  # [commands, their count, scans]


def later_gives_ttl(later, key: bytes, wrote_string: bool, engine, limit: int) -> bool:
    """Does a command of `later` (the rest of the pipeline, in order) certainly give `key` a
    TTL, with nothing between that could keep it from applying? `engine` judges whether the
    policy forwards that command (`Engine.passes`) and which commands block (its command table).
    At most `limit` commands are looked at; one on another key is passed over with a set lookup,
    and a session's pipeline (`pending.LaterCommands`) is looked through once for each key,
    whatever the number of its writes: each goes on from where the scan before it stopped."""
    table = engine.table
    known = _PASSING.get(id(table))
    if known is None or known[0] is not table:
        if len(_PASSING) > 16:
            _PASSING.clear()
        known = _PASSING[id(table)] = (table, _passing_names(table))
    passing = known[1]
    commands = getattr(later, "commands", None)
    if commands is None:  # a sequence of its own (tools, tests)
        commands = list(later)
        return _scan(commands, 0, min(len(commands), limit), key, wrote_string, engine, passing)[0]
    start = later.start
    end = min(len(commands), start + limit)
    if _SCANS[0] is not commands or _SCANS[1] != len(commands):
        _SCANS[0], _SCANS[1], _SCANS[2] = commands, len(commands), {}
    scans = _SCANS[2]
    found = (key, wrote_string, engine)
    begin = start
    known = scans.get(found)
    if known is not None:
        result, at, through = known
        if at is not None and at >= start:  # every command between was passed over
            return result if at < end else False
        if at is None and through > start:
            begin = through  # the commands before it were passed over
    result, at = _scan(commands, begin, end, key, wrote_string, engine, passing)
    scans[found] = (result, at, end)
    return result


# The last pipeline `passes_over` indexed: [commands, their count, the names passed over (a
# `_passing_names`), the index of the last command not passed over whatever its key (-1: none),
# key -> the index of the last command on it that would be passed over on another key].
_LAST: list = [None, 0, None, -1, None]


def passes_over(later, key: bytes, engine) -> bool:
    """Would `later_gives_ttl` pass over every command of `later` for `key` (so say no)? True
    only when it certainly would: no later command names `key` at argument 1, and each is one
    it passes over on another key. A pipeline is indexed once (one pass), then each key costs
    two lookups; False (ask `later_gives_ttl`) for anything else."""
    commands = getattr(later, "commands", None)
    if commands is None:
        return False
    table = engine.table
    known = _PASSING.get(id(table))
    if known is None or known[0] is not table:
        return False  # (later_gives_ttl fills it)
    passing = known[1]
    if _LAST[0] is not commands or _LAST[1] != len(commands) or _LAST[2] is not passing:
        stop = -1
        last = {}
        for index, args in enumerate(commands):
            if len(args) > 1 and args[0] in passing:
                last[args[1]] = index
            else:
                stop = index
        _LAST[0], _LAST[1], _LAST[2], _LAST[3], _LAST[4] = commands, len(commands), passing, stop, last
    start = later.start
    return _LAST[3] < start and _LAST[4].get(key, -1) < start


def _scan(commands, begin: int, end: int, key: bytes, wrote_string: bool, engine, passing) -> tuple:
    """(result, index of the command that decided it) of `later_gives_ttl` over
    commands[begin:end]; (False, None) when none decided."""
    for index in range(begin, end):
        args = commands[index]
        if not args:
            return False, index
        if len(args) > 1 and args[1] != key and args[0] in passing:
            continue
        if gives_ttl_certainly(args, key, wrote_string):
            if engine.passes(args):
                return True, index
            continue  # refused by the policy: it will not run; a later one may still do
        name = args[0].lower()
        if name in STOP or (name in CARRIERS and len(args) > 1 and args[1] == key):
            return False, index
        spec = engine.table.lookup(args)
        if spec is not None and "blocking" in spec.flags:
            return False, index  # the session moves to a connection of its own and waits for it
    return False, None

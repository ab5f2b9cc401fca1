"""The key-spec interpreter: which arguments of a command are keys.

Theory of operation
-------------------
``find_keys`` is Redis's own algorithm (src/db.c, ``getKeysFromCommandWithSpecs`` and
``getKeysUsingKeySpecs``, 7.0) applied to the key specs of a ``CommandSpec``; it knows
no command by name except through the fallback table below. It returns the argument
index of every key, each with the ``KeySpec`` whose flags apply, in key-spec order.

1. Each key spec finds its first key (``index``, or the argument after a
   case-insensitive ``keyword`` search) and then its keys (``range`` or ``keynum``).
   Specs flagged ``NOT_KEY`` (shard channels) are skipped unless asked for.
2. A spec that cannot hold for these arguments (numkeys not a non-negative integer,
   first or last key out of range, zero keys) means Redis will answer with an error:
   no keys at all are returned, and the proxy lets Redis reply.
   One deliberate difference: a range running "to the last argument" that finds no
   argument left is empty, not invalid. Redis 7.0 calls it invalid, yet runs such
   commands: ``PFMERGE dest`` (no source) writes ``dest`` while ``COMMAND GETKEYS``
   reports an error. A policy must not miss that key.
3. Where Redis itself gives up on the specs it calls the command's ``getkeys_proc``:
   a spec whose search is ``unknown``, a spec flagged ``INCOMPLETE`` (after its keys
   are taken), or any spec flagged ``VARIABLE_FLAGS`` (the flags, not the positions,
   depend on the arguments). ``GETKEYS_PROCS`` holds our version of those procs for
   every 7.0 command whose specs need them:

   ============  =====================================  =======================================
   command       why Redis needs the proc               what the proc does (from db.c)
   ============  =====================================  =======================================
   sort          BY/GET and STORE specs are 'unknown'   key at 1 (RO ACCESS); the last STORE k
                                                        found skipping LIMIT a b / BY p / GET p
                                                        (OW UPDATE). BY/GET keys are not found.
   sort_ro       BY/GET spec is 'unknown'               key at 1 (RO ACCESS). BY/GET: not found.
   migrate       KEYS spec is INCOMPLETE                key at 3, or with an empty key at 3 every
                                                        argument after KEYS, skipping COPY,
                                                        REPLACE, AUTH pw, AUTH2 user pw.
   set           VARIABLE_FLAGS                         key at 1: RW ACCESS UPDATE with GET,
                                                        else OW UPDATE.
   bitfield      VARIABLE_FLAGS                         key at 1: RO ACCESS if only GET/OVERFLOW,
                                                        else RW ACCESS UPDATE.
   ============  =====================================  =======================================

   A command that needs a proc we do not have (a newer server) gets the keys of its
   well-defined specs only; ``resolves_all_keys`` tells the policy layer so.

Keys Redis cannot know at all (SORT ... BY/GET patterns, keys a script touches but
was not given) are not returned by anything here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .table import CommandSpec

__all__ = ["GETKEYS_PROCS", "BeginSearch", "FindKeys", "KeySpec", "find_keys", "parse_numkeys", "resolves_all_keys"]


# A command's key specs, as COMMAND INFO gives them (table.py reads them into these).
@dataclass(frozen=True, slots=True)
class BeginSearch:
    """Where the search for the first key starts.

    kind 'index':   the first key is at argument ``pos``.
    kind 'keyword': the first key follows ``keyword`` (matched case-insensitively),
                    searched forward from ``startfrom`` when it is positive, backward
                    from ``argc + startfrom`` when it is negative.
    kind 'unknown': Redis cannot tell (e.g. SORT's BY/GET/STORE).
    """

    kind: str
    pos: int = 0
    keyword: str = ""
    startfrom: int = 0
    keyword_lower: bytes = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "keyword_lower", self.keyword.lower().encode())


@dataclass(frozen=True, slots=True)
class FindKeys:
    """Which arguments, from the first key on, are keys.

    kind 'range':   ``lastkey`` >= 0 is the last key relative to the first; -1 is the
                    last argument, -2 the one before, ...; with ``limit`` > 1 (and
                    lastkey -1) only the first 1/limit of the remaining arguments.
    kind 'keynum':  argument ``first + keynumidx`` holds the number of keys, which
                    start at ``first + firstkey``.
    kind 'unknown': Redis cannot tell.
    Both known kinds step by ``keystep``.
    """

    kind: str
    lastkey: int = 0
    keystep: int = 1
    limit: int = 0
    keynumidx: int = 0
    firstkey: int = 0


@dataclass(frozen=True, slots=True)
class KeySpec:
    begin_search: BeginSearch
    find_keys: FindKeys
    flags: frozenset[str]  # upper case: RW RO OW RM ACCESS UPDATE INSERT DELETE NOT_KEY INCOMPLETE VARIABLE_FLAGS
    notes: str = field(default="", compare=False)



KeyPositions = list[tuple[int, "KeySpec"]]


def find_keys(spec: CommandSpec, args: Sequence[bytes], *, include_not_keys: bool = False) -> KeyPositions:
    """Argument index of each key of ``args`` (``args[0]`` is the command name)."""
    direct = _DIRECT.get(id(spec))
    if direct is None:
        direct = _DIRECT[id(spec)] = (spec, _direct_proc(spec))
    if direct[0] is spec and direct[1] is not None and len(args) >= 2:
        return direct[1].find(spec, args)
    argc = len(args)
    keys: KeyPositions = []
    use_proc = False  # Redis would call the command's getkeys proc
    for ks in spec.key_specs:
        flags = ks.flags
        if flags and "NOT_KEY" in flags and not include_not_keys:
            continue
        if flags and "VARIABLE_FLAGS" in flags:
            use_proc = True

        bs = ks.begin_search
        kind = bs.kind
        if kind == "index":
            first = bs.pos
        elif kind == "keyword":
            first = _keyword_search(bs.keyword_lower, bs.startfrom, args, argc)
            if not first:
                continue  # keyword absent: this spec has no keys
        else:
            use_proc = True
            continue

        fk = ks.find_keys
        kind = fk.kind
        if kind == "range":
            lastkey = fk.lastkey
            if lastkey >= 0:
                last = first + lastkey
            elif not fk.limit:
                last = argc + lastkey
            else:
                rest = argc - first  # C division truncates towards zero
                last = first + (rest // fk.limit if rest >= 0 else -(-rest // fk.limit)) + lastkey
            if last == first - 1 and lastkey < 0:
                continue  # nothing left for "up to the last argument": no keys (see note 2)
        elif kind == "keynum":
            at = first + fk.keynumidx
            if at >= argc or at < 0:
                return _invalid(spec, args)
            numkeys = parse_numkeys(args[at])
            if numkeys is None:
                return _invalid(spec, args)
            first += fk.firstkey
            last = first + numkeys - 1
        else:
            use_proc = True
            continue

        if last >= argc or last < first or first >= argc or first < 0:
            return _invalid(spec, args)
        step = fk.keystep
        if step < 1:
            use_proc = True
            continue
        if first == last:
            keys.append((first, ks))
        else:
            keys.extend([(i, ks) for i in range(first, last + 1, step)])
        if flags and "INCOMPLETE" in flags:
            use_proc = True

    if use_proc:
        proc = GETKEYS_PROCS.get(spec.name)
        if proc is not None:
            return proc.find(spec, args)
    return keys


# Commands whose only key spec is "argument 1" with VARIABLE_FLAGS (SET, BITFIELD): the generic
# pass would find argument 1 and then defer to the proc anyway, so the proc is asked at once.
_DIRECT: dict[int, tuple] = {}


def _direct_proc(spec: CommandSpec):
    specs = spec.key_specs
    if len(specs) != 1 or spec.name not in GETKEYS_PROCS:
        return None
    ks = specs[0]
    if ("VARIABLE_FLAGS" in ks.flags and ks.begin_search.kind == "index" and ks.begin_search.pos == 1
            and ks.find_keys.kind == "range" and ks.find_keys.lastkey == 0 and ks.find_keys.keystep == 1
            and not ks.flags & {"INCOMPLETE", "NOT_KEY"}):
        return GETKEYS_PROCS[spec.name]
    return None


def parse_numkeys(arg: bytes) -> int | None:
    """A non-negative integer as Redis's string2ll reads one (no sign, no leading zero)."""
    if arg.isdigit() and (arg[0] != 48 or len(arg) == 1) and len(arg) < 21:  # 48 == ord('0')
        return int(arg)
    return None


def resolves_all_keys(spec: CommandSpec) -> bool:
    """False when ``find_keys`` may miss keys of this command: some spec is 'unknown'
    or INCOMPLETE and no proc finds them all (SORT/SORT_RO BY and GET patterns; any
    such command of a newer server)."""
    proc = GETKEYS_PROCS.get(spec.name)
    if proc is not None:
        return proc.complete
    return not any(
        ks.begin_search.kind == "unknown" or ks.find_keys.kind == "unknown" or "INCOMPLETE" in ks.flags
        for ks in spec.key_specs
    )


def _keyword_search(keyword: bytes, startfrom: int, args: Sequence[bytes], argc: int) -> int:
    """Index after the keyword, or 0 (loop bounds exactly as in db.c)."""
    if startfrom > 0:
        i, end = startfrom, argc - 1
    else:
        i, end = argc + startfrom, 1
    step = 1 if i <= end else -1
    n = len(keyword)
    while i != end:
        if i >= argc or i < 1:
            break
        arg = args[i]
        if len(arg) == n and arg.lower() == keyword:
            return i + 1
        i += step
    return 0


def _invalid(spec: CommandSpec, args: Sequence[bytes]) -> KeyPositions:
    """A spec that cannot hold: Redis falls back to the proc, which (for every 7.0
    command) finds no keys in arguments the command itself will reject."""
    proc = GETKEYS_PROCS.get(spec.name)
    return proc.find(spec, args) if proc is not None else []


# -- the getkeys procs ------------------------------------------------------------------


class GetKeysProc:
    __slots__ = ("find", "complete", "reads_from")

    def __init__(self, find: Callable[[CommandSpec, Sequence[bytes]], KeyPositions], complete: bool,
                 reads_from: int) -> None:
        self.find = find
        self.complete = complete  # finds every key the command can touch
        self.reads_from = reads_from  # the first argument it reads (SET: its options, from 3)


RO_ACCESS = frozenset({"RO", "ACCESS"})
RW_ACCESS_UPDATE = frozenset({"RW", "ACCESS", "UPDATE"})
RW_ACCESS_DELETE = frozenset({"RW", "ACCESS", "DELETE"})
OW_UPDATE = frozenset({"OW", "UPDATE"})

# Options to step over, and how many arguments each takes (sortGetKeys, migrateGetKeys).
SORT_OPTION_ARGS = {b"limit": 2, b"get": 1, b"by": 1}
MIGRATE_OPTION_ARGS = {b"copy": 0, b"replace": 0, b"auth": 1, b"auth2": 2}


def _pick(spec: CommandSpec, flags: frozenset[str], begin: str) -> KeySpec:
    """The command's own key spec with these flags (and begin-search kind, if any
    matches), so callers see the spec Redis documents for that key."""
    fallback = None
    for ks in spec.key_specs:
        if flags <= ks.flags:
            if ks.begin_search.kind == begin:
                return ks
            if fallback is None:
                fallback = ks
    return fallback if fallback is not None else _synthetic(flags)


@cache
def _synthetic(flags: frozenset[str]) -> KeySpec:
    return KeySpec(BeginSearch("unknown"), FindKeys("unknown"), flags, "from a getkeys proc")


_WITH_FLAGS: dict = {}


def _with_flags(ks: KeySpec, flags: frozenset[str]) -> KeySpec:
    """``ks`` with the flags a VARIABLE_FLAGS proc settled on. Cached by the spec's identity:
    hashing a KeySpec (nested dataclasses) costs more than the whole SET lookup."""
    key = (id(ks), flags)
    found = _WITH_FLAGS.get(key)
    if found is None or found[0] is not ks:
        found = _WITH_FLAGS[key] = (ks, replace(ks, flags=flags))
    return found[1]


def _sort_keys(spec: CommandSpec, args: Sequence[bytes]) -> KeyPositions:
    argc = len(args)
    if argc < 2:
        return []
    keys: KeyPositions = [(1, _pick(spec, RO_ACCESS, "index"))]
    store = 0
    i = 2
    while i < argc:
        arg = args[i].lower()
        if arg == b"store":
            if i + 1 < argc:
                store = i + 1  # the last STORE wins; its argument is not skipped (as in db.c)
        else:
            i += SORT_OPTION_ARGS.get(arg, 0)
        i += 1
    if store:
        keys.append((store, _pick(spec, OW_UPDATE, "unknown")))
    return keys


def _sort_ro_keys(spec: CommandSpec, args: Sequence[bytes]) -> KeyPositions:
    return [(1, _pick(spec, RO_ACCESS, "index"))] if len(args) > 1 else []


def _migrate_keys(spec: CommandSpec, args: Sequence[bytes]) -> KeyPositions:
    # MIGRATE host port key|"" db timeout [COPY] [REPLACE] [AUTH pw|AUTH2 user pw] [KEYS k ...]
    argc = len(args)
    if argc < 4:
        return []
    first, num = 3, 1
    i = 6
    while i < argc:
        arg = args[i].lower()
        if arg == b"keys":
            if args[3]:
                num = 0  # a key and KEYS: syntax error, Redis will say so
            else:
                first, num = i + 1, argc - i - 1
            break
        i += MIGRATE_OPTION_ARGS.get(arg, 0) + 1
    ks = _with_flags(_pick(spec, RW_ACCESS_DELETE, "keyword" if first > 3 else "index"), RW_ACCESS_DELETE)
    return [(j, ks) for j in range(first, first + num)]


def _set_keys(spec: CommandSpec, args: Sequence[bytes]) -> KeyPositions:
    if len(args) < 2:
        return []
    flags = OW_UPDATE
    for arg in args[3:]:
        if len(arg) == 3 and arg.lower() == b"get":
            flags = RW_ACCESS_UPDATE
            break
    return [(1, _with_flags(spec.key_specs[0], flags))]


def _bitfield_keys(spec: CommandSpec, args: Sequence[bytes]) -> KeyPositions:
    argc = len(args)
    if argc < 2:
        return []
    readonly = True
    i = 2
    while i < argc:
        rest = argc - i - 1
        arg = args[i].lower()
        if arg == b"get" and rest >= 2:
            i += 2
        elif arg in (b"set", b"incrby") and rest >= 3:
            readonly = False
            break
        elif arg == b"overflow" and rest >= 1:
            i += 1
        else:
            readonly = False  # syntax error: safer to assume a write
            break
        i += 1
    return [(1, _with_flags(spec.key_specs[0], RO_ACCESS if readonly else RW_ACCESS_UPDATE))]


GETKEYS_PROCS: dict[str, GetKeysProc] = {
    "sort": GetKeysProc(_sort_keys, complete=False, reads_from=2),
    "sort_ro": GetKeysProc(_sort_ro_keys, complete=False, reads_from=2),
    "migrate": GetKeysProc(_migrate_keys, complete=True, reads_from=1),
    "set": GetKeysProc(_set_keys, complete=True, reads_from=3),
    "bitfield": GetKeysProc(_bitfield_keys, complete=True, reads_from=2),
}

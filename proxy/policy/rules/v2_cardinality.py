"""V2: collections stay under a cap; a write that would take one over it writes nothing.

Theory of operation
-------------------
Only the server knows how many elements a collection has and which of the written fields or
members are new, and the check must be atomic with the write (20 clients adding to one set at
once must not all see "room for one more"). So V2 is a RewriteRule: a growing write is sent as
`EVAL SCRIPT` that counts, then either answers `-NOPERM ... rule V2 ...` (nothing written) or
runs the client's command with `redis.pcall` and returns its reply untouched. Redis's own
replies, errors included, pass through a script unchanged (`pcall` errors keep their text;
`redis.setresp(3)` for a RESP3 client keeps ZINCRBY's double a double and nil a RESP3 null), so
the client's bytes are the plain command's. The tests compare both on raw sockets.

The script costs one size read (HLEN/LLEN/SCARD/ZCARD/VCARD) per write; it counts new elements only
when the collection is close to its cap (size + most it could add > cap): HEXISTS per field
(HSET, HSETEX: none with FXX), SISMEMBER / ZSCORE / VISMEMBER per member (SADD; ZADD: XX adds
none, NX only new ones, INCR one; Redis 8's VADD: its element), every pushed item, LINSERT's one
item when the pivot is there, the one item a move brings to its destination (LMOVE/RPOPLPUSH
when the source is non-empty, SMOVE when the member is in the source and not in the destination).
A write that adds nothing new (HSET of existing fields) always passes, even on a collection
already over the cap.

A key of the key schema whose pattern sets `limits: {max_elements: N}` has that cap instead of
the rule's (`use_schema`).

`GROWING` is the one table of argument semantics (which arguments are fields or members); the
type family (and so the size command and the `per_type` cap) comes from the command's COMMAND
DOCS group. A stream grows by one entry per XADD (capped unless an exact `MAXLEN n` within the cap
trims it). Where the size written is the server's to know, V2 adds its caps to the server-side
check `_write_check` sends (with K6's and V1's parts): *STORE destinations (SUNIONSTORE ... SORT
... STORE, GEORADIUS ... STORE) are counted by the matching read first, COPY/RENAME/RENAMENX
carry a value measured first, RESTORE runs and is undone when over the cap. Blocking moves
(BLMOVE, BRPOPLPUSH) cannot run in a script (`noscript`): V2 refuses them, with LMOVE as the
capped alternative.

A command whose arguments do not have the command's shape (wrong count, NX with XX) is
forwarded unchanged: Redis refuses it and writes nothing, with its own error. A command of more
than `MAX_SCRIPT_ARGS` arguments cannot be passed to `redis.pcall` (Lua's unpack limit): it is
rejected, with advice to split it (`check`, and the script itself as a safety net).

`check` rejects what the arguments alone decide (a push of more items than the cap; too many
arguments), so those are findings in audit mode too. The size check itself is the script's:
in audit mode (no rewrite) collections are not capped, and a refusal by the script is not a
finding of the engine (no log line, no metric): the proxy only sees the reply.

Costs and requirements: the upstream user needs EVAL (@scripting); the script body is the same
for every call (one entry in Redis's script cache; EVALSHA with a NOSCRIPT fallback would save
sending it). Extra commands earlier rewrite rules added (T1's hidden EXPIRE) are kept after the
EVAL when the engine passes them (`Call.commands`).
"""

from __future__ import annotations

from ...errors import schema_limit, violation_text
from ..base import RewriteRule, current_commands, register, same_command
from ._fields import hsetex_fields, vadd_parts, xadd_options
from ._keyshape import text
from ._write_check import SCRIPT_COMMANDS, checked_write, with_check
from ._zadd import zadd_members

MAX_SCRIPT_ARGS = 7900  # Lua's unpack() stops near 8000 values

SCRIPT = b"""\
-- Redis Guard V2: a write to KEYS[1] that would take it over its cap writes nothing.
-- ARGV: protocol, cap, size command, how, error text, most new, n, n candidates, the command
local key, how = KEYS[1], ARGV[4]
if how == 'too_long' then return redis.error_reply(ARGV[5]) end
if ARGV[1] == '3' then redis.setresp(3) end
local cap, most, n = tonumber(ARGV[2]), tonumber(ARGV[6]), tonumber(ARGV[7])
local size = redis.pcall(ARGV[3], key)
if type(size) == 'number' and most > 0 and size + most > cap then
  local new = 0
  if how == 'push' or how == 'entry' then
    new = most
  elseif how == 'pushx' then
    if size > 0 then new = most end
  elseif how == 'insert' then
    if size > 0 and redis.call('LPOS', key, ARGV[8]) then new = 1 end
  elseif how == 'lmove' then
    local source = redis.pcall('LLEN', KEYS[2])
    if key ~= KEYS[2] and type(source) == 'number' and source > 0 then new = 1 end
  elseif how == 'smove' then
    local there = redis.pcall('SISMEMBER', KEYS[2], ARGV[8])
    if key ~= KEYS[2] and there == 1 and redis.call('SISMEMBER', key, ARGV[8]) == 0 then new = 1 end
  else
    local probe = ({fields = 'HEXISTS', members = 'SISMEMBER', zmembers = 'ZSCORE', vmembers = 'VISMEMBER'})[how]
    local seen = {}
    for i = 8, 7 + n do
      local element = ARGV[i]
      if not seen[element] then
        seen[element] = true
        local found = redis.call(probe, key, element)
        if found == 0 or not found then new = new + 1 end
      end
    end
  end
  if new > 0 and size + new > cap then
    return redis.error_reply(string.format('%s (it has %d, %s would add %d)',
      ARGV[5], size, string.upper(ARGV[8 + n]), new))
  end
end
local command = {}
for i = 8 + n, #ARGV do command[#command + 1] = ARGV[i] end
return redis.pcall(unpack(command))
"""

# COMMAND DOCS group -> the collection type, its size command, its plural for messages
FAMILIES = {
    "hash": ("hash", b"HLEN", "hashes"),
    "list": ("list", b"LLEN", "lists"),
    "set": ("set", b"SCARD", "sets"),
    "sorted-set": ("zset", b"ZCARD", "sorted sets"),
    "geo": ("zset", b"ZCARD", "sorted sets"),
    "stream": ("stream", b"XLEN", "streams"),
    "vectorset": ("vectorset", b"VCARD", "vector sets"),
}
TYPES = ("hash", "list", "set", "zset", "stream", "vectorset")
PLURALS = {kind: plural for kind, _, plural in FAMILIES.values()}
# Writes whose size only the server knows (`_write_check`), and blocking moves, which cannot be
# sent as a script: refused, LMOVE / RPOPLPUSH are capped instead.
SERVER_CHECKED = frozenset({"sunionstore", "sdiffstore", "sinterstore", "zunionstore", "zinterstore", "zdiffstore",
                            "zrangestore", "geosearchstore", "georadius", "georadiusbymember", "sort", "copy",
                            "rename", "renamenx", "restore", "restore-asking"})
BLOCKING_MOVES = {"blmove": "LMOVE", "brpoplpush": "RPOPLPUSH"}

SIDES = frozenset({b"left", b"right"})


def _pairs(args, first):  # HSET key f v [f v ...]: the fields
    if len(args) < first + 2 or (len(args) - first) % 2:
        return None
    return args[first::2]


def _one(position, count):  # exactly `count` arguments, the element at `position`
    return lambda args: [args[position]] if len(args) == count else None


def _tail(args):  # every argument from 2 on
    return args[2:] if len(args) > 2 else None


def _zadd(args):
    parsed = zadd_members(args)
    if parsed is None:
        return None
    flags, members = parsed
    return [] if b"xx" in flags else members


def _geoadd(args):
    parsed = zadd_members(args, geo=True)
    if parsed is None:
        return None
    flags, members = parsed
    return [] if b"xx" in flags else members


def _hsetex(args):  # HSETEX ... FIELDS n f v ...: the fields (none new with FXX)
    parsed = hsetex_fields(args)
    if parsed is None:
        return None
    flags, pairs = parsed
    return [] if b"fxx" in flags else pairs[0::2]


def _vadd(args):  # VADD ... element ...: the element
    parsed = vadd_parts(args)
    return None if parsed is None else [parsed[0]]


def _linsert(args):
    return [args[3]] if len(args) == 5 and args[2].lower() in (b"before", b"after") else None


def _lmove(args):
    return [] if len(args) == 5 and args[3].lower() in SIDES and args[4].lower() in SIDES else None


def _xadd(args):
    """XADD key [options] id field value ...: one entry (a stand-in candidate), or None when the
    arguments have not that shape. The options in any order (`_fields.xadd_options`)."""
    i = xadd_options(args)[2]
    rest = len(args) - i - 1  # after the id: field value pairs
    return [b"entry"] if rest >= 2 and rest % 2 == 0 else None


def xadd_trims_within(args, cap: int) -> bool:
    """An exact `MAXLEN [=] n` with n <= cap: the stream stays within the cap whatever it holds."""
    exact = xadd_options(args)[1]
    try:
        return exact is not None and 0 <= int(exact) <= cap
    except ValueError:
        return False


# command -> (how the script counts, the candidates: a function of the arguments returning
# the fields/members/items that may be new, or None when Redis will refuse the arguments,
# the argument index of the collection, of the source of a move)
GROWING = {
    "hset": ("fields", lambda a: _pairs(a, 2), 1, 0),
    "hmset": ("fields", lambda a: _pairs(a, 2), 1, 0),
    "hsetnx": ("fields", _one(2, 4), 1, 0),
    "hincrby": ("fields", _one(2, 4), 1, 0),
    "hincrbyfloat": ("fields", _one(2, 4), 1, 0),
    "hsetex": ("fields", _hsetex, 1, 0),
    "lpush": ("push", _tail, 1, 0),
    "rpush": ("push", _tail, 1, 0),
    "lpushx": ("pushx", _tail, 1, 0),
    "rpushx": ("pushx", _tail, 1, 0),
    "linsert": ("insert", _linsert, 1, 0),  # the candidate is the pivot
    "lmove": ("lmove", _lmove, 2, 1),
    "rpoplpush": ("lmove", lambda a: [] if len(a) == 3 else None, 2, 1),
    "sadd": ("members", _tail, 1, 0),
    "smove": ("smove", _one(3, 4), 2, 1),  # the candidate is the member moved
    "zadd": ("zmembers", _zadd, 1, 0),
    "zincrby": ("zmembers", _one(3, 4), 1, 0),
    "geoadd": ("zmembers", _geoadd, 1, 0),
    "xadd": ("entry", _xadd, 1, 0),
    "vadd": ("vmembers", _vadd, 1, 0),
}
ONE_NEW = frozenset({"insert", "lmove", "smove"})  # at most one new element, whatever the arguments


@register
class CollectionCap(RewriteRule):
    id = "V2"
    order = 402
    title = "collection size"
    checks_on_server = True  # its rewrite is a script that measures before it reads or writes
    server_commands = SCRIPT_COMMANDS | {"lpos", "sismember", "hexists", "zscore"}  # SCRIPT and _write_check's

    def __init__(self, settings):
        super().__init__(settings)
        self.max_elements = settings.get("max_elements", 5000, kind=int, minimum=1)
        per_type = settings.mapping("per_type", {"hash": 100}, schema={
            "propertyNames": {"enum": list(TYPES)}, "additionalProperties": {"type": "integer", "minimum": 1}})
        self.caps = {kind: self.max_elements for kind in TYPES}
        for kind, cap in per_type.items():
            if kind not in TYPES:
                raise settings.error("per_type", f"'per_type' names unknown type '{kind}' (known: {', '.join(TYPES)})")
            if isinstance(cap, bool) or not isinstance(cap, int) or cap < 1:
                raise settings.error("per_type", f"'per_type': {kind} must be a whole number of at least 1, "
                                                 f"got {cap!r}")
            self.caps[kind] = cap
        self.per_type = per_type
        self.schema = None
        self.pattern_caps: dict[str, int] = {}  # schema pattern -> max_elements

    def use_schema(self, schema) -> None:
        for pattern in schema or ():
            if pattern.max_elements is not None:
                self.schema = schema
                self.pattern_caps[pattern.pattern] = pattern.max_elements

    def applies_to(self, spec) -> bool:
        return ((spec.name in GROWING and spec.group in FAMILIES) or spec.name in SERVER_CHECKED
                or spec.name in BLOCKING_MOVES)

    def reads_from(self, spec) -> int | None:
        return None  # sent as a server-side script or refused: decided every time (the default)

    def _family(self, spec, key: bytes):
        """(cap, size command, plural, schema pattern or None) for this key: its schema
        pattern's cap, else its type's."""
        kind, size_command, plural = FAMILIES[spec.group]
        if self.pattern_caps:
            pattern = self.schema.match(key)
            if pattern is not None and pattern.pattern in self.pattern_caps:
                return self.pattern_caps[pattern.pattern], size_command, plural, pattern
        return self.caps[kind], size_command, plural, None

    def _text(self, key: bytes, advice: str) -> bytes:
        return violation_text(self.finding(f"key '{text(key)}'", advice)).encode("utf-8", "replace")

    @staticmethod
    def _cap_advice(cap: int, plural: str, pattern) -> str:
        advice = f"keep {plural} at most {cap} elements"
        return schema_limit(advice, pattern) if pattern is not None else advice

    def caps_for(self, key: bytes) -> dict:
        """type -> (cap, advice) for a key of any type: its schema pattern's cap, else per type."""
        if self.pattern_caps:
            pattern = self.schema.match(key)
            if pattern is not None and pattern.pattern in self.pattern_caps:
                cap = self.pattern_caps[pattern.pattern]
                return {kind: (cap, self._cap_advice(cap, PLURALS[kind], pattern)) for kind in TYPES}
        return {kind: (self.caps[kind], self._cap_advice(self.caps[kind], PLURALS[kind], None)) for kind in TYPES}

    def check(self, call):
        """What is known without the server: too long for a script; more items pushed than the cap."""
        args = call.args
        if call.name in BLOCKING_MOVES:
            key = args[2] if len(args) > 2 else b""
            return self.finding(f"key '{text(key)}'", f"a blocking move cannot be capped (it cannot run in a "
                                f"script): use {BLOCKING_MOVES[call.name]}, and wait in the application")
        if call.name in SERVER_CHECKED:
            return None  # rewrite() has the server count it
        how, _, at, _ = GROWING[call.name]
        if len(args) > MAX_SCRIPT_ARGS:
            return self.finding(f"key '{text(args[at])}'", self._too_long_advice())
        if how != "push" or len(args) <= at:
            return None
        cap, _, plural, pattern = self._family(call.spec, args[at])
        if len(args) - 2 > cap:
            return self.finding(f"key '{text(args[at])}'", f"{self._cap_advice(cap, plural, pattern)} "
                                                           f"({call.name.upper()} would add {len(args) - 2})")
        return None

    def _too_long_advice(self) -> str:
        return (f"split the write: at most {MAX_SCRIPT_ARGS - 10} arguments per command, so that the "
                "proxy can check the collection's size atomically")

    def rewrite(self, call):
        if call.name in SERVER_CHECKED:
            check = checked_write(call)
            if check is None:
                return None  # not a write (SORT without STORE), or Redis refuses the arguments
            key = check.target_key()
            for kind, (cap, advice) in self.caps_for(key).items():
                if kind in check.limits:  # (the check measures the types it knows: not vector sets)
                    check.limit(kind, cap, self.finding(f"key '{text(key)}'", advice))
            return with_check(call, check)
        commands = current_commands(call)
        args = commands[0]
        if not same_command(call, args) or call.name in BLOCKING_MOVES:
            return None
        how, candidates_of, at, source_at = GROWING[call.name]
        if len(args) > MAX_SCRIPT_ARGS:
            key = args[at] if len(args) > at else b""
            script = [b"EVAL", SCRIPT, b"1", key, b"2", b"0", FAMILIES[call.spec.group][1], b"too_long",
                      self._text(key, self._too_long_advice()), b"0", b"0"]
            return [script, *commands[1:]]
        candidates = candidates_of(args)
        if candidates is None:
            return None  # Redis refuses these arguments and writes nothing
        key = args[at]
        cap, size_command, plural, pattern = self._family(call.spec, key)
        if how == "entry" and xadd_trims_within(args, cap):
            return None
        keys = [key, args[source_at]] if source_at else [key]
        if how in ("push", "pushx", "entry"):
            most, candidates = len(candidates), []
        elif how in ONE_NEW:
            most = 1
        else:
            most = len(candidates)
        protocol = b"3" if call.state.protocol == 3 else b"2"
        script = [b"EVAL", SCRIPT, str(len(keys)).encode(), *keys,
                  protocol, str(cap).encode(), size_command, how.encode(),
                  self._text(key, self._cap_advice(cap, plural, pattern)),
                  str(most).encode(), str(len(candidates)).encode(), *candidates, *args]
        return [script, *commands[1:]]

    def describe(self) -> str:
        caps = ", ".join(f"{kind} {cap}" for kind, cap in sorted(self.per_type.items()))
        return f"collections and streams at most {self.max_elements} elements" + (f" ({caps})" if caps else "") + \
            ", checked atomically by a server-side script (*STORE, COPY/RENAME, RESTORE too); BLMOVE refused"

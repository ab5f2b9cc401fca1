"""C3: O(N) reads (HGETALL, LRANGE, SMEMBERS, ZRANGE, SORT...) only on small collections.

`commands: {NAME: {action: ..., max: N}}` (the mapping replaces the default one; `NAME: reject`
is short for `NAME: {action: reject}`, and `{max: N}` implies `action: limit`):

* `allow`: nothing to check (the command is compiled out);
* `warn`: forwarded, with an audit finding (logged and counted);
* `reject`: rejected, the reply names the incremental alternative (HSCAN, SSCAN, ZSCAN...);
* `limit`: rejected when the read returns more than `max` elements.

How `limit` measures a read
---------------------------
Where Redis's syntax bounds the reply, the bound is read from the arguments: `start stop` of an
index range, `LIMIT offset count`, `COUNT n`, a count argument. `RANGES` below is the one
hand-written table: for each such command, where those arguments are. A bound above `max` is
rejected by `check`; a bound within it passes.

Where the reply depends on the data (`LRANGE k 0 -1`, `ZRANGEBYSCORE` without `LIMIT`, `XRANGE`
without `COUNT`, and every command not in `RANGES`: HGETALL, HKEYS, HVALS, SMEMBERS, SINTER...),
`rewrite` sends the command inside a Lua script that measures the keys the command reads (the
keys whose key spec has Redis's `ACCESS` flag) and, in the same atomic step, either answers with
the policy's error or runs the command with `redis.pcall`, so Redis's own errors come back
unchanged. For an index window (`start stop` of mixed sign) the script computes the window's
length as Redis does; otherwise it compares each key's size (HLEN/SCARD/ZCARD/LLEN/XLEN by type)
with `max`. The script speaks the client's protocol (`redis.setresp(3)` for RESP3 clients, so
HGETALL is still a map): replies are the command's own, byte for byte, except that RESP3 maps and
sets come back in another order (Lua tables do not keep one).

Commands that cannot run inside a script (Redis flags them `blocking` or `noscript`) or whose
keys the key specs cannot all name (SORT's BY/GET patterns: `resolves_all_keys`) are rejected
when their reply is not bounded by their arguments: the advice says which bound to add.

Only an enforced C3 rewrites (the engine runs rewrite rules in enforce mode only): in audit mode
the reads whose size depends on the data are neither measured nor reported.
"""

from __future__ import annotations

import re

from ...commands.keyspecs import find_keys, resolves_all_keys
from ...errors import violation_text
from ...resp.exact import string2ll
from ..base import AUDIT, Finding, RewriteRule, register
from ..problems import unknown_command

ACTIONS = ("allow", "warn", "reject", "limit")
# `commands:` for the policy's JSON Schema: a command name -> an action, or {action: limit, max: N}
COMMANDS_SCHEMA = {
    "propertyNames": {"pattern": "^[A-Za-z][A-Za-z0-9_|-]*$"},
    "additionalProperties": {"anyOf": [
        {"enum": list(ACTIONS)},
        {"type": "object", "additionalProperties": False,
         "properties": {"action": {"enum": list(ACTIONS)}, "max": {"type": "integer", "minimum": 0}}},
    ]},
}
DEFAULT_COMMANDS = {
    "HGETALL": {"action": "limit", "max": 100},
    "LRANGE": {"action": "limit", "max": 100},
    "SORT": {"action": "reject"},
    "SMEMBERS": {"action": "warn"},
}

WHOLE = (0, -1)  # the reply depends on the data: every element of each key read
MAX_SCRIPT_ARGS = 7000  # Lua's unpack() stops at about 8000 values


# -- measuring a read from its arguments ----------------------------------------------------
# Each measure(args, keys) returns an int (the reply holds at most that many elements), a
# (start, stop) index window whose length depends on the data (WHOLE for "everything"), or None
# when the arguments are malformed: Redis will answer with its own error.

OPTION_ARGS = {b"limit": 2, b"by": 1, b"get": 1, b"store": 1, b"count": 1, b"block": 1}


def _options(args, start: int, until: bytes | None = None):
    """(index, lower-case word) of each option from args[start], stepping over option arguments."""
    i, argc = start, len(args)
    while i < argc:
        word = args[i].lower()
        if word == until:
            return
        yield i, word
        i += OPTION_ARGS.get(word, 0) + 1


def _window(start: int, stop: int):
    """The length of LRANGE/ZRANGE's `start stop`, or the window itself when it needs the size.
    With both ends of one sign the length is fixed; a negative start and a non-negative stop
    give at most min(-start, stop + 1) elements; only `start >= 0, stop < 0` needs the size."""
    if (start >= 0) == (stop >= 0):
        return max(0, stop - start + 1)
    if start < 0:
        return min(-start, stop + 1)
    return (start, stop)


def _limit_option(args, start: int):
    """`LIMIT offset count` among the options: count (negative: all), else everything."""
    for i, word in _options(args, start):
        if word == b"limit":
            if i + 2 >= len(args) or string2ll(args[i + 1]) is None:
                return None
            count = string2ll(args[i + 2])
            if count is None:
                return None
            return WHOLE if count < 0 else count
    return WHOLE


def index_range(pos: int, by_options: bool = False):
    """`start stop` at args[pos], args[pos + 1]; with `by_options` (ZRANGE, ZRANGESTORE), BYSCORE
    or BYLEX among the options make them scores and `LIMIT offset count` the bound."""

    def measure(args, keys):
        if len(args) < pos + 2:
            return None
        if by_options:
            for _, word in _options(args, pos + 2):
                if word in (b"byscore", b"bylex"):
                    return _limit_option(args, pos + 2)
        start, stop = string2ll(args[pos]), string2ll(args[pos + 1])
        if start is None or stop is None:
            return None
        return _window(start, stop)

    return measure


def limit_option(start: int):
    """`LIMIT offset count` among the options from args[start] (ZRANGEBYSCORE, SORT)."""
    return lambda args, keys: _limit_option(args, start)


def count_option(start: int, until: bytes | None = None, default=WHOLE):
    """`COUNT n` among the options from args[start] (up to the word `until`)."""

    def measure(args, keys):
        for i, word in _options(args, start, until):
            if word == b"count":
                count = string2ll(args[i + 1]) if i + 1 < len(args) else None
                return None if count is None else max(count, 0)
        return default

    return measure


def count_after_keys(args, keys):
    """`COUNT n` after the keys and the LEFT|RIGHT or MIN|MAX word (LMPOP, ZMPOP, BLMPOP, BZMPOP);
    one element without it."""
    if not keys:
        return None
    return count_option(keys[-1][0] + 2, default=1)(args, keys)


def count_argument(pos: int):
    """A count at args[pos] (SRANDMEMBER key -5 returns 5 elements); one element without it."""

    def measure(args, keys):
        if len(args) <= pos:
            return 1
        count = string2ll(args[pos])
        return None if count is None else abs(count)

    return measure


def whole(args, keys):
    return WHOLE


# Where the arguments bound a read's reply, and how to ask for a bounded one. Every command not
# named here (HGETALL, HKEYS, HVALS, SMEMBERS, SINTER, SUNION, SDIFF, ZUNION...) is measured by the
# size of the keys it reads, and the advice is its group's SCAN command.
PAGES = "read it in pages of at most {n} elements ({name} key 0 {last}, then {n} ..., or ZSCAN)"
LIMIT = "add LIMIT <offset> {n} and read page by page"
COUNT = "add COUNT {n} and read page by page"
FEWER = "ask for at most {n} elements at a time"
RANGES = {
    # command            how its reply is bounded                         how to bound it
    "lrange":           (index_range(2),                    "read it in pages of at most {n} elements "
                                                            "(LRANGE key 0 {last}, then {n} ...)"),
    "zrange":           (index_range(2, by_options=True),   PAGES),  # ZRANGE key start stop [BYSCORE|BYLEX] [LIMIT o c]
    "zrevrange":        (index_range(2),                    PAGES),  # ZREVRANGE key start stop
    "zrangestore":      (index_range(3, by_options=True),   PAGES),  # ZRANGESTORE dst src min max ...
    "zrangebyscore":    (limit_option(4),                   LIMIT),  # ZRANGEBYSCORE key min max [LIMIT o c]
    "zrevrangebyscore": (limit_option(4),                   LIMIT),
    "zrangebylex":      (limit_option(4),                   LIMIT),
    "zrevrangebylex":   (limit_option(4),                   LIMIT),
    "sort":             (limit_option(2),                   LIMIT),  # SORT key [BY p] [LIMIT o c] [GET p]...
    "sort_ro":          (limit_option(2),                   LIMIT),
    "xrange":           (count_option(4),                   COUNT),  # XRANGE key start end [COUNT n]
    "xrevrange":        (count_option(4),                   COUNT),
    "xread":            (count_option(1, b"streams"),       COUNT),  # XREAD [COUNT n] [BLOCK ms] STREAMS ...
    "xreadgroup":       (count_option(4, b"streams"),       COUNT),  # XREADGROUP GROUP g c [COUNT n] ...
    "lmpop":            (count_after_keys,                  FEWER),  # LMPOP numkeys key... LEFT|RIGHT [COUNT n]
    "blmpop":           (count_after_keys,                  FEWER),
    "zmpop":            (count_after_keys,                  FEWER),
    "bzmpop":           (count_after_keys,                  FEWER),
    "srandmember":      (count_argument(2),                 FEWER),  # SRANDMEMBER key [count]
    "hrandfield":       (count_argument(2),                 FEWER),
    "zrandmember":      (count_argument(2),                 FEWER),
    "spop":             (count_argument(2),                 FEWER),
    "lpop":             (count_argument(2),                 FEWER),
    "rpop":             (count_argument(2),                 FEWER),
    "zpopmin":          (count_argument(2),                 FEWER),
    "zpopmax":          (count_argument(2),                 FEWER),
}

# How to read a whole collection a little at a time, by COMMAND DOCS group.
WHOLE_ADVICE = {
    "hash": "read it incrementally with HSCAN key <cursor> COUNT {n}",
    "set": "read it incrementally with SSCAN key <cursor> COUNT {n}",
    "sorted-set": "read it incrementally with ZSCAN key <cursor> COUNT {n}",
    "list": "read it in pages of at most {n} elements with LRANGE",
    "stream": "read it in pages with XRANGE ... COUNT {n}",
}
SORT_ADVICE = "keep the data sorted in a sorted set and read it in pages with ZRANGE ... LIMIT"


# -- the server-side size check ---------------------------------------------------------------
# KEYS: the keys to measure, then the command's other keys. ARGV: max, the error text, start,
# stop, how many KEYS to measure, then the command itself.
_SCRIPT = """\
local max, first, last = tonumber(ARGV[1]), tonumber(ARGV[3]), tonumber(ARGV[4])
for i = 1, tonumber(ARGV[5]) do
  local t = redis.call('TYPE', KEYS[i])['ok']
  local n = 0
  if t == 'hash' then n = redis.call('HLEN', KEYS[i])
  elseif t == 'set' then n = redis.call('SCARD', KEYS[i])
  elseif t == 'zset' then n = redis.call('ZCARD', KEYS[i])
  elseif t == 'list' then n = redis.call('LLEN', KEYS[i])
  elseif t == 'stream' then n = redis.call('XLEN', KEYS[i]) end
  local s, e = first, last
  if s < 0 then s = n + s end
  if e < 0 then e = n + e end
  if s < 0 then s = 0 end
  if e >= n then e = n - 1 end
  if e - s + 1 > max then return redis.error_reply(ARGV[2]) end
end
return redis.pcall(unpack(ARGV, 6))
"""
SCRIPTS = {2: _SCRIPT.encode(), 3: b"redis.setresp(3)\n" + _SCRIPT.encode()}


def script_error(finding: Finding) -> bytes:
    """The error text the script answers with: the engine's rejection text (no CR/LF, which
    would end the reply line)."""
    return violation_text(finding).replace("\r", " ").replace("\n", " ").encode("utf-8", "replace")


class _Compiled:
    """What C3 does with one command, settled when the engine compiles it."""

    __slots__ = ("action", "max", "measure", "advice", "unscriptable", "arity")

    def __init__(self, action, maximum, spec):
        self.action = action
        self.max = maximum
        self.arity = spec.arity
        self.measure, hint = RANGES.get(spec.name, (whole, None))
        n = max(maximum, 1) if maximum is not None else 100
        if spec.name in ("sort", "sort_ro") and action != "limit":
            hint = SORT_ADVICE
        elif hint is None or action != "limit":
            hint = WHOLE_ADVICE.get(spec.group, FEWER)
        self.advice = hint.format(n=n, last=n - 1, name=spec.name.upper())
        # Why the server cannot measure it, if it cannot (None: it can).
        if "blocking" in spec.flags:
            self.unscriptable = "a blocking command cannot be measured on the server"
        elif "noscript" in spec.flags:
            self.unscriptable = "it cannot run inside a script, where the proxy would measure it"
        elif not resolves_all_keys(spec):
            self.unscriptable = "it may read keys its arguments do not name"
        else:
            self.unscriptable = None


@register
class SmallReads(RewriteRule):
    id = "C3"
    order = 105
    title = "O(N) reads on small collections only"
    checks_on_server = True  # its rewrite is a script that measures before it reads or writes

    def __init__(self, settings):
        super().__init__(settings)
        self.entries: dict[str, tuple[str, int | None]] = {}
        for name, value in settings.mapping("commands", DEFAULT_COMMANDS, schema=COMMANDS_SCHEMA).items():
            lower = self._name(settings, name)
            if lower in self.entries:
                raise settings.error("commands", f"'commands': {name} appears twice")
            self.entries[lower] = self._entry(settings, name, value)
        self.compiled: dict[str, _Compiled] = {}

    @staticmethod
    def _name(settings, name) -> str:
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z][\w|-]*", name):
            raise settings.error("commands", f"'commands': {name!r} is not a command name")
        wrong = unknown_command(name, settings.table)
        if wrong:
            settings.problem("commands", f"'commands': {wrong}")
        return name.lower()

    @staticmethod
    def _entry(settings, name, value) -> tuple[str, int | None]:
        usage = f"'commands': {name} must be one of {', '.join(ACTIONS)}, or {{action: limit, max: N}}"
        if isinstance(value, str):
            value = {"action": value}
        if not isinstance(value, dict):
            raise settings.error("commands", f"{usage}, got {value!r}")
        unknown = sorted(map(str, set(value) - {"action", "max"}))
        if unknown:
            raise settings.error("commands", f"'commands': {name}: unknown setting(s): {', '.join(unknown)}")
        action = value.get("action", "limit" if "max" in value else None)
        if action not in ACTIONS:
            raise settings.error("commands", f"{usage}, got action {action!r}")
        maximum = value.get("max")
        if action == "limit":
            if isinstance(maximum, float) and maximum.is_integer():
                maximum = int(maximum)
            if not isinstance(maximum, int) or isinstance(maximum, bool) or maximum < 0:
                raise settings.error("commands", f"'commands': {name}: 'limit' needs 'max', a whole "
                                                 f"number of elements >= 0, got {maximum!r}")
        elif maximum is not None:
            raise settings.error("commands", f"'commands': {name}: 'max' goes with action 'limit', not '{action}'")
        return action, maximum

    # -- compiled per command --------------------------------------------------------------

    server_commands = frozenset({"eval", "eval_ro", "type", "hlen", "scard", "zcard", "llen", "xlen"})  # the script

    def denies(self, spec) -> bool:
        entry = self.entries.get(spec.name)
        return entry is not None and entry[0] == "reject"

    def applies_to(self, spec) -> bool:
        entry = self.entries.get(spec.name)
        if entry is None or entry[0] == "allow":
            return False
        if spec.name not in self.compiled:
            self.compiled[spec.name] = _Compiled(entry[0], entry[1], spec)
        return True

    def _get(self, call) -> _Compiled:
        compiled = self.compiled.get(call.name)
        if compiled is None:
            self.applies_to(call.spec)
            compiled = self.compiled[call.name]
        return compiled

    # -- per call --------------------------------------------------------------------------

    def check(self, call):
        c = self._get(call)
        subject = f"command {call.name.upper()}"
        if c.action == "limit":
            return self._check_limit(call, c, subject)
        advice = f"{call.name.upper()} reads every element (O(N)); {c.advice}"
        if c.action == "warn":
            return Finding(self.id, self.title, subject, advice, AUDIT)
        return self.finding(subject, advice)

    def _check_limit(self, call, c: _Compiled, subject: str):
        keys = call.keys if call.keys is not None else find_keys(call.spec, call.args)
        size = c.measure(call.args, keys)
        if size is None:
            return None
        if isinstance(size, int):
            if size <= c.max:
                return None
            return self.finding(subject, f"it asks for {size} elements, more than {c.max}; {c.advice}")
        if not any("ACCESS" in ks.flags for _, ks in keys):
            return None  # it reads no key: nothing to measure
        why = c.unscriptable
        if why is None and len(call.args) > MAX_SCRIPT_ARGS:
            why = "it has too many arguments to be measured on the server"
        if why is None:
            return None  # rewrite() has the server measure it
        return self.finding(subject, f"without a bound it may return more than {c.max} elements, "
                                     f"and {why}; {c.advice}")

    def rewrite(self, call):
        c = self._get(call)
        args = call.args
        if c.action != "limit" or c.unscriptable or len(args) > MAX_SCRIPT_ARGS:
            return None
        arity = c.arity
        if (len(args) != arity) if arity > 0 else (len(args) < -arity):
            return None  # Redis's own "wrong number of arguments" (a script would word it differently)
        keys = call.keys if call.keys is not None else find_keys(call.spec, call.args)
        size = c.measure(call.args, keys)
        if size is None or isinstance(size, int):
            return None
        measured = [args[i] for i, ks in keys if "ACCESS" in ks.flags]
        if not measured:
            return None
        others = [args[i] for i, ks in keys if "ACCESS" not in ks.flags]
        if len(measured) == 1:
            key = measured[0].decode("utf-8", "backslashreplace")
            what = (f"key '{key}' holds more than {c.max} elements" if size == WHOLE
                    else f"the range would return more than {c.max} elements of key '{key}'")
        else:
            what = f"a key it reads holds more than {c.max} elements"
        error = script_error(self.finding(f"command {call.name.upper()}", f"{what}; {c.advice}"))
        script = SCRIPTS[3] if getattr(call.state, "protocol", 2) == 3 else SCRIPTS[2]
        start, stop = size
        # EVAL_RO for a read: a read-only application's ACL user (`%R~`) may run it, and so may a replica
        evaluate = b"EVAL" if "write" in call.spec.flags else b"EVAL_RO"
        return [[evaluate, script, str(len(measured) + len(others)).encode(), *measured, *others,
                 str(c.max).encode(), error, str(start).encode(), str(stop).encode(),
                 str(len(measured)).encode(), *args]]

    def describe(self) -> str:
        parts = []
        for name, (action, maximum) in sorted(self.entries.items()):
            parts.append(f"{name.upper()} {action}" + (f" {maximum}" if action == "limit" else ""))
        return "O(N) reads: " + ", ".join(parts)

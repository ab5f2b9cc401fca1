"""V1: string values at most `max_bytes`, counting the resulting size where a command grows one.

`check` judges what the arguments alone decide (`VALUES`, the one table of which argument is a
value): the value of SET, SETNX, GETSET, SETEX, PSETEX, MSET/MSETNX (each one); SETRANGE's and
SETBIT's resulting size is known too, since they grow a string exactly to `offset + length`
(`offset / 8 + 1` bytes for a bit) when they grow it at all; and an APPEND whose appended part
alone is over the limit. The size after APPEND needs the current length, atomically with the
write: V1 is also a RewriteRule that sends APPEND as an `EVAL` whose script compares `STRLEN` +
the appended length with the limit and answers `-NOPERM ... rule V1 ...` (nothing written) or
runs APPEND and returns its reply (an integer: the same bytes in RESP2 and RESP3; errors pass
through `redis.pcall` unchanged).

BITFIELD's SET and INCRBY grow the string to their furthest bit (`#n` offsets count in units of
the type's width): known from the arguments too. Where only the server knows the string written,
V1 adds its limit to the server-side check `_write_check` sends (with K6's and V2's parts): the
value a COPY/RENAME/RENAMENX carries and the longest source of a BITOP are measured first;
RESTORE, PFADD and PFMERGE (a HyperLogLog turns dense at 12 KB) run, and are undone when the
string they leave is over the limit.

A key of the key schema whose pattern sets `limits: {max_bytes: N}` has that limit instead of
the rule's (`use_schema`). In audit mode only `check` runs: APPEND's resulting size and the
server-side checks are then not made; a refusal by a script is not a finding of the engine (no
log line, no metric). Not checked, by nature small: INCR/INCRBYFLOAT results, SETNX's and
GETSET's are values like SET's (checked).
"""

from __future__ import annotations

from ...errors import schema_limit, violation_text
from ..base import NO_ARGUMENTS, RewriteRule, current_commands, register, same_command
from ._keyshape import text
from ._write_check import SCRIPT_COMMANDS, checked_write, with_check

APPEND_SCRIPT = b"""\
-- Redis Guard V1: APPEND refused when the string would grow over the limit.
-- KEYS[1]: the string; ARGV: limit, error text, the appended value
local size = redis.pcall('STRLEN', KEYS[1])
if type(size) == 'number' and size + #ARGV[3] > tonumber(ARGV[1]) then
  return redis.error_reply(string.format('%s (APPEND would make it %d bytes)', ARGV[2], size + #ARGV[3]))
end
return redis.pcall('APPEND', KEYS[1], ARGV[3])
"""

# command -> where its value is:
#   ("at", i)        the value is argument i
#   ("pairs", i)     key value pairs from argument i - 1 on: every second argument from i
#   ("range", o, v)  SETRANGE: the string grows to offset (argument o) + length of argument v
#   ("bit", o)       SETBIT: the string grows to offset (argument o, in bits) / 8 + 1 bytes
#   ("append", i)    APPEND: at least argument i; the server counts the rest
VALUES = {
    "set": ("at", 2),
    "setnx": ("at", 2),
    "getset": ("at", 2),
    "setex": ("at", 3),
    "psetex": ("at", 3),
    "mset": ("pairs", 2),
    "msetnx": ("pairs", 2),
    "setrange": ("range", 2, 3),
    "setbit": ("bit", 2),
    "append": ("append", 2),
    "bitfield": ("bitfield", 2),
}
# Strings only the server knows (`_write_check`): carried, combined, restored, HyperLogLogs.
SERVER_CHECKED = frozenset({"copy", "rename", "renamenx", "bitop", "restore", "restore-asking", "pfadd", "pfmerge"})
BITFIELD_WRITES = frozenset({b"set", b"incrby"})


@register
class StringSize(RewriteRule):
    id = "V1"
    order = 401
    title = "string size"
    checks_on_server = True  # its rewrite is a script that measures before it reads or writes
    server_commands = SCRIPT_COMMANDS  # APPEND_SCRIPT, _write_check.SCRIPT

    def __init__(self, settings):
        super().__init__(settings)
        self.max_bytes = settings.get("max_bytes", 10240, kind=int, minimum=1)
        self.advice = _advice(self.max_bytes)
        self.schema = None
        self.pattern_limits: dict[str, tuple[int, str]] = {}  # schema pattern -> (max_bytes, advice)

    def use_schema(self, schema) -> None:
        for pattern in schema or ():
            if pattern.max_bytes is not None:
                self.schema = schema
                self.pattern_limits[pattern.pattern] = (pattern.max_bytes,
                                                        schema_limit(_advice(pattern.max_bytes), pattern))

    def limit(self, key: bytes) -> tuple[int, str]:
        """(max bytes, advice) for this key: its schema pattern's, else the rule's."""
        if self.pattern_limits:
            pattern = self.schema.match(key)
            if pattern is not None and pattern.pattern in self.pattern_limits:
                return self.pattern_limits[pattern.pattern]
        return self.max_bytes, self.advice

    def applies_to(self, spec) -> bool:
        return spec.name in VALUES or spec.name in SERVER_CHECKED

    def reads_from(self, spec) -> int | None:
        if spec.name in SERVER_CHECKED:
            return None  # sent as a server-side check: always decided
        # The values' lengths decide, and SETRANGE's, SETBIT's and BITFIELD's offsets (argument 2).
        return 2 if VALUES[spec.name][0] in ("range", "bit", "pairs", "bitfield") else NO_ARGUMENTS

    def key_patterns(self, spec):
        return None if self.pattern_limits else ()  # a schema pattern may set the limit

    def check(self, call):
        args = call.args
        entry = VALUES.get(call.name)
        if entry is None:
            return None  # the server checks it (rewrite)
        kind = entry[0]
        count = len(args)
        if kind == "pairs":
            for at in range(entry[1], count, 2):
                limit = self.limit(args[at - 1])[0] if self.pattern_limits else self.max_bytes
                if len(args[at]) > limit:
                    return self._too_big(args[at - 1], f"got {len(args[at])} bytes")
            return None
        if count < 2:
            return None
        max_bytes = self.limit(args[1])[0] if self.pattern_limits else self.max_bytes
        if kind == "at" or kind == "append":
            at = entry[1]
            if at < count and len(args[at]) > max_bytes:
                return self._too_big(args[1], f"got {len(args[at])} bytes")
        elif count == 4 and kind == "range":
            offset = _integer(args[entry[1]])
            size = len(args[entry[2]])
            if offset is not None and size and offset + size > max_bytes:
                return self._too_big(args[1], f"SETRANGE would make it {offset + size} bytes")
        elif count == 4 and kind == "bit":
            offset = _integer(args[entry[1]])
            if offset is not None and offset // 8 + 1 > max_bytes:
                return self._too_big(args[1], f"SETBIT would make it {offset // 8 + 1} bytes")
        elif kind == "bitfield":
            size = bitfield_bytes(args)
            if size is not None and size > max_bytes:
                return self._too_big(args[1], f"BITFIELD would make it {size} bytes")
        return None

    def _too_big(self, key: bytes, got: str):
        return self.finding(f"key '{text(key)}'", f"{self.limit(key)[1]} ({got})")

    def rewrite(self, call):
        if call.name in SERVER_CHECKED:
            check = checked_write(call)
            if check is None:
                return None  # Redis refuses the arguments
            key = check.target_key()
            max_bytes, advice = self.limit(key)
            check.limit("string", max_bytes, self.finding(f"key '{text(key)}'", advice))
            return with_check(call, check)
        if call.name != "append":
            return None
        commands = current_commands(call)
        args = commands[0]
        if not same_command(call, args) or len(args) != 3 or not args[2]:
            return None  # Redis refuses the arguments, or nothing grows
        max_bytes, advice = self.limit(args[1])
        finding = self.finding(f"key '{text(args[1])}'", advice)
        script = [b"EVAL", APPEND_SCRIPT, b"1", args[1], str(max_bytes).encode(),
                  violation_text(finding).encode("utf-8", "replace"), args[2]]
        return [script, *commands[1:]]

    def describe(self) -> str:
        return (f"string values at most {self.max_bytes} bytes (APPEND, COPY/RENAME, BITOP, RESTORE, PFADD/PFMERGE "
                "checked atomically by a server-side script)")


def _advice(max_bytes: int) -> str:
    return f"keep string values at most {max_bytes} bytes"


def _integer(arg: bytes) -> int | None:
    try:
        value = int(arg)
    except ValueError:
        return None
    return value if value >= 0 else None


def bitfield_bytes(args) -> int | None:
    """How long BITFIELD's SET and INCRBY make the string at least (bytes), or None when Redis
    will refuse the arguments (or nothing grows). `#n` offsets count in units of the width."""
    furthest = 0
    i = 2
    count = len(args)
    while i < count:
        word = args[i].lower()
        if word == b"overflow":
            i += 2
            continue
        width = 3 if word == b"get" else 4 if word in BITFIELD_WRITES else 0
        if not width or i + width > count:
            return None
        kind, offset = args[i + 1].lower(), args[i + 2]
        bits = _integer(kind[1:]) if kind[:1] in (b"i", b"u") else None
        if bits is None or not 1 <= bits <= (64 if kind[:1] == b"i" else 63):
            return None
        if offset[:1] == b"#":
            index = _integer(offset[1:])
            at = index * bits if index is not None else None
        else:
            at = _integer(offset)
        if at is None:
            return None
        if word in BITFIELD_WRITES:
            furthest = max(furthest, (at + bits + 7) // 8)
        i += width
    return furthest or None


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

A key of the key schema whose pattern sets `limits: {max_bytes: N}` has that limit instead of
the rule's (`use_schema`). In audit mode only `check` runs: APPEND's resulting size is then not checked; a refusal by the
script is not a finding of the engine (no log line, no metric). Not checked at all: BITFIELD's
writes, RESTORE's payload, INCRBYFLOAT results (small by nature).
"""

from __future__ import annotations

from ...errors import schema_limit, violation_text
from ..base import NO_ARGUMENTS, RewriteRule, register
from .t1_ttl import current_commands, same_command, text

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
}


@register
class StringSize(RewriteRule):
    id = "V1"
    title = "string size"
    server_commands = frozenset({"eval", "strlen"})  # APPEND_SCRIPT

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
        return spec.name in VALUES

    def reads_from(self, spec) -> int:
        # The values' lengths decide, and SETRANGE's and SETBIT's offsets (argument 2).
        return 2 if VALUES[spec.name][0] in ("range", "bit", "pairs") else NO_ARGUMENTS

    def key_patterns(self, spec):
        return None if self.pattern_limits else ()  # a schema pattern may set the limit

    def check(self, call):
        args = call.args
        entry = VALUES[call.name]
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
        return None

    def _too_big(self, key: bytes, got: str):
        return self.finding(f"key '{text(key)}'", f"{self.limit(key)[1]} ({got})")

    def rewrite(self, call):
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
        return f"string values at most {self.max_bytes} bytes (APPEND checked atomically by a script)"


def _advice(max_bytes: int) -> str:
    return f"keep string values at most {max_bytes} bytes"


def _integer(arg: bytes) -> int | None:
    try:
        value = int(arg)
    except ValueError:
        return None
    return value if value >= 0 else None

"""Redis 7.0's own request parser, reproduced byte for byte, with no I/O.

This module owns the question "what would redis-server do with these bytes?".
The hot path parses requests with hiredis; this is the exact fallback for
inline requests, for malformed input and for checking a partial tail.  It
mirrors ``processInputBuffer`` / ``processMultibulkBuffer`` /
``processInlineBuffer`` (networking.c), ``string2ll`` (util.c) and
``sdssplitargs`` (sds.c), quirks included: header lines are found with
``strchr`` (so a NUL byte hides everything after it), the byte after a
header's ``\\r`` is skipped without being checked, a bulk's two trailing bytes
are skipped without being checked, and an error is raised as soon as the
offending header line is complete, before the rest of the request arrives.
``parse_request`` is stateless: it re-reads from ``pos`` each call, and every
answer is a pure function of the bytes.  A multibulk request that arrives in
many reads is read by ``parse_more`` instead, which keeps its progress in an
``Unfinished`` (the count, the arguments read, where the next header starts)
and resumes there: reading a request is linear in its bytes however it is cut
(``_parse_multibulk`` is ``parse_more`` on a fresh ``Unfinished``, so both
answer alike).  The proxy adds two limits of its own (argument count, total declared
size) that Redis does not have; they are checked right after Redis's checks
on the same header, so nothing a client merely claims is waited for.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "PROTO_INLINE_MAX_SIZE",
    "INT_MAX",
    "ParseLimits",
    "ProtocolError",
    "Unfinished",
    "parse_more",
    "parse_request",
    "string2ll",
    "sdssplitargs",
]

PROTO_INLINE_MAX_SIZE = 64 * 1024
INT_MAX = 2**31 - 1
_LLONG_MIN = -(2**63)
_LLONG_MAX = 2**63 - 1

# Error texts, exactly as networking.c spells them (our own two last).
ERR_TOO_BIG_MBULK = "Protocol error: too big mbulk count string"
ERR_INVALID_MBULK = "Protocol error: invalid multibulk length"
ERR_TOO_BIG_BULK = "Protocol error: too big bulk count string"
ERR_EXPECTED_DOLLAR = "Protocol error: expected '$', got '{}'"
ERR_INVALID_BULK = "Protocol error: invalid bulk length"
ERR_TOO_BIG_INLINE = "Protocol error: too big inline request"
ERR_UNBALANCED = "Protocol error: unbalanced quotes in request"
ERR_TOO_MANY_ARGS = "Protocol error: too many arguments in request (limit {})"
ERR_TOO_LARGE = "Protocol error: request too large (limit {} bytes)"


class ProtocolError(Exception):
    """A request Redis would answer with ``-ERR Protocol error: ...`` and then close.

    ``.message`` is Redis's text; ``.reply`` the RESP bytes Redis sends.
    """

    __slots__ = ("message", "reply")

    def __init__(self, message: str) -> None:
        # addReplyErrorFormat trims CR/LF at the ends and maps the rest to
        # spaces, so "expected '$', got '\r'" goes out as "got ' '".
        message = message.strip("\r\n").replace("\r", " ").replace("\n", " ")
        super().__init__(message)
        self.message = message
        self.reply = b"-ERR " + message.encode("latin-1") + b"\r\n"


@dataclass(frozen=True, slots=True)
class ParseLimits:
    max_bulk_len: int = 512 * 1024 * 1024  # Redis proto-max-bulk-len
    max_args: int = 1024 * 1024  # proxy's own limit on arguments per request
    max_request_bytes: int = 512 * 1024 * 1024  # proxy's own limit on declared size


DEFAULT_LIMITS = ParseLimits()

# string2ll accepts "0", or an optional '-' then a digit 1-9 then digits, and
# the value must fit a long long.  No '+', no spaces, no leading zeros, no "-0".
_LL_RE = re.compile(rb"(?:0|-?[1-9][0-9]*)\Z")


def string2ll(s: bytes) -> int | None:
    """util.c string2ll: the integer, or None where Redis's returns 0."""
    if len(s) >= 21 or _LL_RE.match(s) is None:  # 21 == LONG_STR_SIZE
        return None
    v = int(s)
    if v < _LLONG_MIN or v > _LLONG_MAX:
        return None
    return v


def _strchr(buf: bytes | bytearray, start: int, sep: bytes) -> int:
    """Index of ``sep`` at or after ``start`` as C strchr sees it, else -1.

    The query buffer is a NUL-terminated sds, so strchr gives up at the
    first NUL: a separator after a NUL is invisible to Redis.
    """
    i = buf.find(sep, start)
    if i > start and buf.find(b"\x00", start, i) >= 0:
        return -1
    return i


def parse_request(
    buf: bytes | bytearray, pos: int, limits: ParseLimits = DEFAULT_LIMITS
) -> tuple[list[bytes], int, bool] | None:
    """Parse one request starting at buf[pos].

    Returns ``(args, end, inline)`` when complete; ``args == []`` for what
    Redis silently skips (``*0\\r\\n``, ``*-3\\r\\n``, a blank inline line);
    None when more bytes are needed and nothing malformed was seen so far;
    raises ProtocolError when Redis would reply with a protocol error.
    """
    if pos >= len(buf):
        return None
    if buf[pos] == 0x2A:  # '*'
        return _parse_multibulk(buf, pos, limits)
    return _parse_inline(buf, pos)


def _parse_multibulk(
    buf: bytes | bytearray, pos: int, limits: ParseLimits
) -> tuple[list[bytes], int, bool] | None:
    state = Unfinished(pos)
    end = parse_more(buf, 0, state, limits)
    if end is None:
        return None
    return state.args, end, False


class Unfinished:
    """How far ``parse_more`` read a multibulk request, offsets in the caller's buffer: ``count``
    (-1 before its header line), ``index`` arguments whose headers were read, ``at`` where the
    next header starts, or the body of the last one when ``body`` (its length) is not -1,
    ``budget`` what is left of ``max_request_bytes``. ``args`` are the arguments read, or None
    when only the check is wanted (the reader's fast path: hiredis makes the arguments)."""

    __slots__ = ("count", "index", "at", "body", "budget", "args")

    def __init__(self, start: int = 0, keep_args: bool = True):
        self.count = -1
        self.index = 0
        self.at = start
        self.body = -1
        self.budget = 0
        self.args: list[bytes] | None = [] if keep_args else None

    def resume_at(self) -> int:
        """The first offset `parse_more` reads next (past a body it need not copy)."""
        if self.body >= 0 and self.args is None:
            return self.at + self.body + 2
        return self.at

    def needed(self, size: int) -> int:
        """The buffered size at which `parse_more` can make progress: the end of the body it
        waits for, else one more byte."""
        if self.body >= 0:
            return self.at + self.body + 2
        return size + 1

    def moved(self, offset: int) -> None:
        """The caller's buffer now starts `offset` bytes later."""
        self.at -= offset


def parse_more(
    buf: bytes | bytearray, base: int, state: Unfinished, limits: ParseLimits = DEFAULT_LIMITS
) -> int | None:
    """Resume the multibulk request of `state` in `buf`, which holds the caller's bytes from
    offset `base` on (at most ``state.resume_at()``). The end of the request when it is complete
    (its arguments in ``state.args``), None when more bytes are needed; ProtocolError as
    ``parse_request``."""
    n = base + len(buf)
    p = state.at
    count = state.count
    if count < 0:
        cr = _strchr(buf, p - base, b"\r")
        if cr < 0:
            if n - p > PROTO_INLINE_MAX_SIZE:
                raise ProtocolError(ERR_TOO_BIG_MBULK)
            return None
        cr += base
        # Redis only asks that *some* byte follow the '\r'; it never looks at it.
        if cr > n - 2:
            return None
        count = string2ll(bytes(buf[p + 1 - base : cr - base]))
        if count is None or count > INT_MAX:
            raise ProtocolError(ERR_INVALID_MBULK)
        p = state.at = cr + 2
        if count <= 0:
            state.count = 0
            return p
        state.count = count
        state.budget = limits.max_request_bytes
    args = state.args
    ll = state.body
    if ll >= 0:  # the header of argument `index` was read: its body
        if n - p < ll + 2:
            return None
        if args is not None:
            args.append(bytes(buf[p - base : p - base + ll]))
        p += ll + 2
        state.index += 1
        state.body = -1
    max_bulk = limits.max_bulk_len
    max_args = limits.max_args
    budget = state.budget
    for index in range(state.index, count):
        cr = _strchr(buf, p - base, b"\r")
        if cr < 0:
            # Measured from this header, as qb_pos has moved past earlier args.
            if n - p > PROTO_INLINE_MAX_SIZE:
                raise ProtocolError(ERR_TOO_BIG_BULK)
            state.at, state.index, state.budget = p, index, budget
            return None
        cr += base
        if cr > n - 2:
            state.at, state.index, state.budget = p, index, budget
            return None
        if index == max_args:
            # The proxy's own limit, at the line of the argument past it: until then the request
            # fails only where Redis's would (a count of millions, then something not an argument).
            raise ProtocolError(ERR_TOO_MANY_ARGS.format(max_args))
        if buf[p - base] != 0x24:  # '$'
            raise ProtocolError(ERR_EXPECTED_DOLLAR.format(chr(buf[p - base])))
        ll = string2ll(bytes(buf[p + 1 - base : cr - base]))
        if ll is None or ll < 0 or ll > max_bulk:
            raise ProtocolError(ERR_INVALID_BULK)
        budget -= ll
        if budget < 0:
            raise ProtocolError(ERR_TOO_LARGE.format(limits.max_request_bytes))
        p = cr + 2
        # The two bytes after the body are skipped unchecked, as Redis does.
        if n - p < ll + 2:
            state.at, state.index, state.budget, state.body = p, index, budget, ll
            return None
        if args is not None:
            args.append(bytes(buf[p - base : p - base + ll]))
        p += ll + 2
    state.at, state.index, state.budget = p, count, budget
    return p


def _parse_inline(buf: bytes | bytearray, pos: int) -> tuple[list[bytes], int, bool] | None:
    nl = _strchr(buf, pos, b"\n")
    if nl < 0:
        if len(buf) - pos > PROTO_INLINE_MAX_SIZE:
            raise ProtocolError(ERR_TOO_BIG_INLINE)
        return None
    end = nl - 1 if nl > pos and buf[nl - 1] == 0x0D else nl
    args = sdssplitargs(bytes(buf[pos:end]))
    if args is None:
        raise ProtocolError(ERR_UNBALANCED)
    return args, nl + 1, True


# C isspace() in the "C" locale, which is what Redis runs under for LC_CTYPE.
_ISSPACE = frozenset(b" \t\n\v\f\r")
# An unquoted token ends only at these: \v and \f are *not* among them, so
# "a\vb" is one token even though a leading \v is skipped as a blank.
_TOKEN_END = frozenset(b" \n\r\t")
_HEX = frozenset(b"0123456789abcdefABCDEF")
_ESCAPES = {ord("n"): 0x0A, ord("r"): 0x0D, ord("t"): 0x09, ord("b"): 0x08, ord("a"): 0x07}
# Lines with none of these split exactly like bytes.split() does.
_SLOW_CHARS = re.compile(rb"[\"'\v\f]")


def sdssplitargs(line: bytes) -> list[bytes] | None:
    """sds.c sdssplitargs on a line holding no NUL; None where it fails."""
    if _SLOW_CHARS.search(line) is None:
        return line.split()
    n = len(line)
    i = 0
    out: list[bytes] = []
    while True:
        while i < n and line[i] in _ISSPACE:
            i += 1
        if i >= n:
            return out
        cur = bytearray()
        inq = insq = False
        while True:
            c = line[i] if i < n else 0  # 0 stands for the C string's NUL
            nxt = line[i + 1] if i + 1 < n else 0
            if inq:
                if c == 0x5C and nxt == 0x78 and i + 3 < n and line[i + 2] in _HEX and line[i + 3] in _HEX:
                    cur.append(int(line[i + 2 : i + 4], 16))
                    i += 3
                elif c == 0x5C and nxt:
                    i += 1
                    cur.append(_ESCAPES.get(nxt, nxt))
                elif c == 0x22:
                    # A closing quote must be followed by a blank or the end.
                    if nxt and nxt not in _ISSPACE:
                        return None
                    i += 1
                    break
                elif not c:
                    return None  # unterminated quotes
                else:
                    cur.append(c)
            elif insq:
                if c == 0x5C and nxt == 0x27:
                    i += 1
                    cur.append(0x27)
                elif c == 0x27:
                    if nxt and nxt not in _ISSPACE:
                        return None
                    i += 1
                    break
                elif not c:
                    return None
                else:
                    cur.append(c)
            else:
                if not c:
                    break
                if c in _TOKEN_END:
                    i += 1
                    break
                if c == 0x22:
                    inq = True
                elif c == 0x27:
                    insq = True
                else:
                    cur.append(c)
            i += 1
        out.append(bytes(cur))

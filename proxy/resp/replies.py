"""Exact byte boundaries of replies in an upstream RESP2/RESP3 stream, with no I/O.

This module owns one question: where does each reply end?  Many clients share
one upstream connection and the proxy forwards reply bytes untouched, so it
must cut the stream exactly at reply boundaries; hiredis parses values but
cannot say where they end.  ``ReplySplitter.scan`` walks headers only: a
line-typed value is skipped with one ``find``, a length-prefixed body is
skipped by arithmetic (never copied), and aggregates are tracked on an
explicit stack of remaining-element counts, so nesting depth costs no
recursion.  Two rules keep it correct across chunk boundaries: all state that
outlives a call lives in the object (the stack, the bytes left of a body, a
partial header line, "inside a line"), and an earlier chunk is never looked
at again, so a reply arriving in many chunks costs O(its bytes).  RESP3 attributes
(``|``) are a prefix of the value that follows and complete nothing; RESP3
pushes (``>``) at top level are counted apart from replies.
"""

from __future__ import annotations

from .. import compiled
from .order import runs

__all__ = ["ReplySplitter", "ReplyStreamError", "interleave"]


class ReplyStreamError(Exception):
    """The upstream sent something that is not RESP as Redis sends it."""


# What each type byte is.  Kinds >= _AGG open an aggregate frame.
_BAD = 0
_LINE = 1  # + - : _ , # (   one line is the whole value
_BULK = 2  # $ = !           length line, then that many bytes and CRLF
_AGG = 3  # * ~             n elements
_MAP = 4  # %               2n elements
_ATTR = 5  # |               2n elements, a prefix: not a value itself
_PUSH = 6  # >               n elements; at top level, a push, not a reply

_KIND_MAP = {
    **dict.fromkeys(b"+-:_,#(", _LINE),
    **dict.fromkeys(b"$=!", _BULK),
    **dict.fromkeys(b"*~", _AGG),
    ord("%"): _MAP,
    ord("|"): _ATTR,
    ord(">"): _PUSH,
}
_KIND = tuple(_KIND_MAP.get(b, _BAD) for b in range(256))

# Splitter states between calls (besides the aggregate stack).
_IDLE = 0
_IN_LINE = 1  # inside a line-typed value, waiting for its '\n'
_IN_BODY = 2  # inside a bulk body; _left bytes (CRLF included) to go
_IN_HEADER = 3  # inside a length/count line; its first bytes are in _partial

# A length or count line is at most "$-9223372036854775808\r": anything
# longer without a line end is not RESP, and we must not buffer it.
_MAX_HEADER = 32


class ReplySplitter:
    """Resumable scanner that counts complete replies and where they end."""

    __slots__ = ("_state", "_left", "_partial", "_top", "_stack", "_kinds", "_attr")

    def __init__(self) -> None:
        self._state = _IDLE
        self._left = 0
        self._partial = b""
        # Elements still expected by the innermost open aggregate; 0 at top
        # level.  Kept apart from _stack so the per-element path touches a
        # local int, not a list.  _stack holds the enclosing frames' counts
        # (0 for top level), _kinds the kind of each open frame.
        self._top = 0
        self._stack: list[int] = []
        self._kinds: list[int] = []
        self._attr = False  # a top-level attribute was consumed; its value has not

    @property
    def in_reply(self) -> bool:
        """True while a reply (or a push, or an attribute prefix) is partly consumed."""
        return bool(self._state or self._top or self._attr)

    def cut(self, data: bytes, start: int, want: int) -> tuple[bytes, int, int]:
        """`scan`, with the bytes it consumed: ``(data[start:end], end, done)``, and ``data``
        itself when that is all of it (a connection's read, cut into its entries' replies;
        compiled, copied once, without a slice object)."""
        end, done, _pushes = self.scan(data, start, want)
        return (data if start == 0 and end == len(data) else data[start:end]), end, done

    def take(self, data: bytes, start: int, want: int) -> bytes | tuple[bytes, int]:
        """`cut` as a connection's read loop wants it: the bytes alone when they hold all `want`
        replies (the usual case: no tuple or integers to make and take apart for each entry),
        else ``(bytes, done)``. Where they end is `start` plus their length."""
        piece, _end, done = self.cut(data, start, want)
        return piece if done == want else (piece, done)

    def scan(self, data: bytes, start: int, want: int) -> tuple[int, int, int]:
        """Consume bytes of data from start, up to the want-th complete reply.

        Returns ``(end, done, pushes)``: the offset just past the consumed
        bytes, the number of complete replies (0..want) and the number of
        complete top-level pushes among the consumed bytes.  When it stops at
        ``len(data)`` inside a reply, the partial state is kept and the next
        call continues it.  ``data`` must be ``bytes`` (what asyncio hands
        over): header slices are dictionary keys, so they must be hashable.
        """
        if type(data) is not bytes:
            raise TypeError(f"ReplySplitter.scan needs bytes, not {type(data).__name__}")
        if want <= 0:
            return start, 0, 0
        n = len(data)
        if want == 1 and start < n and not (self._state or self._top or self._attr):
            # One reply at a time (a client's one command): a short bulk string or a line whole
            # in the chunk is cut as the hot loop below cuts it, without setting the loop up.
            t = data[start]
            if t == 36:
                end = _SHORT_BULK.get(data[start + 1 : start + 5], 0) + start
                if start < end <= n and data[end - 1] == 10:
                    return end, 1, 0
            elif _KIND[t] == _LINE:
                nl = data.find(b"\n", start)
                if nl >= 0:
                    return nl + 1, 1, 0
        pos = start
        done = pushes = 0

        # ---- resume what the previous chunk left unfinished (once per call)
        state = self._state
        if state:
            if state == _IN_HEADER:
                nl = data.find(b"\n", pos)
                if nl < 0:
                    self._partial += data[pos:]
                    if len(self._partial) > _MAX_HEADER:
                        raise ReplyStreamError(f"header line too long: {self._partial[:40]!r}")
                    return n, 0, 0
                # Scan the reassembled line on its own: it ends exactly at
                # its '\n', so it completes a value, opens a frame, or leaves
                # a body pending (_IN_BODY, handled just below).
                line = self._partial + data[pos : nl + 1]
                self._partial = b""
                self._state = _IDLE
                _, done, pushes = self.scan(line, 0, want)
                pos = nl + 1
                if done == want:
                    return pos, done, pushes
                state = self._state
            finished = False
            if state == _IN_BODY:
                left = self._left
                if n - pos < left:
                    self._left = left - (n - pos)
                    return n, done, pushes
                pos += left
                if data[pos - 1] != 10:
                    raise ReplyStreamError("bulk body not followed by CRLF")
                self._state = _IDLE
                finished = True
            elif state == _IN_LINE:
                nl = data.find(b"\n", pos)
                if nl < 0:
                    return n, done, pushes
                pos = nl + 1
                self._state = _IDLE
                finished = True
            if finished:
                outcome = self._value_done()
                if outcome == _REPLY_DONE:
                    done += 1
                    if done == want:
                        return pos, done, pushes
                elif outcome == _PUSH_DONE:
                    pushes += 1

        # ---- the hot loop: one iteration per value
        top = self._top
        attr = self._attr
        find = data.find
        bulk_len = _BULK_LEN
        short_bulk = _SHORT_BULK.get
        count_of = _COUNT
        kind_of = _KIND
        while pos < n:
            t = data[pos]
            if t == 36:  # '$', the commonest reply, tested first
                # Short bulks skip the find: the 4 bytes after the '$' name
                # the whole reply's size.  A miss, including a header cut by
                # the chunk end, takes the general path.
                end = short_bulk(data[pos + 1 : pos + 5], 0)
                if end:
                    end += pos
                else:
                    nl = find(b"\n", pos)
                    if nl < 0:
                        self._keep_header(data, pos)
                        pos = n
                        break
                    try:
                        size = bulk_len[data[pos + 1 : nl]]
                    except KeyError:
                        size = _slow_length(data, pos, nl)
                    # size is -2 for the RESP2 null "$-1\r\n": end is then nl + 1.
                    end = nl + 3 + size
                if end > n:
                    # The body runs past this chunk: remember how much is left.
                    self._state = _IN_BODY
                    self._left = end - n
                    pos = n
                    break
                if data[end - 1] != 10:
                    raise ReplyStreamError("bulk body not followed by CRLF")
                pos = end
            else:
                k = kind_of[t]
                if k == _LINE:
                    nl = find(b"\n", pos)
                    if nl < 0:
                        self._state = _IN_LINE
                        pos = n
                        break
                    pos = nl + 1
                elif k == _BULK:  # '=' and '!': like '$', without the null
                    nl = find(b"\n", pos)
                    if nl < 0:
                        self._keep_header(data, pos)
                        pos = n
                        break
                    try:
                        size = count_of[data[pos + 1 : nl]]
                    except KeyError:
                        size = _slow_length(data, pos, nl)
                    if size < 0:
                        raise ReplyStreamError(_bad_header(data, pos, nl))
                    end = nl + 3 + size
                    if end > n:
                        self._state = _IN_BODY
                        self._left = end - n
                        pos = n
                        break
                    if data[end - 1] != 10:
                        raise ReplyStreamError("bulk body not followed by CRLF")
                    pos = end
                elif k:
                    nl = find(b"\n", pos)
                    if nl < 0:
                        self._keep_header(data, pos)
                        pos = n
                        break
                    try:
                        count = count_of[data[pos + 1 : nl]]
                    except KeyError:
                        count = _slow_length(data, pos, nl)
                    if count < 0 and t != 42:  # only '*' has a null ("*-1")
                        raise ReplyStreamError(_bad_header(data, pos, nl))
                    pos = nl + 1
                    if count > 0:
                        if k == _MAP or k == _ATTR:
                            count *= 2
                        # A nested '>' is closed like any aggregate: only a
                        # frame whose parent is top level counts as a push.
                        self._stack.append(top)
                        self._kinds.append(k)
                        top = count
                        continue
                    if count == 0:
                        if k == _ATTR:
                            if not top:
                                attr = True  # an empty attribute: still no value
                            continue
                        if k == _PUSH and not top:
                            pushes += 1
                            attr = False
                            continue
                    # An empty aggregate or a null array is a complete value.
                else:
                    raise ReplyStreamError(
                        f"unknown RESP type byte {data[pos : pos + 1]!r} at offset {pos}"
                    )

            # A value is complete.
            if top:
                top -= 1
                if top:
                    continue
                # It was the last element of the innermost aggregate.
                outcome = self._close_frames()
                top = self._top
                if outcome == _REPLY_DONE:
                    done += 1
                    attr = False
                    if done == want:
                        break
                elif outcome == _PUSH_DONE:
                    pushes += 1
                    attr = False
                elif outcome == _ATTR_DONE:
                    attr = True  # the reply it describes comes next
                continue
            done += 1
            attr = False
            if done == want:
                break
        self._top = top
        self._attr = attr
        return pos, done, pushes

    def _value_done(self) -> int:
        # A value completed while resuming (cold path twin of the loop's tail).
        if not self._top:
            self._attr = False
            return _REPLY_DONE
        self._top -= 1
        if self._top:
            return _NOTHING
        outcome = self._close_frames()
        if outcome == _ATTR_DONE:
            self._attr = True
        elif outcome != _NOTHING:
            self._attr = False
        return outcome

    def _close_frames(self) -> int:
        """Pop the innermost frame, which has all its elements, and any
        enclosing frames that this completes; say what finished at top level."""
        stack = self._stack
        kinds = self._kinds
        while True:
            k = kinds.pop()
            top = stack.pop()
            if k == _ATTR:
                # An attribute is no element of its parent: nothing counts.
                self._top = top
                return _NOTHING if top else _ATTR_DONE
            if top:
                top -= 1
                if top:
                    self._top = top
                    return _NOTHING
                continue
            self._top = 0
            return _PUSH_DONE if k == _PUSH else _REPLY_DONE

    def _keep_header(self, data: bytes, pos: int) -> None:
        # A length/count line cut by the chunk end: keep its few bytes.
        if len(data) - pos > _MAX_HEADER:
            raise ReplyStreamError(f"header line too long: {data[pos : pos + 40]!r}")
        self._partial = data[pos:]
        self._state = _IN_HEADER


# Outcomes of closing frames.
_NOTHING = 0
_REPLY_DONE = 1
_PUSH_DONE = 2
_ATTR_DONE = 3

# Length/count text *with its '\r'* -> value, for the common sizes: one dict
# lookup replaces isdigit() + int() + a check of the '\r' on the hot path.
# The null "-1" maps to -2 for bulks, so that nl + 3 + size lands just past
# "$-1\r\n" with no test of its own.
_COUNT = {b"%d\r" % i: i for i in range(-1, 10000)}
_BULK_LEN = {**_COUNT, b"-1\r": -2}
# The 4 bytes after a '$' -> the whole reply's length, header and CRLF
# included, for lengths below 100 and the null: "12\r\n", "-1\r\n", and for
# one digit "3\r\n" plus whatever first body byte (or CR, for "$0") follows.
_SHORT_BULK = {
    **{b"%d\r\n%c" % (i, c): i + 6 for i in range(10) for c in range(256)},
    **{b"%d\r\n" % i: i + 7 for i in range(10, 100)},
    b"-1\r\n": 5,
}


def _slow_length(data: bytes, pos: int, nl: int) -> int:
    """A length or count not in the tables: big, or not RESP at all."""
    s = data[pos + 1 : nl]
    if s[-1:] == b"\r":
        digits = s[:-1]
        if digits.isdigit():  # bytes.isdigit() is ASCII-only
            return int(digits)
    raise ReplyStreamError(_bad_header(data, pos, nl))


def _bad_header(data: bytes, pos: int, nl: int) -> str:
    line = data[pos : nl + 1]
    if line[1:2] == b"?":
        return f"streamed RESP3 type {line!r} is not supported (Redis never sends it)"
    return f"malformed RESP header {line[:40]!r} at offset {pos}"


def interleave(parts: list, order) -> bytes:
    """The replies of several streams, one after another in the order `order` takes them:
    `order[i]` is the index in `parts` of the stream that holds the i-th reply. Each part is
    whole replies, in order, and the last reply `order` takes from a part takes the rest of its
    bytes. A cluster's stretch of a pipeline is answered this way: one part a master. Raises
    ValueError when a part holds fewer replies than `order` takes from it, or none is taken."""
    left = [0] * len(parts)
    for index in order:
        left[index] += 1
    if 0 in left:
        raise ValueError("a part none of whose replies is taken")
    splitter = PureReplySplitter()  # (each reply is whole: the scanner ends each between two replies)
    positions = [0] * len(parts)
    pieces = []
    for index, at, run in runs(order):  # a run of replies from one part: one cut
        data = parts[index]
        start = positions[index]
        left[index] -= run - at
        if left[index] == 0:
            end = start  # the part's last run: its replies but the last are scanned, the last takes the rest
            if run - at > 1:
                end, done, _pushes = splitter.scan(data, start, run - at - 1)
                if done < run - at - 1:
                    raise ValueError(f"part {index} holds fewer replies than are taken from it")
            if end == len(data):
                raise ValueError(f"part {index} holds fewer replies than are taken from it")
            end = len(data)
        else:
            end, done, _pushes = splitter.scan(data, start, run - at)
            if done < run - at:
                raise ValueError(f"part {index} holds fewer replies than are taken from it")
        pieces.append(data[start:end])
        positions[index] = end
    return b"".join(pieces)


def pure_may_hold_error(data: bytes) -> bool:
    """Whether an error reply may start in `data`, a read of an upstream stream that starts
    between two replies: a `-` at its start or after a line end. (A `-` anywhere else is inside a
    reply: `$-1`, a negative integer, a value.)"""
    return data[:1] == b"-" or data.find(b"\r\n-") >= 0


def pure_line_dash(data: bytes, pos: int) -> int:
    """Where the first line feed followed by a `-` is, from `pos` (0 or more; -1: none): the
    place an error reply may start in a read of an upstream stream (`data.find(b"\\n-", pos)`)."""
    return data.find(b"\n-", pos) if 45 in data else -1


def pure_error_among(data: bytes, start: int, count: int) -> bool:
    """Whether an error reply starts among the next `count` replies of `data` from `start` (where
    a reply starts), as far as `data` holds them: a `-` inside a value, after a line feed of
    its own, is none. True also where a push comes among them (it is not told apart here)."""
    probe = PureReplySplitter()
    size = len(data)
    while count > 0 and start < size:
        if data[start] == 45:
            return True
        end, done, pushes = probe.scan(data, start, 1)
        if pushes:
            return True
        if not done:
            return False
        start = end
        count -= 1
    return False


PureReplySplitter = ReplySplitter  # the reference implementation; the compiled one must behave the same
pure_interleave = interleave
may_hold_error = pure_may_hold_error
line_dash = pure_line_dash
error_among = pure_error_among
_compiled = compiled.load("proxy.resp._compiled_replies")
if _compiled is not None:
    ReplySplitter = _compiled.ReplySplitter
    interleave = _compiled.interleave
    may_hold_error = _compiled.may_hold_error
    line_dash = _compiled.line_dash
    error_among = _compiled.error_among

"""Client request reader: bytes in, complete commands (and their exact bytes) out.

Theory of operation: the fast path hands the client's bytes to `hiredis.Reader`, which parses in C,
and then checks in one pass over the parsed arguments that the bytes were the canonical encoding
Redis expects (`*N` then `$len` for every argument). That check is what makes it safe to forward
the client's own bytes upstream without re-encoding: hiredis also accepts RESP3 types and status
lines inside arrays, which Redis rejects, and a request that reached a shared upstream connection
in a shape Redis rejects would get that connection closed for everyone. Anything the fast path
does not vouch for (inline commands, malformed input, a request split across reads whose headers
may already be wrong) goes through `exact.parse_request`, which reproduces redis-server's own
parser and error texts. No I/O here: `feed()` bytes, `read()` batches.

A request that arrives in many reads is read once: hiredis keeps its own progress, and the exact
parser's check of the unfinished request (or its reading of it, off the fast path) resumes where
the last read left it (`exact.Unfinished`), from the bytes after that point only; the reads are
kept as they came (merged as they pile up, each byte copied a logarithmic number of times) and
joined once, when the request is complete. However the client cuts it, a request costs time
linear in its bytes.

Compiled, `_compiled_requests.split_requests` takes a read's leading canonical requests in one C
call before any of this (nothing buffered before: a client's usual read), and hands what it
cannot vouch for to the Python path at a request boundary.
"""

from __future__ import annotations

import re

import hiredis

from .. import compiled
from .exact import ParseLimits, ProtocolError, Unfinished, parse_more, parse_request
from .order import runs

__all__ = ["Batch", "RequestReader", "ParseLimits", "ProtocolError", "requests_again"]

_STAR = 42  # b'*'
_DOLLAR = 36  # b'$'
# hiredis allocates an aggregate's element list from its header before any element has arrived
# (`*3000000000` is a 24 GB list): a header with a 7-digit count never reaches it. hiredis reads a
# type byte only at the start of its input or after a line end, so a read is searched from line
# feeds (a one-byte literal prefix: sre skips to each at memchr speed, where a leading character
# class tries every position, many times slower on a large value) and its start is matched apart.
_HUGE_AGGREGATE = re.compile(rb"[*~>|%][0-9]{7}")
_HUGE_AFTER_LINE = re.compile(rb"\n[*~>|%][0-9]{7}")
_OVERLAP = 12  # a header split across two reads is seen whole
# What hiredis raises on bytes it will not read as a request: its own protocol errors, and
# TypeError for a RESP3 map or set whose key is an aggregate (`*1\r\n%1\r\n*0\r\n...`). The exact
# parser then answers as Redis does.
_HIREDIS_REFUSED = (hiredis.ProtocolError, TypeError)
_compiled = compiled.load("proxy.resp._compiled_requests")


def _huge(data: bytes) -> bool:
    """Whether a read holds a huge aggregate header where hiredis would read one as a header (or
    inside a value that merely looks like one: the exact parser then decides)."""
    return _HUGE_AFTER_LINE.search(data) is not None or _HUGE_AGGREGATE.match(data) is not None


class Batch:
    """Complete requests read so far.

    `raw` is the RESP encoding of exactly `commands` (each a tuple of its arguments, bytes), in
    order, and `ends[i]` is the offset in `raw` just past command i: the client's own bytes
    wherever the client sent RESP, so the common case forwards `raw` as it is. `error` is a
    protocol error that followed these commands; the connection must answer it after their
    replies and close, as Redis does. A batch of the compiled split has no `ends` until they are
    asked for (`offsets`): they are found again in `raw`, which is then canonical requests only,
    and most batches are forwarded whole. A cluster client's reader keeps the ends the split
    found (`packed_ends`, C integers in bytes; None otherwise), so that a pipeline dealt out to
    its masters is copied by them.
    """

    __slots__ = compiled.declared_fields(__file__, "Batch")

    def __init__(self, commands, raw, ends, error=None):
        self.commands = commands
        self.raw = raw
        self._ends = ends
        self.error = error
        self.packed_ends = None

    @property
    def ends(self) -> list:
        return self.offsets()

    def offsets(self) -> list:
        """`ends`, found in `raw` the first time for a batch of the compiled split."""
        ends = self._ends
        if ends is None:
            ends = self._ends = _request_ends(self.raw) if _request_ends is not None else request_ends(self.raw)
        return ends

    def span(self, start: int, stop: int) -> bytes:
        """Bytes of commands[start:stop]."""
        ends = self._ends
        if ends is None:
            if start == 0 and stop == len(self.commands):
                return self.raw
            ends = self.offsets()
        begin = ends[start - 1] if start else 0
        end = ends[stop - 1]
        if begin == 0 and end == len(self.raw):
            return self.raw
        return self.raw[begin:end]

    def requests_by_part(self, first: int, order, parts: int) -> list:
        """The commands from `first` dealt out to `parts` requests: command first + i goes to
        part `order[i]`; each part's commands keep their order (spans of the batch's bytes, cut
        where the reader found the commands end). (A cluster's stretch: a part a master; which
        command goes where is the cluster's, backends/cluster/owners.py.) Compiled, one C pass
        that copies each command once."""
        if _pick is not None:  # (without ends: in C, from the commands)
            ends = self._ends
            return pick_requests(self.raw, ends if ends is not None else self.packed_ends, first, order, parts,
                                 self.commands)
        return pure_pick_requests(self.raw, self.offsets(), first, order, parts)


# Requests read again are whole requests the proxy read once already, under the client's limits.
_READ_AGAIN = ParseLimits(max_bulk_len=1 << 62, max_args=1 << 62, max_request_bytes=1 << 62)


def requests_again(raw: bytes) -> Batch:
    """The commands of `raw`, requests the proxy read once already and cut out of a client's
    batch (a stretch's part, its runs to be sent again one by one): a Batch of their own, read
    without the limits they were held to. ValueError if `raw` is not whole requests."""
    if _split is not None:  # compiled: one C pass, without a reader and its hiredis.Reader
        commands = []
        if _split(raw, _READ_AGAIN.max_args, _READ_AGAIN.max_request_bytes, commands) == len(raw):
            return Batch(commands, raw, None)
    reader = RequestReader(_READ_AGAIN)
    batch = reader.feed_read(raw)
    if batch is None or batch.error is not None or reader.buffered or batch.span(0, len(batch.commands)) != raw:
        raise ValueError("requests read again are not the whole requests they were")
    return batch


def request_ends(raw: bytes) -> list:
    """The offset just past each request of `raw`, canonical requests only, else ValueError
    (`Batch.offsets`; the reference for the compiled one)."""
    ends = []
    pos = 0
    try:
        while pos < len(raw):
            if raw[pos] != _STAR:
                raise ValueError
            cr = raw.index(b"\r", pos)
            count = int(raw[pos + 1:cr])
            pos = cr + 2
            for _ in range(count):
                if raw[pos] != _DOLLAR:
                    raise ValueError
                cr = raw.index(b"\r", pos)
                pos = cr + 2 + int(raw[pos + 1:cr]) + 2
            if pos > len(raw):
                raise ValueError
            ends.append(pos)
    except (IndexError, ValueError):
        raise ValueError("not canonical requests") from None
    return ends


def pure_pick_requests(raw: bytes, ends: list | None, first: int, order, parts: int, commands=None) -> list:
    """`Batch.requests_by_part` on a batch's `raw` and `ends` (the reference for the compiled one;
    None: found in `raw`, which the compiled one finds from `commands` when they are given)."""
    if ends is None:
        ends = request_ends(raw)
    pieces = [[] for _ in range(parts)]
    for part, start, stop in runs(order, first):
        pieces[part].append(raw[ends[start - 1] if start else 0:ends[stop - 1]])
    return [b"".join(piece) for piece in pieces]


# The proxy's one bytes object for each command name its tables know (`command_name`). The
# compiled split hands out these very objects for the names it sees (it keeps the recent ones):
# a table lookup then finds its key by identity, with the hash already computed, and no name is
# allocated per command. Pure Python splits give equal, new objects.
COMMAND_NAMES: dict[bytes, bytes] = {}


def command_name(name: bytes) -> bytes:
    """The object the proxy's tables key `name` by (the first one asked for)."""
    return COMMAND_NAMES.setdefault(name, name)


# The compiled split of a read's leading canonical requests, None in pure Python (a module
# global, not a class attribute: a compiled class's attributes cannot be set, and tests set it).
_split = _compiled.split_requests if _compiled is not None else None
# What feed_read calls when `_split` is set: compiled, reader.pxd makes it the compiled split's C
# function (this assignment is then not made); in Python, the same function as `_split`.
split_requests = _split
split_keeping_ends = _compiled.split_keeping_ends if _compiled is not None else None  # (a cluster client's)
_pick = _compiled.pick_requests if _compiled is not None else None
_request_ends = _compiled.request_ends if _compiled is not None else None
# What Batch calls for a cluster stretch's requests when the twins are built: the C function when
# compiled (reader.pxd cimports this name), the twin otherwise.
pick_requests = _pick
if _compiled is not None:
    _compiled.use_command_names(COMMAND_NAMES)


class RequestReader:
    __slots__ = compiled.declared_fields(__file__, "RequestReader")

    def __init__(self, limits: ParseLimits | None = None):
        self._limits = limits = limits or ParseLimits()
        self._max_args = limits.max_args  # (passed for every read: compiled, C numbers)
        self._max_bytes = limits.max_request_bytes
        self._chunks: list[bytes] = []
        self._size = 0
        self._hiredis = hiredis.Reader()
        self._fast = True  # hiredis holds exactly the bytes in _chunks
        self._need = 0  # buffered size at which the partial tail is worth validating again
        self._failed = False
        self._ends_out = None  # where the compiled split puts a read's packed ends (`keep_ends`)
        # The exact parser's progress through the unfinished multibulk request at the start of the
        # buffer (offsets from there), or None: checked only on the fast path, read off it.
        self._unfinished = None

    def keep_ends(self) -> None:
        """Batches of the compiled split keep where their commands end (`Batch.packed_ends`):
        a cluster client's, whose pipelines are dealt out to several masters."""
        self._ends_out = [None]

    @property
    def buffered(self) -> int:
        """Bytes received and not yet returned as complete commands."""
        return self._size

    def feed(self, data: bytes) -> None:
        if self._failed or not data:
            return
        chunks = self._chunks
        if self._fast:
            if _huge(data) or (
                chunks and _HUGE_AGGREGATE.search(self._last_bytes() + data[:_OVERLAP])
            ):
                # The exact parser refuses or accepts it by the proxy's limits instead. The
                # buffered chunks are exactly what hiredis held, so nothing is lost.
                self._fast = False
                self._hiredis = None
                self._unfinished = None  # (the fast path's check: the exact parser reads it again, once)
            else:
                self._hiredis.feed(data)
        chunks.append(data)
        self._size += len(data)
        if len(chunks) > 16:
            # Merged as they pile up (a read of a byte at a time): each chunk more than twice the
            # next, so they stay few and a byte is copied a logarithmic number of times.
            while len(chunks) > 1 and len(chunks[-2]) <= 2 * len(chunks[-1]):
                last = chunks.pop()
                chunks[-1] += last

    def _last_bytes(self) -> bytes:
        """The last _OVERLAP bytes buffered (a header cut across reads, maybe across several)."""
        last = self._chunks[-1]
        if len(last) >= _OVERLAP or len(self._chunks) == 1:
            return last[-_OVERLAP:]
        return self._bytes_from(self._size - _OVERLAP)[0][-_OVERLAP:]

    def feed_read(self, data: bytes) -> Batch | None:
        """feed(data) then read(), shortened for the common case: nothing buffered before."""
        if _split is not None and self._fast and not self._chunks and data:
            commands = []
            ends_out = self._ends_out
            packed = None
            if ends_out is None:
                pos = split_requests(data, self._max_args, self._max_bytes, commands)
            else:
                pos = split_keeping_ends(data, self._max_args, self._max_bytes, commands, ends_out)
                packed = ends_out[0]
                if packed is not None:
                    ends_out[0] = None
            if pos == len(data):  # the usual read: made without Batch()'s argument parsing (compiled)
                batch = Batch.__new__(Batch)
                batch.commands = commands
                batch.raw = data
                batch._ends = None
                batch.error = None
                batch.packed_ends = packed
                return batch
            if pos:
                return self._after_split(data, commands, pos)
        return self._feed_read(data)

    def _after_split(self, data: bytes, commands: list, pos: int) -> Batch | None:
        """The compiled split took data[:pos]; the Python path reads the rest as a new read."""
        rest = self._feed_read(data[pos:])
        if rest is None:
            return Batch(commands, data[:pos], None)
        rest.commands[:0] = commands
        rest._ends = _request_ends(data[:pos]) + [end + pos for end in rest.offsets()]
        rest.raw = data[:pos] + rest.raw
        return rest

    def _feed_read(self, data: bytes) -> Batch | None:
        """feed(data) then read(), in Python (the compiled split's fallback, or feed_read itself)."""
        if (not self._fast or self._chunks or not data or _HUGE_AFTER_LINE.search(data) is not None
                or _HUGE_AGGREGATE.match(data) is not None):  # _huge(data), without the call
            self.feed(data)
            return self.read()
        self._chunks = [data]
        self._size = len(data)
        hiredis_reader = self._hiredis
        hiredis_reader.feed(data)
        gets = hiredis_reader.gets
        try:
            first = gets()
        except _HIREDIS_REFUSED:
            return self._fallback(data, [], [], 0)
        if first is False:
            return self._check_tail()
        return self._read_fast(first, gets)

    def read(self) -> Batch | None:
        """Complete commands received so far, or None when there are none and no error."""
        if self._failed or not self._size:
            return None
        if not self._fast:
            state = self._unfinished
            if state is not None:
                return self._read_unfinished(state)
            return self._read_exact(self._take_all(), [], [], [], 0)
        gets = self._hiredis.gets
        try:
            first = gets()
        except _HIREDIS_REFUSED:
            return self._fallback(self._take_all(), [], [], 0)
        if first is False:
            return self._check_tail()
        return self._read_fast(first, gets)

    def _take_all(self) -> bytes:
        chunks = self._chunks
        buf = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        self._chunks = [buf]
        return buf

    def _bytes_from(self, offset: int):
        """(bytes, base): the buffered bytes from `base` on, `base` at most `offset` (the chunks
        that hold them, the first one cut at `offset`; nothing is joined when one chunk holds them)."""
        chunks = self._chunks
        base = self._size
        i = len(chunks)
        while i > 0 and base > offset:
            i -= 1
            base -= len(chunks[i])
        if i == len(chunks):
            return b"", base
        if i == len(chunks) - 1:
            return chunks[i], base
        first = chunks[i]
        cut = offset - base if offset > base else 0
        return b"".join([first[cut:] if cut else first, *chunks[i + 1:]]), base + cut

    def _keep(self, rest: bytes) -> None:
        self._chunks = [rest] if rest else []
        self._size = len(rest)
        self._unfinished = None

    def _read_fast(self, first, gets) -> Batch | None:
        chunks = self._chunks
        buf = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        limits = self._limits
        max_args = limits.max_args
        max_bytes = limits.max_request_bytes
        commands = []
        ends = []
        pos = 0
        cmd = first
        try:
            while cmd is not False:
                # Canonical-encoding check, which also yields each command's end offset.
                if type(cmd) is not list or not cmd or buf[pos] != _STAR or len(cmd) > max_args:
                    break
                count = len(cmd)
                p = pos + (4 if count < 10 else 5 if count < 100 else 3 + len(str(count)))
                for arg in cmd:
                    if buf[p] != _DOLLAR:
                        raise TypeError
                    n = len(arg)
                    p += n + (6 if n < 10 else 7 if n < 100 else 5 + len(str(n)))
                if p - pos > max_bytes:
                    break
                commands.append(tuple(cmd))  # (as the compiled split makes them)
                ends.append(p)
                pos = p
                cmd = gets()
            else:
                # Everything hiredis had complete was canonical.
                if pos == len(buf):
                    self._chunks = []
                    self._size = 0
                    self._need = 0
                    self._unfinished = None
                    return Batch(commands, buf, ends)
                raw = buf[:pos]
                self._keep(buf[pos:])
                self._need = 0
                tail = self._check_tail()
                if tail is not None:  # the tail is malformed, or complete by Redis's rules only
                    tail.commands[:0] = commands
                    # The tail's ends count from its own start: `raw` now goes before it.
                    tail._ends = ends + [end + pos for end in tail.offsets()]
                    tail.raw = raw + tail.raw
                    return tail
                return Batch(commands, raw, ends)
        except (TypeError, IndexError, hiredis.ProtocolError):
            pass
        self._chunks = [buf]
        return self._fallback(buf, commands, ends, pos)

    def _check_tail(self) -> Batch | None:
        """Validate a partial request the way Redis would, so a malformed header is answered now
        rather than after bytes that may never come. The check of a multibulk request resumes
        where the last one stopped, and inside an argument nothing can go wrong until its last
        byte has arrived, so it is not looked at before then: a request arriving in many reads
        costs linear time."""
        size = self._size
        if size < self._need:
            return None
        state = self._unfinished
        if state is None:
            if self._chunks[0][0] != _STAR:  # an inline request: at most 64 KiB, read again whole
                buf = self._take_all()
                try:
                    result = parse_request(buf, 0, self._limits)
                except ProtocolError as exc:
                    self._fail()
                    return Batch([], b"", [], exc)
                if result is not None:
                    return self._fallback(buf, [], [], 0)
                self._need = size + 1
                return None
            state = self._unfinished = Unfinished(0, keep_args=False)
        data, base = self._bytes_from(state.resume_at())
        try:
            end = parse_more(data, base, state, self._limits)
        except ProtocolError as exc:
            self._fail()
            return Batch([], b"", [], exc)
        if end is not None:  # hiredis and Redis disagree on where a request ends
            return self._fallback(self._take_all(), [], [], 0)
        self._need = state.needed(size)
        return None

    def _read_unfinished(self, state) -> Batch | None:
        """Off the fast path: go on reading the multibulk request begun at the buffer's start."""
        if state.body >= 0 and self._size < state.at + state.body + 2:
            return None  # inside an argument's body
        data, base = self._bytes_from(state.resume_at())
        try:
            end = parse_more(data, base, state, self._limits)
        except ProtocolError as exc:
            self._fail()
            return Batch([], b"", [], exc)
        if end is None:
            return None
        self._unfinished = None
        buf = self._take_all()
        args = tuple(state.args)  # (as the compiled split makes them)
        if not args:
            return self._read_exact(buf, [], [], [], end)
        return self._read_exact(buf, [args], [end], [buf[:end]], end)

    def _fallback(self, buf: bytes, commands: list, ends: list, pos: int) -> Batch | None:
        """Leave the fast path at offset pos (a request boundary)."""
        self._fast = False
        self._hiredis = None
        self._unfinished = None
        raw_parts = [buf[:pos]] if pos else []
        return self._read_exact(buf, commands, ends, raw_parts, pos)

    def _read_exact(self, buf, commands, ends, raw_parts, pos) -> Batch | None:
        limits = self._limits
        out_len = ends[-1] if ends else 0
        error = None
        unfinished = None
        try:
            while pos < len(buf):
                if buf[pos] == _STAR:  # (read with its progress kept, should it be unfinished)
                    unfinished = Unfinished(pos)
                    end = parse_more(buf, 0, unfinished, limits)
                    if end is None:
                        break
                    args, inline = unfinished.args, False
                    unfinished = None
                else:
                    result = parse_request(buf, pos, limits)
                    if result is None:
                        break
                    args, end, inline = result
                if args:
                    args = tuple(args)  # (as the compiled split makes them)
                    piece = hiredis.pack_command(args) if inline else buf[pos:end]
                    raw_parts.append(piece)
                    out_len += len(piece)
                    commands.append(args)
                    ends.append(out_len)
                pos = end
        except ProtocolError as exc:
            error = exc
        if error is not None:
            self._fail()
        else:
            rest = buf[pos:]
            self._keep(rest)
            if unfinished is not None:
                unfinished.moved(pos)
                self._unfinished = unfinished
            if not rest or (rest[0] == _STAR and _HUGE_AGGREGATE.match(rest) is None):
                # Back to hiredis at a request boundary where what follows is RESP. The partial
                # request left over was just validated by the exact parser (its arguments' headers
                # within limits, the rest body bytes), so hiredis may hold it, unless its count
                # is huge (hiredis would make the list of that size at once).
                self._fast = True
                self._hiredis = hiredis.Reader()
                self._need = 0
                if unfinished is not None:  # its check goes on from where this reading stopped
                    unfinished.args = None
                    self._need = unfinished.needed(len(rest))
                if rest:
                    self._hiredis.feed(rest)
        if not commands and error is None:
            return None
        raw = raw_parts[0] if len(raw_parts) == 1 else b"".join(raw_parts)
        return Batch(commands, raw, ends, error)

    def _fail(self) -> None:
        self._failed = True
        self._fast = False  # feed_read's shortcut is closed too
        self._chunks = []
        self._size = 0
        self._hiredis = None
        self._unfinished = None


if _split is None:  # pure Python: feed_read is the Python path itself, without the hook's frame
    try:
        RequestReader.feed_read = RequestReader._feed_read
    except TypeError:  # the class compiled, the split not built: feed_read takes the Python path itself
        pass

"""What one process counts on live traffic, on the hot path, in plain Python.

Everything here is a dict or a list updated in place by the event loop's thread; nothing is
exported from here (`snapshot` copies it at scrape time, from another thread: a dict or list
copy is one C call under the GIL, so it sees a consistent state). Nothing runs per reply: the
costs are per client batch (a dict update), per upstream read (one clock read) and one float
comparison per run of commands answered; per byte only memchr, and a search for an error
reply's start in the reads that hold a `-`:

* `count_batch` (a client's batch of requests; a batch of one command is counted inline by the
  session): the command names as sent, counted with C loops (`operator.countOf` for a pipeline
  of one command, else the loop of `collections.Counter`; names are folded to the command
  table's at export; at most `MAX_NAMES` distinct spellings are kept, the rest fold into the
  empty name, "unknown"), the request bytes, big requests (only when the batch itself is big).
* `upstream_read` (a read from an upstream connection, before its replies are handed out):
  reply bytes; error replies, looked for only in reads where a `-` follows a line end or starts
  the read (then walked reply by reply); at every read, the connection's oldest run
  of commands is timed from the moment its client's batch was read (`Pending.started`) into the
  histogram of its first command, weighted by its number of commands (the exporter scales the
  sample to the exact number of commands answered) and into the round-trip histogram, and one
  such sample in `KEY_SAMPLE_EVERY` gives the hot-key sample its first key. It
  returns the slow log's cutoff: a run that the connection finishes answering in that read and
  that was read before the cutoff (`started < cutoff`) goes to `slow_done`, the slow log.
* `rejected`: a command the policy refused.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections import _count_elements
from operator import countOf, itemgetter

import hiredis

from ..resp.replies import ReplySplitter, ReplyStreamError
from . import keys
from .keys import BIG_BYTES, SLOW_SECONDS

clock = time.perf_counter
first = itemgetter(0)

# Histogram bounds in seconds: a Redis reply takes about 0.1 ms; slow ones up to seconds.
BOUNDS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
MAX_NAMES = 512  # distinct command spellings kept (clients may send any bytes as a name)
UNKNOWN = b""  # the name garbage folds into
KEY_SAMPLE_EVERY = 64  # one timed run in KEY_SAMPLE_EVERY gives a hot-key sample
ERROR_SCAN_LIMIT = 65536  # bigger reads are bulk bodies: not searched for error replies
REDIRECTIONS = (b"-MOVED ", b"-ASK ", b"-TRYAGAIN")

NAMES: dict[bytes, int] = {}  # command name as sent -> commands
ERRORS: dict[bytes, int] = {}  # command name as sent -> error replies from Redis
REJECTED: dict[bytes, int] = {}  # command name as sent -> refused by the policy
DURATIONS: dict[bytes, list] = {}  # first command name -> [bucket counts..., +Inf, sum of seconds]
RTT = [0] * (len(BOUNDS) + 1) + [0.0]
TOTALS = [0, 0, 0]  # request bytes, reply bytes, redirections (a list: cheaper than a dict by name)
TOTAL_NAMES = ("request_bytes", "reply_bytes", "redirections")
_ticks = [KEY_SAMPLE_EVERY]
_known: set[bytes] = set()  # every command name, lower and upper case
_namers: dict[type, object] = {}  # slot class -> function(slot, k) -> args of its k-th command


def setup(table) -> None:
    """Learn the command table's names and the slot classes (imported here, not at module
    import: the connection modules import this one)."""
    from ..cluster.connection import RoutedPending
    from ..pending import Pending

    for spec in table:
        if "|" not in spec.name:
            _known.add(spec.name.encode())
            _known.add(spec.name.upper().encode())
    _namers[Pending] = _sent_command
    _namers[RoutedPending] = _routed_command
    keys.setup(table)


def reset() -> None:
    """Forget every count (tests)."""
    for table in (NAMES, ERRORS, REJECTED, DURATIONS):
        table.clear()
    RTT[:] = [0] * (len(BOUNDS) + 1) + [0.0]
    TOTALS[:] = [0, 0, 0]
    _ticks[:] = [KEY_SAMPLE_EVERY]
    keys.reset()


# -- the hot path -----------------------------------------------------------------------------


def count_batch(batch) -> None:
    commands = batch.commands
    name = commands[0][0]
    count = len(commands)
    if commands[-1][0] == name and countOf(map(first, commands), name) == count:
        NAMES[name] = NAMES.get(name, 0) + count  # a pipeline of one command: a third of the cost
    else:
        _count_elements(NAMES, map(first, commands))
    size = len(batch.raw)
    TOTALS[0] += size
    if size >= BIG_BYTES:
        keys.big_requests(batch)


def slow_done(slot, cutoff: float) -> None:
    """A run read before the slow log's cutoff was answered (`upstream_read` returned `cutoff`)."""
    count = getattr(slot, "count", 0)
    if count > 0:  # not a reply of the proxy's own, nor a stream
        keys.slow(full_command(slot), cutoff + SLOW_SECONDS - slot.started, count)


def _time(slot, elapsed: float, count: int) -> None:
    sent = slot.sent
    if sent is not None and sent[6] == 13 and sent[4] == 36:
        name = sent[8:sent[5] - 40]  # `*N\r\n$L\r\nNAME`: one-digit counts, no parser needed
    else:
        namer = _namers.get(slot.__class__)
        args = namer(slot, 0) if namer is not None else None
        if args is None:
            return
        name = args[0]
    histogram = DURATIONS.get(name)
    if histogram is None:
        if len(DURATIONS) >= MAX_NAMES:
            name = UNKNOWN
        histogram = DURATIONS.setdefault(name, [0] * (len(BOUNDS) + 1) + [0.0])
    histogram[bisect_left(BOUNDS, elapsed)] += count
    histogram[-1] += elapsed * count


def upstream_read(conn, data: bytes) -> float:
    """Before `conn` hands out the replies in `data` (its pending entries still as they were);
    returns the slow log's cutoff for the runs it completes."""
    now = clock()
    size = len(data)
    TOTALS[1] += size
    # memchr first: searching "\r\n-" in reply-dense bytes costs about 1 ns a byte
    if 45 in data and (data[0] == 45 or (size <= ERROR_SCAN_LIMIT and b"\r\n-" in data)):
        _count_errors(conn, data)
    if size >= BIG_BYTES and (conn.splitter.in_reply or _big_bulk_first(data)):
        keys.big_reply(conn, data, _head_command)  # not a read of many small replies
    pending = conn.pending
    if pending:
        _sample(pending[0], now)
    return now - SLOW_SECONDS


def _sample(slot, now: float) -> None:
    """Time the oldest run a connection awaits, as of this read of its replies."""
    started = slot.started
    count = getattr(slot, "count", 0)
    if started >= now or count <= 0:  # not a client's timed run (UNTIMED), or a stream
        return
    elapsed = now - started
    _observe(RTT, elapsed)
    _time(slot, elapsed, count)
    ticks = _ticks
    ticks[0] -= 1
    if not ticks[0]:  # the rarer samples, taken from the timed ones
        ticks[0] = KEY_SAMPLE_EVERY
        args = full_command(slot)
        if args:
            keys.sample((args,))
        if len(NAMES) > MAX_NAMES:  # new names since the last check: at most a sample period's
            fold(NAMES)


def rejected(name: bytes) -> None:
    REJECTED[name] = REJECTED.get(name, 0) + 1


# -- the rare paths ---------------------------------------------------------------------------


def fold(names: dict) -> None:
    """Keep the command table's spellings; every other name counts as UNKNOWN."""
    for name in [name for name in names if name not in _known and name != UNKNOWN]:
        lower = name.lower()
        target = lower if lower in _known else UNKNOWN
        names[target] = names.get(target, 0) + names.pop(name)


def _observe(histogram: list, seconds: float) -> None:
    histogram[bisect_left(BOUNDS, seconds)] += 1
    histogram[-1] += seconds


def _sent_command(slot, k: int):
    """The k-th command of a standalone slot, from the request bytes it was sent with."""
    sent = slot.sent
    if sent is None:
        return None
    if k == 0 and sent[6:7] == b"\r" and sent[:1] == b"*" and sent[4:5] == b"$":
        # `*N\r\n$L\r\nNAME`: the usual one-digit header, without a parser
        return (sent[8:8 + sent[5] - 48],)
    return _parse_nth(sent, k)


def _routed_command(slot, k: int):
    source = slot.source
    if isinstance(source, bytes):
        return _parse_nth(source, k)
    at = slot.first + k
    commands = source.commands
    return commands[at] if at < len(commands) else None


def _parse_nth(data: bytes, k: int):
    reader = hiredis.Reader()
    reader.feed(data)
    for _ in range(k + 1):
        command = reader.gets()
        if command is False or not isinstance(command, list) or not command:
            return None
    return command


def command_of(slot, k: int = 0):
    """The k-th command of a slot: its arguments, or only its name (a 1-tuple, the fast path of
    a standalone entry's first command); None for entries that are not a client's commands."""
    namer = _namers.get(slot.__class__)
    return namer(slot, k) if namer is not None else None


def full_command(slot, k: int = 0):
    """The k-th command of a slot with all its arguments."""
    if getattr(slot, "sent", None) is not None:
        return _parse_nth(slot.sent, k)
    return command_of(slot, k)


def _big_bulk_first(data: bytes) -> bool:
    """The read starts with a bulk string of at least BIG_BYTES."""
    if data[0] != 36:
        return False
    end = data.find(b"\r", 1, 24)
    try:
        return end > 0 and int(data[1:end]) >= BIG_BYTES
    except ValueError:
        return False


def _head_command(conn):
    pending = conn.pending
    return full_command(pending[0]) if pending else None


def _count_errors(conn, data: bytes) -> None:
    """Walk the replies of this read over the connection's pending entries and count the error
    replies by command. A read that starts inside a reply is left alone (rare: error replies
    are one short line)."""
    if conn.splitter.in_reply:
        return
    pending = conn.pending
    if not pending:
        return
    splitter = ReplySplitter()
    size = len(data)
    pos = 0
    index = 0
    slot = pending[0]
    left = slot.remaining
    try:
        while pos < size and left > 0:
            start = pos
            pos, done, _pushes = splitter.scan(data, pos, 1)
            if not done:
                return
            if data[start] == 45:
                if data.startswith(REDIRECTIONS, start):
                    TOTALS[2] += 1
                else:
                    count = getattr(slot, "count", 0)
                    args = command_of(slot, count - left) if count > 0 else None
                    if args is not None:
                        name = args[0]
                        ERRORS[name] = ERRORS.get(name, 0) + 1
                        if len(ERRORS) > MAX_NAMES:
                            fold(ERRORS)
            left -= 1
            if left == 0:
                index += 1
                if index >= len(pending):
                    return
                slot = pending[index]
                left = slot.remaining
    except (ReplyStreamError, IndexError):
        return

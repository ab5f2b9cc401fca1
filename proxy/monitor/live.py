"""What one process counts on live traffic, on the hot path, in plain Python.

Everything here is a dict or a list updated in place by the event loop's thread; nothing is
exported from here (`snapshot` copies it at scrape time, from another thread: a dict or list
copy is one C call under the GIL, so it sees a consistent state). The costs are per batch, per
slot or per upstream read; per byte only memchr, and a search for an error reply's start in the
reads that hold a `-`:

* `count_batch` (a client's batch of requests): the command names as sent, counted with C
  loops (`operator.countOf` for a pipeline of one command, else the loop of
  `collections.Counter`; names are folded to the command table's at export; at most
  `MAX_NAMES` distinct spellings are kept, the rest fold into the empty name, "unknown"), the
  request bytes, big requests (only when the batch itself is big).
* `slot_done` (a run of pipelined commands fully answered and written to the client): its time
  from the moment it was queued (`Pending.started`: when its batch was read); one run in `TIME_EVERY` goes into the
  histogram of its first command, weighted by its number of commands (the exporter scales the
  sample to the exact number of commands answered), and one in `KEY_SAMPLE_EVERY` gives the
  hot-key sample its first key; every run past `keys.SLOW_SECONDS` goes into the slow log.
* `upstream_read` (a read from an upstream connection): reply bytes; error replies, looked for
  only in reads where a `-` follows a line end or starts the read (then walked reply by reply);
  every `RTT_SAMPLE_EVERY` reads, the upstream round trip of the connection's oldest request.
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
RTT_SAMPLE_EVERY = 8
KEY_SAMPLE_EVERY = 64
TIME_EVERY = 8  # one slot in TIME_EVERY is timed, and counts for TIME_EVERY
ERROR_SCAN_LIMIT = 65536  # bigger reads are bulk bodies: not searched for error replies
REDIRECTIONS = (b"-MOVED ", b"-ASK ", b"-TRYAGAIN")

NAMES: dict[bytes, int] = {}  # command name as sent -> commands
ERRORS: dict[bytes, int] = {}  # command name as sent -> error replies from Redis
REJECTED: dict[bytes, int] = {}  # command name as sent -> refused by the policy
DURATIONS: dict[bytes, list] = {}  # first command name -> [bucket counts..., +Inf, sum of seconds]
RTT = [0] * (len(BOUNDS) + 1) + [0.0]
TOTALS = [0, 0, 0]  # request bytes, reply bytes, redirections (a list: cheaper than a dict by name)
TOTAL_NAMES = ("request_bytes", "reply_bytes", "redirections")
_ticks = [RTT_SAMPLE_EVERY, KEY_SAMPLE_EVERY // TIME_EVERY, TIME_EVERY]
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
    _ticks[:] = [RTT_SAMPLE_EVERY, KEY_SAMPLE_EVERY // TIME_EVERY, TIME_EVERY]
    keys.reset()


# -- the hot path -----------------------------------------------------------------------------


def count_batch(batch) -> None:
    commands = batch.commands
    name = commands[0][0]
    count = len(commands)
    if count == 1:
        NAMES[name] = NAMES.get(name, 0) + 1
    elif commands[-1][0] == name and countOf(map(first, commands), name) == count:
        NAMES[name] = NAMES.get(name, 0) + count  # a pipeline of one command: a third of the cost
    else:
        _count_elements(NAMES, map(first, commands))
    size = len(batch.raw)
    TOTALS[0] += size
    if size >= BIG_BYTES:
        keys.big_requests(batch)


def slot_done(slot) -> None:
    """A slot's last reply was written to its client: every slot is checked against the slow
    log's threshold; one in TIME_EVERY is timed into the histogram, for TIME_EVERY."""
    started = slot.started
    if not started:  # not timed: a reply of the proxy's own, or not a client's run
        return
    elapsed = clock() - started
    ticks = _ticks
    ticks[2] -= 1
    if ticks[2] and elapsed < SLOW_SECONDS:
        return
    sampled = not ticks[2]
    if sampled:
        ticks[2] = TIME_EVERY
    count = slot.count
    if count <= 0:  # a reply of the proxy's own, or a stream
        return
    if sampled:
        _time(slot, elapsed, count)
        ticks[1] -= 1
        if not ticks[1]:  # the rarer samples, taken from the timed ones
            ticks[1] = KEY_SAMPLE_EVERY // TIME_EVERY
            args = full_command(slot)
            if args:
                keys.sample((args,))
            if len(NAMES) > MAX_NAMES:  # new names since the last check: at most a sample period's
                fold(NAMES)
    if elapsed >= SLOW_SECONDS:
        keys.slow(full_command(slot), elapsed, count)


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


def upstream_read(conn, data: bytes) -> None:
    """Before `conn` hands out the replies in `data` (its pending entries still as they were)."""
    size = len(data)
    TOTALS[1] += size
    # memchr first: searching "\r\n-" in reply-dense bytes costs about 1 ns a byte
    if 45 in data and (data[0] == 45 or (size <= ERROR_SCAN_LIMIT and b"\r\n-" in data)):
        _count_errors(conn, data)
    if size >= BIG_BYTES and (conn.splitter.in_reply or _big_bulk_first(data)):
        keys.big_reply(conn, data, _head_command)  # not a read of many small replies
    ticks = _ticks
    ticks[0] -= 1
    if not ticks[0]:
        ticks[0] = RTT_SAMPLE_EVERY
        pending = conn.pending
        started = getattr(pending[0], "started", None) if pending else None
        if started is not None:
            _observe(RTT, clock() - started)


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

"""What one process counts on live traffic, on the hot path, in plain Python.

Everything here is a dict, a list or an array of machine numbers (`counts.py`: the round-trip
histograms and the totals) updated in place by the event loop's thread; nothing is exported
from here (`snapshot` copies it at scrape time, from another thread: a dict, list or array copy
is one C call under the GIL, so it sees a consistent state). Nothing runs per reply and
nothing looks anything up per request: the costs are one attribute increment per command, one
clock reading per upstream write and a few steps per upstream read; per byte only memchr, and a
search for an error reply's start in the reads that hold a `-`:

* commands, by name: a command that the session's dispatch loop passes on as it is (the usual
  case) is counted by its dispatch-table entry, the name's `Tally` (`session/behaviour.py`
  puts one in place of every PASS: one attribute increment, no lookup); any other (handled by
  the proxy, refused, rewritten) by `count_names`, a dict by the name as sent (at most
  `MAX_NAMES` distinct spellings are kept, the rest fold into the empty name, "unknown"; names
  are folded to the command table's at export).
* `written` (an upstream write, coalesced: one per connection per loop turn): request bytes,
  and big requests when the write itself is big.
* `read_from` (a read from an upstream connection, before its replies are handed out; the
  connection passes its stamps and entries, `upstream_read` takes them from the connection):
  reply bytes; error replies, looked for only in reads where a `-` follows a line end or starts
  the read (then walked reply by reply); and the timing. Nothing is timed per request: the
  upstream connection stamps each of its writes (`UpstreamConnection.stamps`: the clock when the
  write's first request was queued, and the last entry it carries), so at every read the
  connection's oldest run is timed from its write's stamp (compiled, by the C clock, unless
  a test has put its own `clock` here), into the histogram of its first
  command (the exporter scales each command's sample to the exact number of its commands
  answered; the round-trip histogram is all of them added up); one such sample in
  `KEY_SAMPLE_EVERY` gives the hot-key sample its first key. When that oldest write is
  `SLOW_SECONDS` old, the read is a slow one: it returns what `slow_runs` needs to put every run
  the read completes and that was written before the threshold into the slow log.
* `rejected`: a command the policy refused.
"""

from __future__ import annotations

import time
from itertools import islice
from time import perf_counter as stamp_clock  # (compiled: the C clock, `_compiled_write.stamp_clock`)

from .. import compiled
from ..pending import Pending, queue_head, queue_popleft
from ..resp.replies import ReplySplitter, ReplyStreamError, may_hold_error
from . import keys
from .counts import BOUND_ARRAY, BOUNDS, add, counters, empty_histogram, time_run  # noqa: F401 (live.BOUNDS)
from .keys import BIG_BYTES, SLOW_LAZY_BYTES, SLOW_SECONDS

clock = time.perf_counter  # (tests put a clock of their own here)
PERF_COUNTER = time.perf_counter
MAX_NAMES = 512  # distinct command spellings kept (clients may send any bytes as a name)
UNKNOWN = b""  # the name garbage folds into
KEY_SAMPLE_EVERY = 64  # one timed run in KEY_SAMPLE_EVERY gives a hot-key sample
ERROR_SCAN_LIMIT = 65536  # bigger reads are bulk bodies: not searched for error replies
REDIRECTIONS = (b"-MOVED ", b"-ASK ", b"-TRYAGAIN")
SLOW_SCAN = 256  # runs of one slow read looked at for the slow log

TALLIES: dict = {}  # command name -> its count of commands passed on as they are
NAMES: dict[bytes, int] = {}  # command name as sent -> other commands
ERRORS: dict[bytes, int] = {}  # command name as sent -> error replies from Redis
REJECTED: dict[bytes, int] = {}  # command name as sent -> refused by the policy
# first command name -> its round-trip histogram (counts.py: [bucket counts..., +Inf, sum of seconds])
DURATIONS: dict = {}
# request bytes written upstream, reply bytes read, redirections (an array: cheaper than a dict by name)
TOTALS = counters(3)
TOTAL_NAMES = ("request_bytes", "reply_bytes", "redirections")
_ticks = counters(1)  # timed runs to the next hot-key sample
_ticks[0] = KEY_SAMPLE_EVERY
# The name and histogram of the last run timed by its request's bytes: the next read's is mostly
# the same command, compared in place (no slice, no hash). At first a name of ten bytes, which
# never matches a one-digit length.
NO_NAME = (b"0123456789", None)
_last_timed = list(NO_NAME)
_known: set[bytes] = set()  # every command name, lower and upper case
_namers: dict[type, object] = {}  # slot class -> function(slot, k) -> args of its k-th command


def setup(table, cluster_slots=()) -> None:
    """Learn the command table's names and the slot classes whose commands are named: the
    standalone `Pending`, and `cluster_slots`, the cluster's (RoutedPending, Part) given by the
    caller (monitor/service.py): the cluster's connection module imports this one."""
    for spec in table:
        if "|" not in spec.name:
            _known.add(spec.name.encode())
            _known.add(spec.name.upper().encode())
    _namers[Pending] = _sent_command
    if cluster_slots:
        routed, part = cluster_slots
        _namers[routed] = _routed_command
        _namers[part] = _sent_command  # (a part's request: its commands of the stretch, in order)
    keys.setup(table)


def reset() -> None:
    """Forget every count (tests)."""
    for table in (NAMES, ERRORS, REJECTED, DURATIONS):
        table.clear()
    for counter in TALLIES.values():
        counter.n = 0
    for index in range(len(TOTALS)):
        TOTALS[index] = 0
    _ticks[0] = KEY_SAMPLE_EVERY
    _last_timed[:] = NO_NAME
    keys.reset()


# -- the hot path -----------------------------------------------------------------------------


class Tally:
    """The count of one command name's commands passed on as they are; it stands for PASS in
    the sessions' dispatch tables."""

    __slots__ = compiled.declared_fields(__file__, "Tally")

    def __init__(self, name: bytes):
        self.name = name
        self.n = 0


def tally(name: bytes) -> Tally:
    """The one Tally of a command name (either case), made on first use."""
    name = name.lower()
    found = TALLIES.get(name)
    if found is None:
        found = TALLIES[name] = Tally(name)
    return found


def count_names(commands, start: int, stop: int) -> None:
    """Commands the dispatch loop went past without a Tally (handled, refused, rewritten)."""
    for index in range(start, min(stop, len(commands))):
        name = commands[index][0]
        NAMES[name] = NAMES.get(name, 0) + 1
    if len(NAMES) > MAX_NAMES:
        fold(NAMES)


def written(data: bytes, chunks=()) -> None:
    """An upstream write of `data` (`chunks` joined: each one run of a client's requests)."""
    size = len(data)
    add(TOTALS, 0, size)
    big = BIG_BYTES  # (compiled: a C number)
    if size >= big:  # a run this big may hold big requests
        for chunk in chunks or (data,):
            if len(chunk) >= BIG_BYTES:
                keys.big_requests(chunk)


def slow_runs(conn, slow) -> None:
    """After a slow read (`upstream_read` returned `slow`): the runs it completed that were
    written `SLOW_SECONDS` or more before it, into the slow log. A write's runs are the entries
    up to its stamp's last one, in the connection's order. A slow read is often one of many at
    once (the process was descheduled: every run in flight is late), so a run costs a name and
    an append: one wall-clock reading for the read, the name from its request's header when that
    is the usual one-digit one, the rest parsed when the slow log is read (`keys.slow_log`)."""
    now, entries, stamps = slow
    if conn.closed:
        return
    at = 0
    wall = None
    for entry in entries:
        if entry.remaining != 0 or at >= len(stamps):
            return  # not completed by this read (nor any after it), or never stamped
        elapsed = now - stamps[at][0]
        count = getattr(entry, "count", 0)
        if elapsed >= SLOW_SECONDS and count > 0:
            if wall is None:
                wall = time.time()
            sent = getattr(entry, "sent", None)
            if sent is not None and len(sent) <= SLOW_LAZY_BYTES and sent[6] == 13 and sent[4] == 36:
                # `*N\r\n$L\r\nNAME`: one-digit counts, the name without a parser (as in `read_from`)
                keys.slow_request(sent, sent[8:sent[5] - 40].lower(), elapsed, count, wall)
            else:  # a big request, a long name or many arguments, a routed entry (its commands parsed)
                args = full_command(entry)
                if args:
                    keys.slow(args, elapsed, count, wall)
        while at < len(stamps) and stamps[at][1] is entry:
            at += 1


def upstream_read(conn, data: bytes):
    """Before `conn` hands out the replies in `data` (its pending entries still as they were);
    None, or for a slow read what `slow_runs` needs once the replies are handed out. The tests'
    way in; the connection calls `read_from` with its fields."""
    return read_from(conn, data, conn.stamps, conn.pending)


def read_from(conn, data: bytes, stamps, pending):
    """`upstream_read`, given the connection's write stamps and pending entries: the compiled
    connection reads them as C fields and calls this in C (live.pxd), at one client once per
    request. Inline and in one frame; the entries are read as C fields too."""
    size = len(data)
    add(TOTALS, 1, size)
    # (compiled, the limits are C numbers: compared without an int or a float object)
    scan_limit, big, slow_after = ERROR_SCAN_LIMIT, BIG_BYTES, SLOW_SECONDS
    # memchr first; an error reply starts with `-` after a line end (or at the read's start): a
    # memchr for each `-` (in C when built), and only at the start of bigger reads (bulk bodies)
    if 45 in data and (may_hold_error(data) if size <= scan_limit else data[0] == 45):
        _count_errors(conn, data)
    if size >= big and (conn.splitter.in_reply or _big_bulk_first(data)):
        keys.big_reply(conn, data, _head_command)  # not a read of many small replies
    stamp = queue_head(stamps)
    if stamp is None:
        return None
    oldest = stamp[1]  # the last entry of the oldest write
    if oldest.remaining == 0:  # writes answered: the oldest left is the head's
        stamp = _unanswered(stamps)
        if stamp is None:
            return None
    slot = queue_head(pending)
    if slot is None:
        return None
    now = stamp_clock() if clock is PERF_COUNTER else clock()  # (compiled: a C call, no float object)
    began = stamp[0]
    elapsed = now - began
    request = slot.sent
    sent = request if type(request) is bytes else None  # (compiled: read as bytes)
    histogram = None
    if sent is not None and sent[6] == 13 and sent[4] == 36:  # `*N\r\n$L\r\nNAME`: one-digit counts
        last = _last_timed
        name = last[0]
        if sent[5] - 48 == len(name) and sent.startswith(name, 8):  # (compiled: a memcmp)
            histogram = last[1]
        else:
            name = sent[8:sent[5] - 40]
            histogram = _histogram(name)
            last[0] = name
            last[1] = histogram
    else:
        name = _name_of(slot)
        if name is not None:
            histogram = _histogram(name)
    if histogram is not None and time_run(histogram, elapsed, _ticks, BOUND_ARRAY):
        _rare_samples(slot)
    if elapsed >= slow_after:
        return now, list(islice(pending, SLOW_SCAN)), list(islice(stamps, SLOW_SCAN))
    return None


def _unanswered(stamps):
    """Drop the stamps of writes whose runs are all answered; the oldest left, or None (compiled:
    a C call, the stamps' entries C fields)."""
    stamp = queue_head(stamps)
    while stamp is not None:
        last = stamp[1]
        if last.remaining != 0:
            return stamp
        queue_popleft(stamps)
        stamp = queue_head(stamps)
    return None


def _name_of(slot):
    """The first command's name of a client's run, None for anything else (the proxy's own
    commands, a stream, a reply it wrote itself)."""
    if getattr(slot, "count", 0) <= 0 or slot.remaining <= 0:
        return None
    args = command_of(slot, 0)
    return args[0] if args else None


def _histogram(name: bytes):
    found = DURATIONS.get(name)
    if found is not None:
        return found
    if len(DURATIONS) >= MAX_NAMES:
        name = UNKNOWN
        found = DURATIONS.get(name)
        if found is not None:
            return found
    found = DURATIONS[name] = empty_histogram()
    return found


def _rare_samples(slot) -> None:
    """One timed run in KEY_SAMPLE_EVERY: the hot-key sample, and the bound on names."""
    _ticks[0] = KEY_SAMPLE_EVERY
    sent = getattr(slot, "sent", None)
    if type(sent) is not bytes or not keys.sample_request(sent):
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


def _sent_command(slot, k: int):
    """The k-th command of a standalone slot or a stretch's part, from the request bytes it was
    sent with."""
    sent = slot.sent
    if sent is None:
        return None
    if k == 0 and sent[6:7] == b"\r" and sent[:1] == b"*" and sent[4:5] == b"$":
        # `*N\r\n$L\r\nNAME`: the usual one-digit header, without a parser
        return (sent[8:8 + sent[5] - 48],)
    return keys.nth_command(sent, k)


def _routed_command(slot, k: int):
    source = slot.source
    if isinstance(source, bytes):
        return keys.nth_command(source, k)
    at = slot.first + k
    commands = source.commands
    return commands[at] if at < len(commands) else None


def command_of(slot, k: int = 0):
    """The k-th command of a slot: its arguments, or only its name (a 1-tuple, the fast path of
    a standalone entry's first command); None for entries that are not a client's commands."""
    namer = _namers.get(slot.__class__)
    return namer(slot, k) if namer is not None else None


def full_command(slot, k: int = 0):
    """The k-th command of a slot with all its arguments."""
    if getattr(slot, "sent", None) is not None:
        return keys.nth_command(slot.sent, k)
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
                    add(TOTALS, 2, 1)
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

"""Hot keys, big keys and the slow log of one process: bounded, sampled, never values.

* Hot keys: a Space-Saving summary (Metwally et al.) of `HOT_CAPACITY` counters over a sample:
  the first key of the oldest run of commands answered in one upstream read in every
  `live.KEY_SAMPLE_EVERY`.
  A key that is not tracked replaces the one with the smallest count and inherits that count as
  its error bound, so every key whose sampled count exceeds the smallest is in the table (the
  smallest is found through a heap kept beside the table, not a scan of it: `offer`). The
  counts are of the sample; multiply by the sampling period for an estimate of requests. A
  sampled request in the usual shape gives its key without a parser (`sample_request`).
* Big keys: requests of at least `BIG_BYTES` (one command's encoded size, looked for in the
  runs of an upstream write of at least that size) and replies of at least that size (the
  upstream reads of one reply added up), the `BIG_CAPACITY` biggest by (kind, command, key).
* Slow log: the last `SLOW_CAPACITY` runs of commands that took `SLOW_SECONDS` or more from
  being queued for upstream (their write's stamp) to their last reply read, with the first
  command's name, its key (never other arguments), its number of arguments and the number of
  commands in the run. Runs tend to be slow all at once (the process was short of CPU: every
  run in flight is late), so recording one is cheap: a run whose request's header gives its
  name (`slow_request`) is kept as that name and its request bytes, parsed for key and number
  of arguments only when the log is read (`slow_log`), for the entries still in it.
  `SLOW_BY_NAME` counts every slow run by name, exactly.

Keys are cut to `KEY_BYTES`. Everything is read at scrape time by `snapshot` (copies).
"""

from __future__ import annotations

import collections
import heapq
import time

import hiredis

HOT_CAPACITY = 32
BIG_BYTES = 64 * 1024
BIG_CAPACITY = 32
SLOW_SECONDS = 0.01  # redis-server's own slowlog-log-slower-than default, 10 ms
SLOW_CAPACITY = 128
# A slow run's request bytes up to this size are kept until the log is read (at most
# SLOW_CAPACITY of them: 512 KiB; a 16-deep pipeline of small SETs is 1.1 KiB); bigger ones are
# parsed at once, rather than keeping a big value alive.
SLOW_LAZY_BYTES = 4096
KEY_BYTES = 128
KEY_PER_SAMPLE = 1

_first_key: set[bytes] = set()  # names (both cases) whose first key is argument 1
HOT: dict[bytes, list] = {}  # key -> [sampled count, error bound]
_hot_heap: list = []  # (count, key) for each key of HOT: offer's heap
BIG: dict[tuple, int] = {}  # (kind, name, key) -> biggest size seen
# (time, seconds, name, key, arguments, count, request): `request` is None, or the run's request
# bytes whose first command gives key and arguments when the log is read (`slow_log`)
SLOW: collections.deque = collections.deque(maxlen=SLOW_CAPACITY)
COUNTS = {"hot_samples": 0, "big_requests": 0, "big_replies": 0}
SLOW_BY_NAME: dict[bytes, int] = {}
_reading: dict[int, list] = {}  # id(connection) -> [slot, reply bytes so far]


def setup(table) -> None:
    for spec in table:
        specs = spec.key_specs
        if "|" in spec.name or not specs:
            continue
        begin = specs[0].begin_search
        if begin.kind == "index" and begin.pos == 1:
            _first_key.add(spec.name.encode())
            _first_key.add(spec.name.upper().encode())


def reset() -> None:
    HOT.clear()
    _hot_heap.clear()
    BIG.clear()
    SLOW.clear()
    SLOW_BY_NAME.clear()
    _reading.clear()
    for name in COUNTS:
        COUNTS[name] = 0


def key_of(args) -> bytes | None:
    """The first key of a command, when it is argument 1 (most commands); cut to KEY_BYTES."""
    if args is None or len(args) < 2:
        return None
    name = args[0]
    if name not in _first_key and name.lower() not in _first_key:
        return None
    return args[1][:KEY_BYTES]


# -- hot keys ---------------------------------------------------------------------------------


def sample(commands) -> None:
    """One command of sampled ones (the first with a key)."""
    for args in commands[:4]:
        if len(args) > 1 and args[0] in _first_key:
            _count_hot(args[1][:KEY_BYTES])
            return


def sample_request(request: bytes) -> bool:
    """The sample of a request whose first command has the usual header, `*N\r\n$L\r\nNAME\r\n`
    with N and L of one digit, then its first argument's `$K\r\n`: its key read in place, without
    a parser (`sample` is given the parsed command otherwise). False when the header is not that."""
    size = len(request)
    if size < 14 or request[0] != 42 or request[2] != 13 or request[4] != 36 or request[6] != 13:
        return False
    argc, length = request[1] - 48, request[5] - 48
    at = 8 + length  # the name's end
    if not (2 <= argc <= 9 and 1 <= length <= 9) or at + 3 >= size or request[at] != 13 or request[at + 2] != 36:
        return False
    end = at + 3
    key_length = 0
    while end < size and 48 <= request[end] <= 57 and end < at + 21:  # (compiled: C bytes, a C number)
        key_length = key_length * 10 + request[end] - 48
        end += 1
    if end == at + 3 or end + 1 >= size or request[end] != 13:
        return False
    if request[8:at] in _first_key:
        _count_hot(request[end + 2:end + 2 + min(key_length, KEY_BYTES)])
    return True


def _count_hot(key: bytes) -> None:
    offer(HOT, key, HOT_CAPACITY, _hot_heap)
    COUNTS["hot_samples"] += 1


def offer(table: dict, key: bytes, capacity: int, heap: list) -> None:
    """Space-Saving: count key, replacing the smallest counter when the table is full.

    `heap` (kept by the caller with its table, empty for an empty table) finds the smallest in
    O(log capacity) amortised instead of a scan of the table, which a stream of distinct keys
    (no hot key at all) would pay on every sample: it holds one (count, key) per key of the
    table, whose count is never above the table's (a count goes up without touching the heap).
    The top is brought up to date until it is, and then it is the smallest."""
    entry = table.get(key)
    if entry is not None:
        entry[0] += 1
        return
    if len(table) < capacity:
        table[key] = [1, 0]
        heapq.heappush(heap, (1, key))
        return
    while True:
        count, smallest = heap[0]
        now = table[smallest][0]
        if now == count:
            break
        heapq.heapreplace(heap, (now, smallest))
    floor = table.pop(smallest)[0]
    table[key] = [floor + 1, floor]
    heapq.heapreplace(heap, (floor + 1, key))


# -- big keys ---------------------------------------------------------------------------------


def big_requests(data: bytes) -> None:
    """The commands of a big upstream write that are big themselves."""
    reader = hiredis.Reader()
    reader.feed(data)
    while True:
        try:
            args = reader.gets()
        except hiredis.ProtocolError:
            return
        if args is False:
            return
        if isinstance(args, list) and args:
            size = encoded_size(args)
            if size >= BIG_BYTES:
                COUNTS["big_requests"] += 1
                _big("request", args, size)


def encoded_size(args) -> int:
    """Bytes of a command as RESP (`*N`, then `$len` and the bytes of every argument)."""
    return len(b"*%d\r\n" % len(args)) + sum(len(arg) + len(b"$%d\r\n\r\n" % len(arg)) for arg in args)


def big_reply(conn, data: bytes, head_command) -> None:
    """An upstream read inside a big reply: part of the reply to the connection's oldest request,
    added up per reply; `head_command(conn)` (that request's command) is asked once per reply."""
    reading = _reading.get(id(conn))
    pending = conn.pending
    slot = pending[0] if pending else None
    if reading is not None and reading[0] is slot:
        reading[1] += len(data)
        return
    if reading is not None:
        _reply_done(reading)
    if len(_reading) > 256:
        _reading.clear()
    _reading[id(conn)] = [slot, len(data), head_command(conn)]


def _reply_done(reading: list) -> None:
    _slot, size, args = reading
    COUNTS["big_replies"] += 1
    _big("reply", args, size)


def _big(kind: str, args, size: int) -> None:
    name = args[0].lower() if args else b"?"
    entry = (kind, name, key_of(args))
    if size <= BIG.get(entry, 0):
        return
    BIG[entry] = size
    if len(BIG) > BIG_CAPACITY:
        del BIG[min(BIG, key=BIG.__getitem__)]


def big_now() -> dict:
    """BIG with the replies still being read counted in."""
    found = dict(BIG)
    for _slot, size, args in list(_reading.values()):
        name = args[0].lower() if args else b"?"
        entry = ("reply", name, key_of(args))
        found[entry] = max(found.get(entry, 0), size)
    return found


# -- slow log ---------------------------------------------------------------------------------


def slow(args, seconds: float, count: int, at: float | None = None) -> None:
    """A slow run whose first command is parsed (`args`), at wall-clock time `at` (now)."""
    name = args[0].lower() if args else b"?"
    SLOW_BY_NAME[name] = SLOW_BY_NAME.get(name, 0) + 1
    SLOW.append((time.time() if at is None else at, seconds, name, key_of(args), len(args) if args else 0, count,
                 None))


def slow_request(request: bytes, name: bytes, seconds: float, count: int, at: float) -> None:
    """A slow run by its first command's name (lower case) and its request bytes (at most
    SLOW_LAZY_BYTES), left unparsed: nothing but the name is needed until the log is read."""
    SLOW_BY_NAME[name] = SLOW_BY_NAME.get(name, 0) + 1
    SLOW.append((at, seconds, name, None, 0, count, request))


def slow_log() -> list[tuple]:
    """The slow log, oldest first: (time, seconds, name, key, arguments, count) of every entry,
    the requests kept unparsed parsed now (on the scraping thread: SLOW is copied in one C call
    and a request is bytes, never changed)."""
    entries = []
    for at, seconds, name, key, argc, count, request in list(SLOW):
        if request is not None:
            args = nth_command(request, 0)
            if args is None:
                continue  # never: these are bytes the proxy sent as a client's commands
            key, argc = key_of(args), len(args)
        entries.append((at, seconds, name, key, argc, count))
    return entries


def nth_command(data: bytes, k: int):
    """The k-th command (from 0) in request bytes the proxy sent upstream, or None."""
    reader = hiredis.Reader()
    reader.feed(data)
    try:
        for _ in range(k + 1):
            command = reader.gets()
            if command is False or not isinstance(command, list) or not command:
                return None
    except hiredis.ProtocolError:
        return None
    return command

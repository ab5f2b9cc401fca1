#!/usr/bin/env python3
"""Micro-benchmark of the monitoring hooks on the hot path, without sockets.

Runs what the proxy's hooks run per request (`monitor.live`: the names counted per client batch,
the three slot fields set when a run is queued, `upstream_read` per upstream read, the slow
log's comparison when a run is answered) over batches of 1 and of 16 GET/SET commands, and prints nanoseconds per
request, next to the session loop's own cost without monitoring (`Session._run`, as in
micro_policy.py) for scale. Only reads of the machine's CPU: it does not depend on other load
as much as run.py does, but take the best of several runs on a shared machine.

    python benchmarks/micro_monitor.py [--batches N]
"""

from __future__ import annotations

import argparse
import collections
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import hiredis  # noqa: E402

from proxy.commands.table import CommandTable  # noqa: E402
from proxy.monitor import live  # noqa: E402
from proxy.pending import Pending  # noqa: E402
from proxy.resp.reader import RequestReader  # noqa: E402
from proxy.resp.replies import ReplySplitter  # noqa: E402

ROUNDS = 15
COMMANDS = {
    "GET": (lambda i: (b"GET", b"bench:item:%012d:string" % i), b"$3\r\nxxx\r\n"),
    "SET": (lambda i: (b"SET", b"bench:item:%012d:string" % i, b"xxx", b"EX", b"3600"), b"+OK\r\n"),
}


def Slot(receiver, remaining):  # noqa: N802 - a client's run, timed from now
    return Pending(receiver, remaining, None, None, time.perf_counter())


class PlainSlot:
    """Slot as it was before the monitor's three fields (started, sent, count)."""

    __slots__ = ("session", "remaining", "buffered", "buffered_size", "conn")

    def __init__(self, session, remaining: int, conn=None):
        self.session, self.remaining, self.conn, self.buffered, self.buffered_size = session, remaining, conn, None, 0


class Conn:
    def __init__(self):
        self.pending = collections.deque()
        self.splitter = ReplySplitter()


def with_hooks(batches, replies, size: int, conn) -> float:
    """One pass with the hooks: one batch, one slot, one upstream read per batch (a batch of
    one command is counted inline, as `Session._handle` does)."""
    names, totals = live.NAMES, live.TOTALS
    started = time.perf_counter()
    for batch in batches:
        commands = batch.commands
        if len(commands) == 1:
            name = commands[0][0]
            names[name] = names.get(name, 0) + 1
            totals[0] += len(batch.raw)
        else:
            live.count_batch(batch)
        slot = Slot(None, size)  # started and count are set here
        slot.sent = batch.raw
        conn.pending.append(slot)
        cutoff = live.upstream_read(conn, replies)
        conn.pending.popleft()
        if slot.started < cutoff:
            live.slow_done(slot, cutoff)
    return time.perf_counter() - started


def without(batches, replies, size: int, conn) -> float:
    """The same pass without the hooks and the slot's three fields."""
    started = time.perf_counter()
    for _batch in batches:
        slot = PlainSlot(None, size)
        conn.pending.append(slot)
        conn.pending.popleft()
    return time.perf_counter() - started


def per_request(batches, replies, size: int) -> float:
    """ns per request: the median over ROUNDS of (with hooks - without), run back to back so
    that the machine's other load hits both alike."""
    conn = Conn()
    differences = []
    for _ in range(ROUNDS):
        differences.append(with_hooks(batches, replies, size, conn) - without(batches, replies, size, conn))
    return statistics.median(differences) / (len(batches) * size) * 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=20_000)
    args = parser.parse_args()
    live.setup(CommandTable.from_snapshot())
    print("ns per request of the monitoring hooks (names counted, slot fields, upstream_read, slow cutoff)")
    for name, (build, reply) in COMMANDS.items():
        for size in (1, 16):
            reader = RequestReader()
            # A few distinct batches, cycled: in the proxy a batch was parsed just before its
            # hooks run, so it is in the CPU cache; thousands of old batches would not be.
            distinct = [reader.feed_read(b"".join(hiredis.pack_command(build(i * size + k)) for k in range(size)))
                        for i in range(64)]
            batches = distinct * (args.batches // size // 64 + 1)
            print(f"{name} x{size:<2}: {per_request(batches, reply * size, size):6.0f} ns per request for monitoring")
        live.reset()


if __name__ == "__main__":
    main()

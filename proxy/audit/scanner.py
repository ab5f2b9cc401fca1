"""The audit's I/O: SCAN every server (on a cluster, every master), learn each batch's facts in
two pipelined passes, classify and count them; rate limit, progress, and stop on a signal.

Per server, one connection: SCAN cursors are followed one after the other (never KEYS); each
batch of keys SCAN returns is a task that sends its two passes (`FactsQuery`) on the same
connection while the next SCAN goes out, at most `inflight` batches at a time, so the server
always has work queued and Python parses one batch while Redis answers the next. Keys SCAN
returns twice (it may, while the server resizes its table) are counted once, up to `DEDUPE_MAX`
keys per server. Cluster masters come from CLUSTER SHARDS (CLUSTER SLOTS before Redis 7) of the
first seed that answers, read by `routing.slotmap`; they are scanned concurrently, each with its
own rate limit.

SIGINT or SIGTERM sets `stop`: no new SCAN is sent, the batches in flight finish, and the report
is partial (`complete: false`). A second signal ends the process at once.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from dataclasses import dataclass, replace

import hiredis

from ..backends.cluster.routing.slotmap import SlotMap
from ..tls import upstream_context
from ..upstream.probe import ask
from .facts import FactsQuery
from .pipe import connect
from .progress import Progress, RateLimit

DEDUPE_MAX = 10_000_000  # keys remembered per server to count a key SCAN returns twice once


@dataclass(frozen=True)
class ScanOptions:
    count: int = 1000  # SCAN COUNT
    match: bytes | None = None
    rate: float | None = None  # keys per second per server
    memory_samples: int = 5  # MEMORY USAGE ... SAMPLES (Redis's default; 0 would read every element)
    string_sample: int = 0  # bytes of each string read for V4 (0: none)
    inflight: int = 4  # batches in flight per server
    timeout: float = 5.0  # connecting


class ServerScan:
    """SCAN of one server, feeding `on_batch(query)` with each batch's completed FactsQuery."""

    def __init__(self, upstream, address, options: ScanOptions, on_batch, stop: asyncio.Event):
        self.upstream = upstream
        self.address = address
        self.options = options
        self.on_batch = on_batch
        self.stop = stop
        self.dbsize = 0
        self.returned = 0  # keys SCAN returned (distinct)
        self.complete = False
        self.error: str | None = None
        self.pipe = None
        self.seen: set[bytes] | None = set()

    async def open(self) -> None:
        self.pipe = await connect(self.upstream, self.address, self.options.timeout)
        size = await self.pipe.call(b"DBSIZE")
        self.dbsize = size if isinstance(size, int) else 0

    async def run(self) -> None:
        options = self.options
        pipe = self.pipe
        limit = RateLimit(options.rate, time.monotonic())
        count = str(limit.scan_count(options.count)).encode()
        tail = (b"COUNT", count) + ((b"MATCH", options.match) if options.match is not None else ())
        slots = asyncio.Semaphore(options.inflight)
        batches: set[asyncio.Task] = set()
        cursor = b"0"
        try:
            while not self.stop.is_set():
                wait = limit.delay(self.returned, time.monotonic())
                if wait > 0:
                    await _sleep_unless(self.stop, wait)
                    if self.stop.is_set():
                        break
                reply = await pipe.call(b"SCAN", cursor, *tail)
                if isinstance(reply, hiredis.ReplyError):
                    raise RuntimeError(f"SCAN refused by {self.address}: {reply}")
                cursor, keys = reply
                keys = self._new(keys)
                if keys:
                    self.returned += len(keys)
                    await slots.acquire()
                    task = asyncio.get_running_loop().create_task(self._batch(keys, slots))
                    batches.add(task)
                    task.add_done_callback(batches.discard)
                if cursor == b"0":
                    self.complete = True
                    break
        except (OSError, RuntimeError, ConnectionError) as exc:
            self.error = str(exc)
        if batches:
            for result in await asyncio.gather(*batches, return_exceptions=True):
                if isinstance(result, Exception) and self.error is None:
                    self.error = str(result)
                    self.complete = False
        pipe.close()

    def _new(self, keys: list[bytes]) -> list[bytes]:
        seen = self.seen
        if seen is None:
            return keys
        fresh = [key for key in keys if key not in seen]
        seen.update(fresh)
        if len(seen) > DEDUPE_MAX:
            self.seen = None
        return fresh

    async def _batch(self, keys: list[bytes], slots: asyncio.Semaphore) -> None:
        try:
            options = self.options
            query = FactsQuery(keys, options.memory_samples, options.string_sample)
            query.read_first(await self.pipe.request(query.first(), FactsQuery.PER_KEY * len(keys)))
            payload = query.second()
            if query.second_count:
                query.read_second(await self.pipe.request(payload, query.second_count))
            self.on_batch(query)
        finally:
            slots.release()

    def summary(self) -> dict:
        return {"address": str(self.address), "dbsize": self.dbsize, "scanned": self.returned,
                "complete": self.complete, **({"error": self.error} if self.error else {})}


async def _sleep_unless(stop: asyncio.Event, seconds: float) -> None:
    try:
        await asyncio.wait_for(stop.wait(), seconds)
    except TimeoutError:
        pass


async def cluster_masters(seeds, timeout: float = 5.0) -> list:
    """The master addresses of the cluster that the first answering seed (an Upstream) knows."""
    problems = []
    for seed in seeds:
        try:
            (shards,) = await ask(seed, [("CLUSTER", "SHARDS")], timeout)
            if isinstance(shards, hiredis.ReplyError):
                (slots,) = await ask(seed, [("CLUSTER", "SLOTS")], timeout)
                if isinstance(slots, hiredis.ReplyError):
                    raise RuntimeError(str(slots))
                slot_map = SlotMap.from_cluster_slots(slots, seed.address)
            else:
                slot_map = SlotMap.from_cluster_shards(shards, seed.address,
                                                       tls=upstream_context(seed.address) is not None)
        except (TimeoutError, OSError, ConnectionError, RuntimeError, ValueError) as exc:
            problems.append(f"{seed.address}: {exc}")
            continue
        masters = list(slot_map.masters())
        if masters:
            return masters
        problems.append(f"{seed.address}: no master owns a slot")
    raise ConnectionError("no cluster seed answered with a topology (" + "; ".join(problems) + ")")


class Scanning:
    """Scans servers with a progress line and signal handling; what the keys become is the
    subclass's (`on_batch`, the progress `_total` and `_line`, `_done` with the seconds taken)."""

    def __init__(self, options: ScanOptions, show=None, tty: bool = False):
        self.options = options
        self.show = show  # show(line, final): the progress line
        self.tty = tty
        self.stop = asyncio.Event()
        self.scans: list[ServerScan] = []
        self.interrupted = False

    def on_batch(self, query) -> None:
        raise NotImplementedError

    def _stopped_itself(self) -> bool:
        """Stopped by its own limit (a sample), not by a signal: a first signal is not a second."""
        return False

    def _total(self, scans) -> int:
        return sum(scan.dbsize for scan in scans)

    def _line(self, progress: Progress, now: float) -> str:
        raise NotImplementedError

    def _done(self, seconds: float) -> None:
        raise NotImplementedError

    def interrupt(self) -> None:
        if self.stop.is_set() and not self._stopped_itself():  # the second signal: stop now, without a report
            os._exit(130)
        self.interrupted = True
        self.stop.set()

    async def run(self, upstream, addresses) -> None:
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, self.interrupt)
        try:
            scans = [ServerScan(upstream, address, self.options, self.on_batch, self.stop)
                     for address in addresses]
            await asyncio.gather(*(scan.open() for scan in scans))
            self.scans = scans  # every server answered: from here on there is a report
            start = time.monotonic()
            progress = Progress(self._total(scans), start, self.tty)
            ticker = loop.create_task(self._tick(progress)) if self.show else None
            await asyncio.gather(*(scan.run() for scan in self.scans))
            if ticker is not None:
                ticker.cancel()
                self.show(self._line(progress, time.monotonic()), True)
            self._done(time.monotonic() - start)
        finally:
            for signum in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(signum)

    async def _tick(self, progress: Progress) -> None:
        while True:
            await asyncio.sleep(min(progress.interval, 0.2))
            now = time.monotonic()
            if progress.due(now):
                self.show(self._line(progress, now), False)


class Audit(Scanning):
    """Scans servers into one report: the glue between ServerScan, the Auditor and the Report."""

    def __init__(self, auditor, report, options: ScanOptions, show=None, tty: bool = False):
        super().__init__(replace(options, string_sample=auditor.sample_bytes), show, tty)
        self.auditor = auditor
        self.report = report

    def on_batch(self, query) -> None:
        classify = self.auditor.classify
        add = self.report.add
        for facts in query.facts:
            add(facts, classify(facts))
        if query.vanished:
            self.report.add_vanished(query.vanished)
        if query.errors:
            self.report.errors.extend(query.errors[:10])

    def _line(self, progress: Progress, now: float) -> str:
        return progress.line(self.report.scanned, now)

    def _done(self, seconds: float) -> None:
        self.report.meta["seconds"] = round(seconds, 3)

    @property
    def complete(self) -> bool:
        return bool(self.scans) and all(scan.complete for scan in self.scans)

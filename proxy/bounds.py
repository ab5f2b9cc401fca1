"""The proxy's bounds over all its clients: `limits.max_memory`, `max_clients` (counted and
logged here, refused by the session) and `client_idle_timeout`.

Memory: what the proxy buffers for a client is its unread replies (the transport's write buffer
and the replies held behind the head of its queue) and its unfinished request (the reader's
bytes). A sweep every TICK seconds adds them up (cheaply skipped while the process's RSS is under
the bound), and a client's unfinished request that grows past BIG_REQUEST is counted at once,
between sweeps, so that clients sending large arguments fast cannot outrun the sweep. Over the
bound, `plan_memory` stops reading the largest holders first, until the others hold at most half
the bound; still over it GRACE seconds later, it disconnects the largest (one per GRACE), logged
and counted. Under three quarters of it, the paused clients are read again.

Idle: a client whose read count has not changed for `client_idle_timeout` seconds is closed, as
Redis's `timeout` closes one; not one with replies owed (a blocking command), streaming
(subscribed, MONITOR) or with a RESP3 client's subscriptions, as Redis exempts those.
"""

from __future__ import annotations

import logging
import os
import time

from . import metrics

log = logging.getLogger("redis_guard.server")

TICK = 0.1  # seconds between memory sweeps
IDLE_TICK = 1.0  # seconds between idle sweeps
GRACE = 1.0  # seconds over the bound, the largest holders paused, before the largest is disconnected
BIG_REQUEST = 1024 * 1024  # an unfinished request past this is counted as it grows
LOG_EVERY = 10.0

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def rss() -> int | None:
    """The process's resident memory in bytes, None where /proc cannot say."""
    try:
        with open("/proc/self/statm", "rb") as handle:
            return int(handle.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return None


def holding(session) -> int:
    """The bytes the proxy buffers for one client: unread replies and its unfinished request."""
    transport = session.transport
    unread = 0
    if transport is not None and not transport.is_closing():
        unread = transport.get_write_buffer_size()
    return unread + session.held_bytes + request_bytes(session.reader)


def request_bytes(reader) -> int:
    """An unfinished request's cost: its bytes, twice where hiredis holds a copy of them too."""
    size = reader._size
    return size * 2 if reader._fast else size


def plan_memory(holdings, limit: int, paused) -> tuple[list, bool, bool]:
    """`holdings`: (bytes, client) pairs. What to do: the clients to pause (largest first, until
    the others hold at most half of `limit`), whether to resume the paused ones (under three
    quarters of it), whether the bound is exceeded (the caller disconnects the largest after
    GRACE)."""
    total = sum(size for size, _ in holdings)
    if total <= limit * 3 // 4:
        return [], bool(paused), False
    if total <= limit:
        return [], False, False
    to_pause = []
    reading = sum(size for size, client in holdings if client not in paused)
    for size, client in sorted(holdings, key=lambda pair: pair[0], reverse=True):
        if reading <= limit // 2:
            break
        if client not in paused:
            to_pause.append(client)
            reading -= size
    return to_pause, False, True


class Bounds:
    """Applies the bounds to the sessions of one Proxy (`proxy.sessions`)."""

    def __init__(self, proxy, limits, clock=time.monotonic):
        self.proxy = proxy
        self.max_memory = limits.max_memory
        self.idle_timeout = limits.client_idle_timeout
        self.clock = clock
        self.paused = set()  # sessions whose reading is paused for memory
        self.over_since = None  # when the total went over max_memory (paused clients not enough yet)
        self.unfinished = {}  # session -> its unfinished request's size, as counted between sweeps
        self.unfinished_total = 0
        self.replies_total = 0  # unread replies at the last sweep
        self.idle = {}  # session -> (its read count, since when unchanged)
        self.next_idle = 0.0
        self.handle = None
        self.refusals = 0
        self.refused_logged = float("-inf")
        self.dropped = 0
        self.dropped_logged = float("-inf")

    def start(self, loop) -> None:
        if self.max_memory or self.idle_timeout:
            self.handle = loop.call_later(TICK, self._tick, loop)

    def stop(self) -> None:
        if self.handle is not None:
            self.handle.cancel()
            self.handle = None

    def _tick(self, loop) -> None:
        try:
            now = self.clock()
            if self.max_memory:
                self.sweep_memory(now)
            if self.idle_timeout and now >= self.next_idle:
                self.next_idle = now + IDLE_TICK
                self.sweep_idle(now)
        except Exception:  # the sweep must go on whatever one session holds
            log.exception("the proxy's bounds sweep failed")
        self.handle = loop.call_later(TICK, self._tick, loop)

    # -- max_clients -----------------------------------------------------------------------

    def refused(self, peer) -> None:
        self.refusals += 1
        now = self.clock()
        if now - self.refused_logged >= LOG_EVERY:
            log.warning("client %s refused: limits.max_clients (%d) connections open; %d refused since the "
                        "last line", _peer(peer), self.proxy.config.limits.max_clients, self.refusals)
            self.refused_logged = now
            self.refusals = 0

    # -- max_memory ------------------------------------------------------------------------

    def request_growing(self, session, size: int) -> None:
        """A client's unfinished request reached `size` bytes (past BIG_REQUEST): over the bound
        with it, act now rather than at the next sweep."""
        if not self.max_memory:
            return
        size = request_bytes(session.reader)
        self.unfinished_total += size - self.unfinished.get(session, 0)
        self.unfinished[session] = size
        if self.unfinished_total + self.replies_total > self.max_memory:
            self.sweep_memory(self.clock(), force=True)

    def sweep_memory(self, now: float, force: bool = False) -> None:
        limit = self.max_memory
        if not force and not self.paused and self.over_since is None:
            resident = rss()
            if resident is not None and resident <= limit:
                self.unfinished.clear()
                self.unfinished_total = self.replies_total = 0
                return
        holdings = []
        replies = unfinished = 0
        self.unfinished.clear()
        for session in self.proxy.sessions:
            size = holding(session)
            request = request_bytes(session.reader)
            unfinished += request
            replies += size - request
            if session.reader._size >= BIG_REQUEST:
                self.unfinished[session] = request
            holdings.append((size, session))
        self.unfinished_total = unfinished
        self.replies_total = replies
        self.paused &= self.proxy.sessions
        to_pause, resume, over = plan_memory(holdings, limit, self.paused)
        for session in to_pause:
            self.paused.add(session)
            metrics.MEMORY_PAUSES.inc()
            session.pause_reading("memory")
        if resume:
            paused, self.paused = self.paused, set()
            for session in paused:
                session.resume_reading("memory")
        if not over:
            self.over_since = None
            return
        if self.over_since is None:
            self.over_since = now
        elif now - self.over_since >= GRACE:
            self.over_since = now
            size, largest = max(holdings, key=lambda pair: pair[0])
            self._disconnect(largest, size, unfinished + replies, now)

    def _disconnect(self, session, size: int, total: int, now: float) -> None:
        metrics.MEMORY_DISCONNECTS.inc()
        self.dropped += 1
        if now - self.dropped_logged >= LOG_EVERY:
            log.warning("client %s disconnected: it held %d bytes, the largest share of the %d the proxy buffers, "
                        "over limits.max_memory (%d); %d such client(s) since the last line",
                        _peer(session.peer), size, total, self.max_memory, self.dropped)
            self.dropped_logged = now
            self.dropped = 0
        self.paused.discard(session)
        self.unfinished.pop(session, None)
        if session.transport is not None:
            session.transport.abort()

    # -- client_idle_timeout ---------------------------------------------------------------

    def sweep_idle(self, now: float) -> None:
        timeout = self.idle_timeout
        seen = {}
        for session in self.proxy.sessions:
            reads = session.reads
            last = self.idle.get(session)
            since = last[1] if last is not None and last[0] == reads else now
            if session.inflight or session.stream is not None or session.pubsub is not None:
                since = now  # blocked, subscribed or streaming: exempt, as in Redis
            seen[session] = (reads, since)
            if now - since >= timeout and session.transport is not None and not session.transport.is_closing():
                metrics.IDLE_CLOSED.inc()
                log.info("client %s closed after %.0f s without a request (limits.client_idle_timeout)",
                         _peer(session.peer), now - since)
                session.transport.close()
        self.idle = seen


def _peer(peer) -> str:
    return f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) and len(peer) >= 2 else str(peer)

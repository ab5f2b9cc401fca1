"""Connections to cluster nodes: redirections are caught before any client sees them.

A `ClusterConnection` is an upstream connection whose routed slots (`RoutedSlot`: a run of a
client's consecutive commands that the router sent by slot; several of them may share one
request, see `send_all`) may be answered `-MOVED`, `-ASK` or `-TRYAGAIN`.
Such a reply must not reach the client: the router sends that one command again where it
belongs, and its reply takes the redirected one's place. Replies are forwarded as bytes exactly
as on a standalone connection; only a chunk in which a top-level error reply may start (its
first byte is `-`, or it holds `\\n-`) is walked one reply at a time, and an error reply cut
across reads is held until it is whole (errors are one short line). A connection that never
connected (the node is down) hands its routed requests back to the router to wait for the
failover rather than failing them: they were never sent.
"""

from __future__ import annotations

import time
from time import perf_counter as clock

from ..monitor import live
from ..resp.replies import ReplyStreamError
from ..routing.redirect import ClusterError, classify_error
from ..upstream.connection import CLOSED, SharedPool, UpstreamConnection, open_connection

RETRIED = (ClusterError.MOVED, ClusterError.ASK, ClusterError.TRYAGAIN)
READONLY = (("READONLY",),)


class RoutedSlot:
    """Replies a client awaits for `count` commands it sent by slot, which can each be sent
    again: `source` is the client's batch (commands `first`...) or one packed request."""

    __slots__ = ("session", "remaining", "buffered", "buffered_size", "conn", "source", "first",
                 "count", "hash_slot", "attempts", "asking", "started", "sent")

    def __init__(self, session, count: int, conn, source, first: int, hash_slot: int | None):
        self.session = session
        self.remaining = count
        self.count = count
        self.conn = conn
        self.buffered = None
        self.buffered_size = 0
        self.source = source
        self.first = first
        self.hash_slot = hash_slot
        self.attempts = 0
        self.asking = False
        self.started, self.sent = clock(), None  # for the monitor: timing (names come from source)

    def request(self, k: int = 0) -> bytes:
        """The bytes of the k-th command of this run."""
        source = self.source
        if isinstance(source, bytes):
            return source
        at = self.first + k
        return source.span(at, at + 1)

    def requests(self) -> bytes:
        """The bytes of every command of this run, to send (again)."""
        if self.count == 1:
            return self.request(0)
        return self.source.span(self.first, self.first + self.count)

    def fail(self, error: bytes, partial: bool) -> None:
        self.session.slot_failed(self, error, partial)


def cut_run(conn, slot: RoutedSlot, owner) -> tuple[RoutedSlot, list]:
    """`conn` answered the next command of the run `slot` with a redirection: cut the run
    there, as the router will send that one command again elsewhere. Returns the slot that now
    awaits its reply and the new slots to queue right after `slot` in its owner's order (the
    retry, and the rest of the run, which stays first in line on `conn`). When the run had
    answers before it, `slot` keeps just those and is complete."""
    done = slot.count - slot.remaining
    rest = slot.remaining - 1
    tail = RoutedSlot(owner, rest, conn, slot.source, slot.first + done + 1, slot.hash_slot) if rest else None
    if tail is not None:
        conn.pending[0] = tail
    else:
        conn.pending.popleft()
    if done == 0:
        slot.count = slot.remaining = 1
        return slot, [tail] if tail else []
    retry = RoutedSlot(owner, 1, None, slot.source, slot.first + done, slot.hash_slot)
    retry.attempts = slot.attempts
    slot.count = done
    slot.remaining = 0
    return retry, [retry, tail] if tail else [retry]


class ReadBatch:
    """While a cluster connection hands out one read's replies (`active`), client writes wait in
    `dirty` transports; they leave, one write per client, when the read is done."""

    __slots__ = ("active", "dirty")

    def __init__(self):
        self.active = False
        self.dirty = []

    def done(self) -> None:
        self.active = False
        dirty, self.dirty = self.dirty, []
        for transport in dirty:
            transport.flush()


class ClusterConnection(UpstreamConnection):
    __slots__ = ("router", "error_partial", "protocol", "index")

    def __init__(self, loop, address, startup, on_close=None, router=None, place=(2, 0)):
        super().__init__(loop, address, startup, on_close)
        self.router = router
        self.protocol, self.index = place  # its pool's protocol and its index there: where a retry goes
        self.error_partial = None  # the first bytes of an error reply cut across reads

    def data_received(self, data: bytes) -> None:
        live.upstream_read(self, data)
        reading = self.router.reading
        if reading.active:  # not expected: a delivery that reads again; its writes join ours
            self._deliver_replies(data)
            return
        reading.active = True
        try:
            self._deliver_replies(data)
        finally:
            reading.done()

    def _deliver_replies(self, data: bytes) -> None:
        pending = self.pending
        splitter = self.splitter
        scan = splitter.scan
        pos = 0
        size = len(data)
        dash = data.find(b"\n-")  # where an error reply may start, found again once passed
        try:
            while pos < size:
                if not pending:
                    raise ReplyStreamError("reply with no request waiting for it")
                slot = pending[0]
                remaining = slot.remaining
                if remaining < 0:
                    slot.session.deliver(slot, data if pos == 0 else data[pos:], 0)
                    return
                if 0 <= dash < pos:
                    dash = data.find(b"\n-", pos)
                if type(slot) is not RoutedSlot or (
                        self.error_partial is None and data[pos] != 45 and dash < 0):
                    end, done, _pushes = scan(data, pos, remaining)
                    slot.session.deliver(slot, data if pos == 0 and end == size else data[pos:end], done)
                else:
                    starts_error = self.error_partial is not None or (
                        data[pos] == 45 and not splitter.in_reply)
                    end, done, _pushes = scan(data, pos, 1)
                    if not starts_error:
                        slot.session.deliver(slot, data[pos:end], done)
                    else:
                        error = (self.error_partial or b"") + data[pos:end]
                        if not done:
                            self.error_partial = error
                            return
                        self.error_partial = None
                        if classify_error(error) in RETRIED:
                            self.router.redirected(self, slot, error)
                            pos = end
                            continue
                        slot.session.deliver(slot, error, 1)
                if self.state is CLOSED:
                    return
                pos = end
                if slot.remaining == 0 and pending and pending[0] is slot:
                    pending.popleft()
        except ReplyStreamError as exc:
            self.fail(f"unreadable reply stream: {exc}")

    def fail(self, reason: str, connecting: bool = False, refused: bool = False, reply: bytes | None = None) -> None:
        if self.state is CLOSED:
            return
        if connecting and self.router is not None:
            # Never connected: nothing was sent, so the routed requests wait for a new owner.
            kept = [slot for slot in self.pending if type(slot) is RoutedSlot]
            self.pending = type(self.pending)(slot for slot in self.pending if type(slot) is not RoutedSlot)
            super().fail(reason, connecting, refused, reply)
            for slot in kept:
                self.router.park(slot)
            return
        super().fail(reason, connecting, refused, reply)


class NodePool(SharedPool):
    """Shared connections to one cluster node; a failure makes the router look again."""

    __slots__ = ("router", "readonly")

    def __init__(self, loop, upstream, protocol: int, size: int, timeout: float, router, readonly=False):
        super().__init__(loop, upstream, 0, protocol, size, timeout)
        self.router = router
        self.readonly = readonly  # connections to a replica, for reads: READONLY first
        self.retry_interval = 0.25

    def get(self, index: int):
        conn = self.connections[index]
        if conn is not None and conn.state is not CLOSED:
            return conn
        if time.monotonic() - self.failed_at < self.retry_interval:
            return None
        conn = open_connection(self.loop, self.upstream, 0, self.protocol, self.timeout, self._closed,
                               cls=ClusterConnection, router=self.router,
                               place=(self.protocol, index), also=READONLY if self.readonly else ())
        self.connections[index] = conn
        return conn

    def _closed(self, conn) -> None:
        super()._closed(conn)
        if conn.close_reason != "closed by the proxy":
            self.router.node_failed(self.upstream.address, conn.close_reason)

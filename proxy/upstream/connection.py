"""One connection to an upstream Redis: coalesced writes, in-order reply routing, flow control.

Theory of operation: callers `send(data, slot)` where `slot` is whoever expects the next
`slot.remaining` replies (a client's run of requests, or the connection's own start-up
commands). Everything sent in one event-loop tick leaves in one write, because system calls,
not parsing, decide a Python proxy's speed. Replies come back in the order requests were
written, so the pending deque's head is always the owner of the next reply bytes; the reply
splitter only says where replies end, and the bytes go on untouched. A slot with remaining < 0
is raw: from then on every byte belongs to it (pub/sub, MONITOR, CLIENT REPLY: streams that do
not pair replies with requests). Nothing is ever retried: when the connection fails, each
request in flight gets an error reply.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time

import hiredis

from .. import errors, metrics
from ..monitor import health, live
from ..resp.replies import ReplySplitter, ReplyStreamError

log = logging.getLogger("redis_guard.upstream")

CONNECTING, READY, CLOSED = "connecting", "ready", "closed"
CLOSED_BY_PROXY = "closed by the proxy"


class StartupSlot:
    """Swallows the replies to the proxy's own AUTH/SELECT/HELLO and fails the connection on an
    error, so a client never sees them and never runs with the wrong credentials or database."""

    __slots__ = ("connection", "remaining", "received", "session")

    def __init__(self, connection: "UpstreamConnection", count: int):
        self.connection = connection
        self.remaining = count
        self.received = []
        self.session = self  # receives its own deliveries, like a client session would

    def deliver(self, slot, data: bytes, done: int) -> None:
        self.received.append(data)
        self.remaining -= done
        if self.remaining == 0:
            reader = hiredis.Reader()
            reader.feed(b"".join(self.received))
            self.received = []
            while (reply := reader.gets()) is not False:
                if isinstance(reply, hiredis.ReplyError):
                    # Requests queued behind it get the server's own refusal (NOAUTH, ...).
                    self.connection.fail(
                        f"start-up command refused: {reply}", refused=True,
                        reply=errors.resp_error(str(reply)),
                    )
                    return
            self.connection.on_ready()

    def fail(self, error: bytes, partial: bool) -> None:
        pass


class HiddenSlot:
    """Replies the client must not see: state the proxy restores or adds on its behalf."""

    __slots__ = ("remaining", "session")

    def __init__(self, count: int):
        self.remaining = count
        self.session = self

    def deliver(self, slot, data: bytes, done: int) -> None:
        self.remaining -= done

    def fail(self, error: bytes, partial: bool) -> None:
        pass


class UpstreamConnection(asyncio.Protocol):
    __slots__ = (
        "address", "label", "loop", "transport", "state", "pending", "splitter", "out",
        "flush_scheduled", "write_paused", "blocked_sessions", "read_paused_by", "on_close",
        "close_reason", "refused", "startup",
    )

    def __init__(self, loop, address, startup: list[tuple], on_close=None):
        self.address = address
        self.label = str(address)
        self.loop = loop
        self.transport = None
        self.state = CONNECTING
        self.pending = collections.deque()
        self.splitter = ReplySplitter()
        self.out = []
        self.flush_scheduled = False
        self.write_paused = False
        self.blocked_sessions = set()  # sessions whose reading waits on our write buffer
        self.read_paused_by = set()  # sessions too slow to take our replies
        self.on_close = on_close
        self.close_reason = ""
        self.refused = False
        self.startup = b""
        if startup:
            # Client requests wait until these succeed: after a failed SELECT they would run in
            # the wrong database.
            self.startup = b"".join(hiredis.pack_command(cmd) for cmd in startup)
            self.pending.append(StartupSlot(self, len(startup)))

    # -- life cycle -------------------------------------------------------------------------

    def connect(self, timeout: float) -> None:
        self.loop.create_task(self._connect(timeout))

    async def _connect(self, timeout: float) -> None:
        try:
            await asyncio.wait_for(
                self.loop.create_connection(lambda: self, self.address.host, self.address.port),
                timeout,
            )
        except asyncio.TimeoutError:
            self.fail(f"connect timed out after {timeout:g}s", connecting=True)
        except OSError as exc:
            self.fail(exc.strerror or str(exc), connecting=True)

    def connection_made(self, transport) -> None:
        if self.state is CLOSED:  # failed (timed out) while the connect was finishing
            transport.abort()
            return
        self.transport = transport
        sock = transport.get_extra_info("socket")
        if sock is not None:
            try:
                import socket

                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass
        if self.startup:
            transport.write(self.startup)
        else:
            self.on_ready()

    def on_ready(self) -> None:
        if self.state is CONNECTING:
            self.state = READY
            health.of(self.label).connected()  # monitor hook
            self._flush()

    def connection_lost(self, exc) -> None:
        self.fail(str(exc) if exc else "closed by the server")

    @property
    def closed(self) -> bool:
        return self.state is CLOSED

    def close(self) -> None:
        self.fail(CLOSED_BY_PROXY)

    def fail(self, reason: str, connecting: bool = False, refused: bool = False, reply: bytes | None = None) -> None:
        if self.state is CLOSED:
            return
        self.state = CLOSED
        self.refused = refused
        self.close_reason = reason
        if self.transport is not None:
            self.transport.abort()
        if reason != CLOSED_BY_PROXY:
            health.lost(self, reason)  # monitor hook
        pending, self.pending = self.pending, collections.deque()
        self.out = []
        if reason != CLOSED_BY_PROXY:
            metrics.UPSTREAM_ERRORS.inc()
        if pending:
            log.warning("upstream %s: %s (%d request runs in flight)", self.label, reason, len(pending))
        if reply is not None:
            error = reply
        elif connecting or refused:
            error = errors.upstream_unavailable(self.label, reason)
        else:
            error = errors.upstream_lost(self.label, reason)
        partial = self.splitter.in_reply
        for slot in pending:
            slot.fail(error, partial)
            partial = False
        self._release_blocked()
        self.read_paused_by.clear()
        if self.on_close is not None:
            self.on_close(self)

    # -- writing ----------------------------------------------------------------------------

    def send(self, data: bytes, slot) -> None:
        """Queue a request; `slot` is None for requests on a raw stream (no reply pairing)."""
        pending = self.pending
        if not pending and not self.out and self.state is READY:
            # Nothing in flight: the connection is idle, so there is nothing to batch with and
            # waiting for the end of the tick would only add latency.
            if slot is not None:
                pending.append(slot)
            self.transport.write(data)
            return
        if slot is not None:
            pending.append(slot)
        self.out.append(data)
        if not self.flush_scheduled:
            self.flush_scheduled = True
            self.loop.call_soon(self._flush)

    def send_all(self, data: bytes, slots) -> None:
        """Queue one request whose replies go to several slots, in their order."""
        self.send(data, None)
        self.pending.extend(slots)  # before any reply: replies are read on a later loop turn

    def _flush(self) -> None:
        self.flush_scheduled = False
        out = self.out
        if not out or self.state is not READY:
            return
        self.out = []
        self.transport.write(out[0] if len(out) == 1 else b"".join(out))

    def pause_writing(self) -> None:
        self.write_paused = True

    def resume_writing(self) -> None:
        self.write_paused = False
        self._release_blocked()

    def _release_blocked(self) -> None:
        blocked, self.blocked_sessions = self.blocked_sessions, set()
        for session in blocked:
            session.upstream_writable()

    # -- reading ----------------------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        live.upstream_read(self, data)  # monitor hook
        pending = self.pending
        scan = self.splitter.scan
        pos = 0
        size = len(data)
        try:
            while pos < size:
                if not pending:
                    raise ReplyStreamError("reply with no request waiting for it")
                slot = pending[0]
                if slot.remaining < 0:
                    slot.session.deliver(slot, data if pos == 0 else data[pos:], 0)
                    return
                end, done, _pushes = scan(data, pos, slot.remaining)
                slot.session.deliver(slot, data if pos == 0 and end == size else data[pos:end], done)
                if self.state is CLOSED:
                    return
                pos = end
                if slot.remaining == 0 and pending and pending[0] is slot:
                    pending.popleft()
        except ReplyStreamError as exc:
            self.fail(f"unreadable reply stream: {exc}")

    def pause_for(self, session) -> None:
        """A client is too slow to take the replies we hold for it: stop reading upstream."""
        if not self.read_paused_by and self.transport is not None and self.state is not CLOSED:
            self.transport.pause_reading()
        self.read_paused_by.add(session)

    def resume_for(self, session) -> None:
        self.read_paused_by.discard(session)
        if not self.read_paused_by and self.transport is not None and self.state is not CLOSED:
            self.transport.resume_reading()


class SharedPool:
    """Shared connections for one (database, protocol) pair. Clients are spread over them and
    stick to one, so a client's requests run in the order it sent them."""

    __slots__ = ("loop", "upstream", "db", "protocol", "connections", "next_index", "timeout",
                 "failed_at", "failed_reason", "retry_interval")

    def __init__(self, loop, upstream, db: int, protocol: int, size: int, timeout: float):
        self.loop = loop
        self.upstream = upstream
        self.db = db
        self.protocol = protocol
        self.connections: list[UpstreamConnection | None] = [None] * size
        self.next_index = 0
        self.timeout = timeout
        self.failed_at = -1e9
        self.failed_reason = ""
        self.retry_interval = 0.1

    def assign(self) -> int:
        index = self.next_index
        self.next_index = (index + 1) % len(self.connections)
        return index

    def get(self, index: int) -> UpstreamConnection | None:
        """The live connection at index, reconnecting if it closed; None while the upstream is
        known to be down (a failed connect less than retry_interval ago): callers answer with an
        error instead of queueing behind a connect that will fail."""
        conn = self.connections[index]
        if conn is not None and conn.state is not CLOSED:
            return conn
        if time.monotonic() - self.failed_at < self.retry_interval:
            return None
        conn = open_connection(self.loop, self.upstream, self.db, self.protocol, self.timeout, self._closed)
        self.connections[index] = conn
        return conn

    def _closed(self, conn: UpstreamConnection) -> None:
        if conn.transport is None or conn.refused:
            self.failed_at = time.monotonic()
            self.failed_reason = conn.close_reason

    def close(self) -> None:
        for conn in self.connections:
            if conn is not None:
                conn.close()


def startup_commands(upstream, db: int, protocol: int) -> list[tuple]:
    commands = []
    if protocol == 3:
        hello = ["HELLO", "3"]
        if upstream.password is not None:
            hello += ["AUTH", upstream.username or "default", upstream.password]
        commands.append(tuple(hello))
    elif upstream.password is not None:
        if upstream.username:
            commands.append(("AUTH", upstream.username, upstream.password))
        else:
            commands.append(("AUTH", upstream.password))
    if db:
        commands.append(("SELECT", str(db)))
    return commands


def open_connection(loop, upstream, db: int, protocol: int, timeout: float, on_close=None,
                    cls=UpstreamConnection, also=(), **extra) -> UpstreamConnection:
    """A connection that runs the proxy's own start-up commands (AUTH, HELLO, SELECT, then
    `also`) before any client request."""
    conn = cls(loop, upstream.address, startup_commands(upstream, db, protocol) + list(also), on_close, **extra)
    conn.connect(timeout)
    return conn

"""One connection to an upstream Redis: coalesced writes, in-order reply routing, flow control.

Theory of operation: callers `send(data, pending)` where `pending` is whoever expects the next
`pending.remaining` replies (a client's run of requests, or the connection's own start-up
commands). Everything sent in one event-loop tick leaves in one write, because system calls,
not parsing, decide a Python proxy's speed; one callback at the end of the tick writes out
every connection of the loop that has requests waiting (`EndOfTick`). Replies come back in the
order requests were written, so the pending deque's head is always the owner of the next reply
bytes; the reply splitter only says where replies end, and the bytes go on untouched. A Pending
with remaining < 0 is raw: from then on every byte belongs to it (pub/sub, MONITOR, CLIENT
REPLY: streams that do not pair replies with requests). Nothing is ever retried: when the
connection fails, each entry still owed replies is told so (`Pending.fail`). Every write, a
request here as much as a reply to a client, goes through the connection's writer (`writers`):
compiled, one `send` while the transport holds nothing, the transport's own `write` otherwise.

A connection knows its `role` (shared, own, control, spare: who may send on it) and, once
started, the client id and address Redis knows it by, so that a client's CLIENT KILL can never
reach the proxy's own connections.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import socket
import weakref
from time import perf_counter as stamp_clock

import hiredis

from .. import compiled, errors, metrics
from ..monitor import health, live
from ..monitor.live import read_from, written
from ..pending import Pending, Receiver, hidden, queue_append, queue_head, queue_popleft
from ..resp.pushes import PushCutter
from ..resp.replies import ReplySplitter, ReplyStreamError
from ..tls import upstream_ssl
from .deadline import allowance

log = logging.getLogger("redis_guard.upstream")

_compiled_write = compiled.load("proxy.upstream._compiled_write")
try:
    from uvloop.loop import TCPTransport, UnixTransport
    DIRECT_WRITES = (TCPTransport, UnixTransport)  # whose descriptor outlives connection_lost
except ImportError:  # pragma: no cover - uvloop is a dependency
    DIRECT_WRITES = ()

CONNECTING, READY, CLOSED = "connecting", "ready", "closed"
CLOSED_BY_PROXY = "closed by the proxy"

SHARED, OWN, CONTROL, SPARE = "shared", "own", "control", "spare"  # roles


class LoopSettings:
    """What every upstream connection of one event loop shares, set by its Proxy: the
    `request_timeout` (0: none) and the keeper of the policy's ACL users (`upstream_acl.py`), which
    applies them again when a restarted server lost them (None: connections run as the URL's user)."""

    __slots__ = ("request_timeout", "keeper")

    def __init__(self):
        self.request_timeout = 0.0
        self.keeper = None


_SETTINGS = weakref.WeakKeyDictionary()  # an event loop's LoopSettings
_NO_LOOP = LoopSettings()


def loop_settings(loop) -> LoopSettings:
    if loop is None:
        return _NO_LOOP
    settings = _SETTINGS.get(loop)
    if settings is None:
        settings = _SETTINGS[loop] = LoopSettings()
    return settings


class EndOfTick:
    """One event loop's end of tick: the connections whose requests wait for it, in the order they
    queued their first, and the one callback that writes them all out (`flush`), where a callback
    each would cost a uvloop handle and a bound method each (a cluster's masters are written to in
    the same tick). While any wait, a write to an idle connection waits too, so writes leave in
    the order they came."""

    __slots__ = compiled.declared_fields(__file__, "EndOfTick")

    def __init__(self):
        self.waiting = []
        self.callback = self.flush  # (made once: scheduling it makes no bound method)

    def flush(self) -> None:
        """Each waiting connection's queued requests leave in one write (one that a write's
        failure makes wait meanwhile goes in this pass too, after them)."""
        waiting = self.waiting
        at = 0
        try:
            while at < len(waiting):
                conn = waiting[at]
                at += 1
                conn.flush_scheduled = False
                conn._write_out()
        finally:
            del waiting[:at]
            if waiting:  # a write raised (a bug: the loop logs it): the others still leave, next
                waiting[0].loop.call_soon(self.callback)


_TICKS = weakref.WeakKeyDictionary()  # an event loop's EndOfTick


def end_of_tick(loop) -> EndOfTick:
    """The EndOfTick of `loop`, shared by its connections (a connection without a loop, a test's,
    has one of its own)."""
    if loop is None:
        return EndOfTick()
    tick = _TICKS.get(loop)
    if tick is None:
        tick = _TICKS[loop] = EndOfTick()
    return tick


class StartupPending(Pending):
    """Swallows the replies to the proxy's own AUTH/SELECT/HELLO and fails the connection on an
    error, so a client never sees them and never runs with the wrong credentials or database.
    A Pending (every entry of a connection's queue is one), not a client's run: no `sent`, no
    `count` for the monitor."""

    __slots__ = ("connection", "received")

    def __init__(self, connection: UpstreamConnection, count: int):
        Pending.__init__(self, self, count)  # receives its own deliveries, like a client session would
        self.connection = connection
        self.received = []
        self.count = 0

    def deliver(self, pending, data: bytes, done: int) -> None:
        self.received.append(data)
        self.remaining -= done
        if self.remaining == 0:
            reader = hiredis.Reader()
            reader.feed(b"".join(self.received))
            self.received = []
            replies = []
            while (reply := reader.gets()) is not False:
                replies.append(reply)
            for reply in replies:
                if isinstance(reply, hiredis.ReplyError):
                    if str(reply).startswith("WRONGPASS") and self.connection.users_lost():
                        return  # the server restarted without the policy's users: they are applied again
                    if str(reply).startswith("BUSY"):
                        # A script is running: SELECT is refused until it ends or is killed.
                        self.connection.restart_later()
                        return
                    # Requests queued behind it get the server's own refusal (NOAUTH, ...).
                    self.connection.fail(
                        f"start-up command refused: {reply}", refused=True,
                        reply=errors.resp_error(str(reply)),
                    )
                    return
            self.connection.on_ready()

    def fail(self, error: bytes, partial: bool) -> None:
        pass


def writers(transport):
    """(writer, write): the compiled `DirectWriter` of this connection or None, and the function
    that writes to it: the writer's `write`, straight to the socket while the transport holds
    nothing (uvloop's write path was a large share of a GET's instructions), else the
    transport's own `write`. Every write must go through it; the compiled callers call the
    writer's `write` in C."""
    writer = direct_writer_of(transport)
    return writer, (writer.write if writer is not None else transport.write)


def direct_writer_of(transport):
    """The compiled `DirectWriter` of `transport`, or None: not built, another loop's transport,
    or no socket."""
    if _compiled_write is not None and type(transport) in DIRECT_WRITES:
        sock = transport.get_extra_info("socket")
        fd = sock.fileno() if sock is not None else -1
        if fd >= 0:
            return _compiled_write.DirectWriter(fd, transport.write, transport.is_closing,
                                                transport.get_write_buffer_size)
    return None


def no_delay(transport) -> None:
    """Small requests and replies leave at once (Nagle's algorithm would hold them)."""
    sock = transport.get_extra_info("socket")
    if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass


class Question(Receiver):
    """Receives the replies to the proxy's own commands (`UpstreamConnection.ask`), parsed."""

    __slots__ = ("future", "chunks")

    def __init__(self, future):
        self.future = future
        self.chunks = []

    def deliver(self, pending, data: bytes, done: int) -> None:
        self.chunks.append(data)
        pending.remaining -= done
        if pending.remaining == 0 and not self.future.done():
            reader = hiredis.Reader()
            reader.feed(b"".join(self.chunks))
            replies = []
            while (reply := reader.gets()) is not False:
                replies.append(reply)
            self.future.set_result(replies)

    def pending_failed(self, pending, error: bytes, partial: bool) -> None:
        pending.remaining = 0
        if not self.future.done():
            self.future.set_exception(ConnectionError(error.decode("utf-8", "replace").strip()))


class UpstreamConnection:
    __slots__ = compiled.declared_fields(__file__, "UpstreamConnection")

    def __init__(self, loop, address, startup: list[tuple], on_close=None):
        self.address = address
        self.label = str(address)
        self.loop = loop
        self.transport = None
        self.write = None  # the transport's write, or a DirectWriter's (connection_made)
        self.writer = None  # the DirectWriter, when there is one: the hot path calls it (compiled: in C)
        self.state = CONNECTING
        self.pending = collections.deque()
        self.splitter = ReplySplitter()
        self.out = []
        self.flush_scheduled = False  # (it waits in its loop's EndOfTick)
        self.tick = end_of_tick(loop)
        self.write_paused = False
        self.blocked_sessions = set()  # sessions whose reading waits on our write buffer
        self.read_paused_by = set()  # sessions too slow to take our replies (own connections only)
        self.on_close = on_close
        self.close_reason = ""
        self.refused = False
        self.startup = b""
        self.role = SHARED
        # ip:port as Redis shows this connection (CLIENT LIST addr=): how CLIENT KILL knows the
        # proxy's own (no CLIENT ID at start-up, which MONITOR and LATENCY would show).
        self.sockname = None
        self.db = 0  # the database and protocol it was started in
        self.protocol = 2
        self.upstream = None  # the Upstream (address and credentials) it was opened with
        self.owner = None  # the session it is lent or pinned to: told when the connection fails
        self.refusal = None  # the server's reply when it refused the start-up (NOAUTH...)
        self.close_asked = False  # its client's QUIT or protocol error went to the server: it closes
        # CLIENT TRACKING: the session its pushes go to, apart from the replies (`_deliver_pushes`)
        self.pushes_to = None
        self.pushes = None  # their PushCutter
        # For the monitor (`monitor/live.py`), one per write: (clock when its first request was
        # queued, the last pending entry it carries). Timing per write, not per request.
        self.stamps = collections.deque()
        self.stamp = 0.0
        # request_timeout (`_check_deadline`): one timer while requests are in flight, not one each
        self.request_timeout = 0.0
        self.deadline_timer = None
        self.deadline_mark = None  # (head entry, its replies owed) when progress was last seen
        self.deadline_since = 0.0
        self.timeout_error = None  # the reply its waiting clients get when it timed out
        self.relogged = False  # its start-up was refused once for users a restart lost (`users_lost`)
        if startup:
            # Client requests wait until these succeed: after a failed SELECT they would run in
            # the wrong database.
            self.startup = b"".join(hiredis.pack_command(cmd) for cmd in startup)
            self.pending.append(StartupPending(self, len(startup)))

    # -- life cycle -------------------------------------------------------------------------

    def connect(self, timeout: float) -> None:
        self.loop.create_task(self._connect(timeout))

    async def _connect(self, timeout: float) -> None:
        try:
            await asyncio.wait_for(
                self.loop.create_connection(lambda: self, self.address.host, self.address.port,
                                            **upstream_ssl(self.address)),
                timeout,
            )
        except TimeoutError:
            self.fail(f"connect timed out after {timeout:g}s", connecting=True)
        except OSError as exc:
            self.fail(exc.strerror or str(exc), connecting=True)

    def connection_made(self, transport) -> None:
        if self.state is CLOSED:  # failed (timed out) while the connect was finishing
            transport.abort()
            return
        self.transport = transport
        self.writer, self.write = writers(transport)  # every write to it: the writer keeps their order
        no_delay(transport)
        name = transport.get_extra_info("sockname")
        if isinstance(name, tuple) and len(name) >= 2:
            host = name[0]
            self.sockname = (f"[{host}]:{name[1]}" if ":" in host else f"{host}:{name[1]}").encode()
        if self.startup:
            if self.request_timeout and self.deadline_timer is None:
                self._arm()  # a server that accepts but never answers (stopped) holds requests here
            self.write(self.startup)
        else:
            self.on_ready()

    def restart_later(self, delay: float = 0.05) -> None:
        """Run the start-up commands again soon (a busy script refused them); requests wait."""
        self.loop.call_later(delay, self._restart)

    def _restart(self) -> None:
        if self.state is CONNECTING and self.transport is not None:
            self.pending.appendleft(StartupPending(self, self.startup_count))
            self.write(self.startup)

    def users_lost(self) -> bool:
        """The server refused the start-up's AUTH as one of the policy's ACL users (WRONGPASS):
        a restart without them. True when the keeper applies them again, the start-up then runs
        again and the requests queued behind it wait (never sent: nothing runs twice); once per
        connection, so a password that is wrong for good is refused as before."""
        keeper = loop_settings(self.loop).keeper
        upstream = self.upstream
        if keeper is None or self.relogged or upstream is None or not keeper.owns(upstream.username):
            return False
        self.relogged = True

        def applied(future) -> None:
            if self.state is not CONNECTING:
                return
            if not future.cancelled() and future.exception() is None and future.result():
                self._restart()
            else:
                self.fail("start-up command refused: the policy's ACL users could not be applied again",
                          refused=True, reply=errors.WRONGPASS)

        keeper.reapply(self.label).add_done_callback(applied)
        return True

    @property
    def startup_count(self) -> int:
        reader = hiredis.Reader()
        reader.feed(self.startup)
        count = 0
        while reader.gets() is not False:
            count += 1
        return count

    def on_ready(self) -> None:
        if self.state is CONNECTING:
            self.state = READY
            health.of(self.label).connected(proven=bool(self.startup))
            self._write_out()

    def connection_lost(self, exc) -> None:
        if exc is None and self.close_asked:
            self.fail(CLOSED_BY_PROXY)  # as asked: no failure to count or log
        else:
            self.fail(str(exc) if exc else "closed by the server")

    def eof_received(self):
        return None  # asyncio.Protocol's: the transport closes, connection_lost follows

    @property
    def closed(self) -> bool:
        return self.state is CLOSED

    def close(self) -> None:
        self.fail(CLOSED_BY_PROXY)

    def half_close(self) -> None:
        """No more requests, ever (its client is gone: `session/gone.py`): the requests queued
        go out, then the write side closes. The server reads EOF and frees its client as it
        frees a client that half-closes (a blocked command ends with nothing popped); what it
        wrote before still arrives, then it closes. Never lent again (`idle`)."""
        if self.state is CLOSED:
            return
        self.close_asked = True
        transport = self.transport
        if self.state is not READY or transport is None or not transport.can_write_eof():
            self.close()  # (the client's requests are not out yet: none of them runs)
            return
        self._write_out()
        transport.write_eof()

    def fail(self, reason: str, connecting: bool = False, refused: bool = False, reply: bytes | None = None) -> None:
        if self.state is CLOSED:
            return
        self.state = CLOSED
        self.refused = refused
        self.refusal = reply
        self.close_reason = reason
        if self.transport is not None:
            self.transport.abort()
        if self.deadline_timer is not None:
            self.deadline_timer.cancel()
            self.deadline_timer = None
        self.deadline_mark = None
        if reason != CLOSED_BY_PROXY:
            health.lost(self, reason)
        pending, self.pending = self.pending, collections.deque()
        self.out = []
        self.stamps.clear()
        if reason != CLOSED_BY_PROXY:
            metrics.UPSTREAM_ERRORS.inc()
        if pending and reason != CLOSED_BY_PROXY and not refused and self.timeout_error is None:
            # (a refusal or a timeout is logged once for the upstream, by `health`: not once a connection)
            log.warning("upstream %s: %s (%d request runs in flight)", self.label, reason, len(pending))
        if reply is not None:
            # The server refused the proxy's start-up (NOAUTH...): that is its answer to every
            # request queued behind it, as it would be to a client of its own.
            for entry in pending:
                if entry.remaining > 0:
                    entry.receiver.deliver(entry, reply * entry.remaining, entry.remaining)
                elif entry.remaining < 0:
                    entry.receiver.deliver(entry, reply, 0)
                    entry.fail(reply, False)
        elif self.timeout_error is not None:
            # request_timeout: the waiting requests are answered with the error that names it (a
            # client's connection stays usable), but for a reply already cut (part of it is out)
            # and streams, which end as for a lost connection.
            error = self.timeout_error
            partial = self.splitter.in_reply
            for entry in pending:
                if partial or entry.remaining < 0:
                    entry.fail(error, partial)
                elif entry.remaining > 0:
                    entry.receiver.deliver(entry, error * entry.remaining, entry.remaining)
                partial = False
        else:
            error = errors.upstream_unavailable(self.label, reason) if connecting or refused else \
                errors.upstream_lost(self.label, reason)
            partial = self.splitter.in_reply
            for entry in pending:
                entry.fail(error, partial)
                partial = False
        self._release_blocked()
        self.read_paused_by.clear()
        if self.on_close is not None:
            self.on_close(self)
        owner, self.owner = self.owner, None
        if owner is not None:
            owner.own_closed(self)

    # -- writing ----------------------------------------------------------------------------

    def send(self, data: bytes, pending) -> None:
        """Queue a request; `pending` is None for requests on a raw stream (no reply pairing)."""
        queue = self.pending
        if self.deadline_timer is None and self.request_timeout:
            self._arm()  # the first request in flight: the connection's one timer, while it is busy
        if not queue and not self.out and self.state is READY and not self.tick.waiting:
            # Nothing in flight: the connection is idle, so there is nothing to batch with and
            # waiting for the end of the tick would only add latency. (Not while another
            # connection's writes wait for the end of this tick: what came first leaves first,
            # so another client's PUBLISH cannot overtake an earlier UNSUBSCRIBE.)
            if pending is not None:
                queue_append(queue, pending)
                queue_append(self.stamps, (stamp_clock(), pending))
            written(data)
            self._to_upstream(data)
            return
        if pending is not None:
            queue_append(queue, pending)
        self.out.append(data)
        if not self.flush_scheduled:
            self.stamp = stamp_clock()
            self.flush_scheduled = True
            tick = self.tick
            if not tick.waiting:
                self.loop.call_soon(tick.callback)
            tick.waiting.append(self)

    def send_all(self, data: bytes, entries) -> None:
        """Queue one request whose replies go to several entries, in their order."""
        self.send(data, None)
        self.pending.extend(entries)  # before any reply: replies are read on a later loop turn
        if entries and not self.out:  # written at once: stamp it as `send` stamps its entry
            self.stamps.append((stamp_clock(), entries[-1]))

    def send_hidden(self, commands) -> None:
        """Commands whose replies nobody sees (state the proxy restores on a client's behalf)."""
        if commands and self.state is not CLOSED:
            self.send(b"".join(hiredis.pack_command(tuple(cmd)) for cmd in commands), hidden(len(commands)))

    def ask(self, commands) -> asyncio.Future:
        """The proxy's own commands; the future gets their parsed replies (errors as values)."""
        future = self.loop.create_future()
        if self.state is CLOSED:
            future.set_exception(ConnectionError(self.close_reason or "closed"))
            return future
        self.send(b"".join(hiredis.pack_command(tuple(cmd)) for cmd in commands),
                  Pending(Question(future), len(commands), self))
        return future

    def _write_out(self) -> None:
        out = self.out
        if not out or self.state is not READY:
            return
        self.out = []
        pending = self.pending
        if pending:
            self.stamps.append((self.stamp, pending[-1]))
        data = out[0] if len(out) == 1 else b"".join(out)
        written(data, out)
        self._to_upstream(data)

    def _to_upstream(self, data: bytes) -> None:
        """A request write on the hot path: the DirectWriter's `write` (compiled, a C call), else
        the transport's."""
        writer = self.writer
        if writer is not None:
            writer.write(data)
        else:
            self.write(data)

    def restamp(self, entry, replacement) -> None:
        """`entry`, at the head, leaves unanswered (a redirection sends it elsewhere): the
        monitor's stamp of its write now ends with `replacement` (None: with the runs before it,
        all answered)."""
        stamps = self.stamps
        if any(last is entry for _, last in stamps):
            self.stamps = collections.deque((stamp, replacement if last is entry else last) for stamp, last in stamps
                                            if replacement is not None or last is not entry)

    def pause_writing(self) -> None:
        self.write_paused = True

    def resume_writing(self) -> None:
        self.write_paused = False
        self._release_blocked()

    def _release_blocked(self) -> None:
        blocked, self.blocked_sessions = self.blocked_sessions, set()
        for session in blocked:
            session.upstream_writable()

    @property
    def idle(self) -> bool:
        """Nothing in flight or queued: the connection may be lent to another client. (An entry
        whose last reply is being handed out is still at the head of `pending`.)"""
        return not self.out and self.state is not CLOSED and not self.close_asked and \
            all(entry.remaining == 0 for entry in self.pending)

    # -- request_timeout --------------------------------------------------------------------

    def _arm(self) -> None:
        """Watch the requests in flight: one check every quarter of `request_timeout` (at most a
        second) until nothing is in flight."""
        pending = self.pending
        head = pending[0] if pending else None
        self.deadline_mark = (head, head.remaining if head is not None else 0)
        self.deadline_since = self.loop.time()
        self.deadline_timer = self.loop.call_later(self._check_every(), self._check_deadline)

    def _check_every(self) -> float:
        return max(0.05, min(self.request_timeout / 4, 1.0))

    def _check_deadline(self) -> None:
        """The oldest request in flight has had no reply for `request_timeout` (plus what the
        blocking commands among its run's unanswered ones may wait by design; forever for a
        timeout of 0): the connection is closed, its waiting clients told, the upstream marked
        down. A reply to the head (its entry answered, or one more of its replies) is progress:
        the wait is counted from the check that saw it."""
        self.deadline_timer = None
        if self.state is CLOSED or not self.request_timeout:
            return
        pending = self.pending
        if not pending and not self.out:
            self.deadline_mark = None
            return  # idle: the next request arms it again
        head = pending[0] if pending else None
        if head is not None and head.remaining < 0:
            self.deadline_mark = None
            return  # a stream (pub/sub, MONITOR): nothing is owed
        now = self.loop.time()
        mark = (head, head.remaining if head is not None else 0)
        if self.deadline_mark is None or mark[0] is not self.deadline_mark[0] or mark[1] != self.deadline_mark[1]:
            self.deadline_mark = mark
            self.deadline_since = now
        else:
            waited = now - self.deadline_since
            limit = self.request_timeout
            if waited >= limit and head is not None:
                extra = allowance(getattr(head, "sent", None), getattr(head, "count", 0), head.remaining)
                if extra is None:
                    limit = waited + 3600.0  # it blocks until a value comes: never cut short
                else:
                    limit += extra
            if waited >= limit:
                self.timed_out(waited)
                return
        self.deadline_timer = self.loop.call_later(self._check_every(), self._check_deadline)

    def timed_out(self, waited: float) -> None:
        """No reply within request_timeout: the waiting clients get an error that says so; the
        connection closes (its pool opens another at the next request); counted and logged once
        for the upstream (`health.timed_out`)."""
        reason = f"no reply within request_timeout {self.request_timeout:g}s"
        self.timeout_error = errors.request_timed_out(self.request_timeout)
        health.timed_out(self.label, reason)
        self.fail(reason)

    # -- reading ----------------------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        slow = read_from(self, data, self.stamps, self.pending)
        if self.pushes_to is None:
            self._deliver(data)
        else:
            self._deliver_pushes(data)
        if slow is not None:
            live.slow_runs(self, slow)
        if not self.pending:
            self.stamps.clear()  # nothing in flight: no stamp keeps an answered run (its bytes) alive

    def _deliver(self, data: bytes, catching: bool = False) -> None:
        """A read's replies to the entries waiting for them, each entry's in one piece where the
        read holds them all. `catching`: the read may hold replies a subclass catches before any
        client sees them (a cluster's redirections, backends/cluster/connection.py): each entry
        is offered to `_catch` first. A server's reads never are (one test of a C flag an entry)."""
        queue = self.pending
        splitter = self.splitter  # (compiled: the compiled splitter, its take a C call)
        pos = 0
        size = len(data)
        try:
            while pos < size:
                entry = queue_head(queue)
                if entry is None:
                    raise ReplyStreamError("reply with no request waiting for it")
                done = entry.remaining
                if done < 0:
                    entry.receiver.deliver(entry, data if pos == 0 else data[pos:], 0)
                    return
                if catching:
                    end = self._catch(entry, data, pos)
                    if end >= 0:  # caught: handled up to `end` (the read's size: nothing more to do)
                        pos = end
                        continue
                replies = splitter.take(data, pos, done)  # all the entry's replies, or (some, how many)
                if type(replies) is not bytes:
                    replies, done = replies
                end = pos + len(replies)
                entry.receiver.deliver(entry, replies, done)
                if self.state is CLOSED:
                    return
                pos = end
                if entry.remaining == 0 and queue_head(queue) is entry:
                    queue_popleft(queue)
        except ReplyStreamError as exc:
            self.fail(f"unreadable reply stream: {exc}")

    def _catch(self, entry, data: bytes, pos: int) -> int:
        """`_deliver`'s hook for a catching read, at the replies of `entry` from data[pos:]: where
        the read goes on after the subclass handled them itself (delivered, redirected, held; the
        read's size to stop), or -1: they go to `entry` as a server's do. A server catches none."""
        return -1

    def stream_ended(self, entry) -> None:
        """A stream's entry leaves (its client has no subscription left, session/streamend.py):
        the replies after it are paired with requests again. Nothing else is in flight then."""
        pending = self.pending
        if entry in pending:
            pending.remove(entry)
        self.stamps = collections.deque(stamp for stamp in self.stamps if stamp[1] is not entry)

    def take_pushes(self, session) -> None:
        """From now on, pushes (CLIENT TRACKING's invalidations, which arrive unasked) go to
        `session` apart from the replies, which stay paired with the requests."""
        if self.pushes_to is None:
            self.pushes = PushCutter()
        self.pushes_to = session

    def _deliver_pushes(self, data: bytes) -> None:
        """`_deliver` for a connection that takes pushes: a push cut out wherever a reply could
        start, so an entry's replies go one at a time unless none is among them. A stream's
        entry (remaining < 0) takes every byte, pushes too, as they come."""
        queue = self.pending
        take = self.splitter.take
        cutter = self.pushes
        pos = 0
        size = len(data)
        try:
            while pos < size:
                entry = queue[0] if queue else None
                if entry is not None and entry.remaining < 0:
                    entry.receiver.deliver(entry, data if pos == 0 else data[pos:], 0)
                    return
                if cutter.in_push or (data[pos] == 62 and not self.splitter.in_reply):  # '>'
                    pos, push = cutter.cut(data, pos)
                    if push is not None:
                        self.pushes_to.pushed(push)
                        if self.state is CLOSED:
                            return
                        if queue and queue[0].remaining == 0:
                            queue_popleft(queue)  # (a subscription command ends with its last push)
                    continue
                if entry is None:
                    raise ReplyStreamError("reply with no request waiting for it")
                want = entry.remaining
                replies = None
                if want > 1 and not self.splitter.in_reply:
                    # A pipeline's replies in one piece when no push is among them (a scan of
                    # its own: the splitter is idle here, and is idle after them too).
                    end, done, pushes = ReplySplitter().scan(data, pos, want)
                    if done == want and not pushes:
                        replies = data if pos == 0 and end == size else data[pos:end]
                if replies is None:
                    done = 1 if want else 0
                    replies = take(data, pos, done)
                    if type(replies) is not bytes:
                        replies, done = replies
                pos += len(replies)
                entry.receiver.deliver(entry, replies, done)
                if self.state is CLOSED:
                    return
                if entry.remaining == 0 and queue and queue[0] is entry:
                    queue_popleft(queue)
        except ReplyStreamError as exc:
            self.fail(f"unreadable reply stream: {exc}")

    def pause_for(self, session) -> None:
        """The one client this connection serves is too slow to take our replies: stop reading
        upstream. Never done on a shared connection: other clients would wait."""
        if not self.read_paused_by and self.transport is not None and self.state is not CLOSED:
            self.transport.pause_reading()
        self.read_paused_by.add(session)

    def resume_for(self, session) -> None:
        self.read_paused_by.discard(session)
        if not self.read_paused_by and self.transport is not None and self.state is not CLOSED:
            self.transport.resume_reading()


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
                    cls=UpstreamConnection, also=(), role: str = SHARED, **extra) -> UpstreamConnection:
    """A connection that runs the proxy's own start-up commands (AUTH, HELLO, SELECT, then
    `also`) before any client request; a PING too while the upstream is known to hang (it timed
    out): such a connection is ready, and the upstream up, only once the server answers."""
    also = list(also)
    if health.hung(str(upstream.address)):
        also.append(("PING",))
    conn = cls(loop, upstream.address, startup_commands(upstream, db, protocol) + also, on_close, **extra)
    conn.role = role
    conn.db = db
    conn.protocol = protocol
    conn.upstream = upstream
    conn.request_timeout = loop_settings(loop).request_timeout
    conn.connect(timeout)
    return conn

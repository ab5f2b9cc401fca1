"""CLIENT TRACKING over every master: a tracking client in front of a cluster gets the
invalidations of every key it read, whatever master holds it, as from one Redis server.

A cluster client's tracking lives on its stream, a connection of its own on one master
(handlers.stream). Its commands on keys of another master go between two barriers on the stream,
whose master answers -MOVED, and then to the owner (sides.py `Elsewhere`, `Checked`): on the
shared connections for an ordinary stream, but for a tracking client on a connection of its own
on that master (an `Aside`, one per master at most, opened at the first such command; on every
master at once for BCAST), with the same CLIENT TRACKING options as the stream: Redis tracks the
reads there, and NOLOOP, OPTIN (the client's CLIENT CACHING is repeated before the command it
concerns) and OPTOUT hold. The reply fills the command's place in the stream exactly as the
shared connections' did. The invalidations:

* a RESP3 client without REDIRECT: the aside is RESP3 and takes its pushes apart from its
  replies (`UpstreamConnection.take_pushes`); each `invalidate` push goes into the client's
  stream as it comes (`Session.answer_locally`, ordered by a barrier: after the replies before);
* REDIRECT to a session of the same client (redirects.py): the aside names a sink of its own on
  its master (`redirects.Sink`, for the same target), which hands them to the target as Redis
  writes them; the aside holds the client's commands until the sink's id is known;
* a RESP2 client without REDIRECT: Redis sends it none (RESP2 has no pushes), so no aside.

What the stream's master accepts is mirrored: the tracking command is watched on the stream
(`Watch`); once accepted, every aside gets it (OFF too), and an aside opened later starts with
the options accepted last. A command already routed to an aside is always followed by its next
ones (never on a shared connection beside it: a pipeline keeps its order on a master).

Safety: an aside that fails (its node down, CLIENT KILL) or is closed because its node is no
longer a master gives the client the invalidation of everything (the null of a flush, as Redis
sends at FLUSHALL): what it read there is no longer tracked, so nothing stays cached stale. The
next command on a key of that master opens another. The asides close with the stream (its end,
RESET, the client gone). Memory: while the client does not read, the proxy stops reading its
asides (and their sinks), as for the stream itself.
"""

from __future__ import annotations

import logging

import hiredis

from ... import errors
from ...pending import Pending, Receiver, hidden
from ...session import streamend
from ...session.states import CLOSED, OPEN, STREAMING, WAITING
from ...session.streamorder import StreamOrder
from ...session.tracking import REDIRECT
from . import redirects
from .connection import RoutedPending
from .routing.redirect import parse_redirect
from .sides import close_of_session, of_session

log = logging.getLogger("redis_guard.cluster")

INVALIDATE = redirects.INVALIDATE
ASKING = b"*1\r\n$6\r\nASKING\r\n"
MAX_BACKLOG = 100_000  # commands held while an aside's sink starts (beyond: the command fails)


def is_tracking(args) -> bool:
    return len(args) > 2 and args[0].lower() == b"client" and args[1].lower() == b"tracking"


def tracker_of(session, create: bool = True):
    return of_session(session.backend.tracked, session, Tracker, create)


def mirror(session, args, accepted: bool) -> None:
    """The client's tracking options, as its stream's master took them, on its other masters too."""
    tracker_of(session).observed(args, accepted)


def close_tracker(session) -> None:
    close_of_session(session.backend.tracked, session)


def _live(session) -> bool:
    life = session.state.life
    return life is OPEN or life is WAITING


def _options(args) -> tuple:
    """(on, bcast, redirect value) of a CLIENT TRACKING command."""
    on = args[2].lower() == b"on"
    bcast = False
    i = 3
    while i < len(args):
        word = args[i].lower()
        if word == b"bcast":
            bcast = True
        i += 2 if word in (REDIRECT, b"prefix") else 1
    return on, bcast, redirects.first_redirect(args)


class Tracker:
    """One tracking client's asides (by master) and the tracking options its stream accepted."""

    __slots__ = ("session", "backend", "asides", "args", "target", "target_id", "bcast")

    def __init__(self, session):
        self.session = session
        self.backend = session.backend
        self.asides = {}  # node -> Aside
        self.args = None  # the CLIENT TRACKING command accepted last (None: off)
        self.target = None  # the session a REDIRECT named, and its id
        self.target_id = None
        self.bcast = False

    @property
    def main(self):
        stream = self.session.stream
        return stream.conn.address if stream is not None else None

    def wanted(self) -> bool:
        """Are invalidations delivered at all (RESP3, or a REDIRECT)?"""
        return self.args is not None and (self.session.protocol == 3 or self.target is not None)

    def observed(self, args, ok: bool) -> None:
        """A tracking command on the stream was answered (`ok`: accepted)."""
        if not ok or not _live(self.session):
            return
        on, bcast, value = _options(args)
        self.args = args if on else None
        self.bcast = on and bcast
        client_id = redirects._id(value) if on and value is not None else None
        self.target = redirects.target_of(self.session, client_id) if client_id is not None else None
        self.target_id = client_id if self.target is not None else None
        for aside in list(self.asides.values()):
            aside.apply()
        if self.bcast:
            self.reconcile()

    def reconcile(self) -> None:
        """The map's masters now: an aside on a node no longer a master goes (the client told to
        forget everything); BCAST gets one on every master."""
        if not _live(self.session) or self.session.stream is None:
            return
        masters = self.backend.router.slotmap.masters()
        for node in list(self.asides):
            if node not in masters:
                self.asides[node].lost()
        if self.bcast and self.wanted():
            main = self.main
            for node in masters:
                if node != main and node not in self.asides:
                    self.open(node)

    def open(self, node):
        session = self.session
        conn = self.backend.lease(session, node=node)
        if conn is None:
            log.info("client %s: no connection to %s for its tracking", session.describe(), node)
            return None
        aside = self.asides[node] = Aside(self, conn)
        aside.apply()
        return aside

    def send(self, sink, slot: int, data: bytes, redirected: int = 0, caching=None, node=None,
             asking: bool = False) -> bool:
        """`data` (one command) to its master's aside, its reply to `sink` (a Receiver that takes a
        Pending of one reply). False: the client has no aside there and needs none (the shared
        connections serve it)."""
        if node is None:
            node = self.backend.router.slotmap.master_for_slot(slot)
        aside = self.asides.get(node)
        if aside is not None and aside.conn.protocol != self.session.protocol:
            aside.lost()  # (HELLO on the stream changed the client's protocol: its replies in the new one)
            aside = None
        if aside is None or aside.closed:
            if not self.wanted() or node is None or node == self.main:
                return False
            aside = self.open(node)
            if aside is None:
                sink.pending_failed(Pending(sink, 1), errors.upstream_unavailable(str(node), "no connection"),
                                    False)
                return True
        reply = AsideReply(self, sink, slot, data, redirected, caching)
        if caching is not None:  # (CLIENT CACHING concerns the next command: repeated here, unseen)
            aside.send(hiredis.pack_command((b"CLIENT", b"CACHING", caching)), hidden(1))
        if asking:
            aside.send(ASKING, hidden(1))
        aside.send(data, Pending(reply, 1, aside.conn))
        return True

    def flushed(self) -> None:
        """What the client read on an aside is no longer tracked: the invalidation of everything
        (the null Redis sends at FLUSHALL), to the client or its REDIRECT target."""
        session = self.session
        if self.args is None or not _live(session):
            return
        null = b"_\r\n" if session.protocol == 3 else b"$-1\r\n"
        target = self.target
        if target is None:
            if session.protocol == 3:
                session.answer_locally(INVALIDATE + null)
            return
        if target.state.life is CLOSED or not _live(target):
            return
        out = redirects.for_target(target, null)
        if out is not None:
            target.answer_locally(out)

    def close(self) -> None:
        asides, self.asides = list(self.asides.values()), {}
        for aside in asides:
            aside.close()


class SinkOwner:
    """What a `redirects.Sink` reports to: here, one aside (its sink for the client's target)."""

    __slots__ = ("aside", "session")

    def __init__(self, aside):
        self.aside = aside
        self.session = aside.tracker.session

    def ready(self, sink) -> None:
        self.aside.sink_ready(sink)

    def lost(self, sink) -> None:
        self.aside.sink_lost(sink)

    def forget(self, sink) -> None:
        pass


class Aside(Receiver):
    """A connection of the tracking client's own on one other master, tracking as the stream."""

    __slots__ = ("tracker", "conn", "node", "sink", "pending_sink", "backlog", "closed", "used")

    def __init__(self, tracker: Tracker, conn):
        self.tracker = tracker
        self.conn = conn
        self.node = conn.address
        self.sink = None  # redirects.Sink named by the tracking command sent last, if any
        self.pending_sink = None  # one starting (its id not known yet)
        self.backlog = None  # commands held while a sink starts: [(data, pending)]
        self.closed = False
        self.used = False  # a command of the client's ran here (something may be cached)
        conn.owner = self
        if tracker.session.protocol == 3:
            conn.take_pushes(self)

    def send(self, data: bytes, pending) -> None:
        if self.backlog is not None:
            if len(self.backlog) >= MAX_BACKLOG:
                pending.fail(errors.upstream_unavailable(str(self.node), "too many commands waiting"), False)
                return
            self.backlog.append((data, pending))
            return
        self.used = True
        self.conn.send(data, pending)

    def apply(self) -> None:
        """The stream's tracking options, accepted last, here too."""
        if self.closed:
            return
        tracker = self.tracker
        args = tracker.args
        starting = self.pending_sink
        if starting is not None:  # (superseded before its id came)
            self.pending_sink = None
            starting.close()
        if args is None or tracker.target is None:
            self._tracking([b"CLIENT", b"TRACKING", b"OFF"] if args is None else list(args), None)
            self._flush()
            return
        sink = self.sink
        if sink is not None and sink.target is tracker.target and not sink.closed and sink.server_id is not None:
            self._tracking(redirects.named(args, sink.server_id), sink)
            return
        conn = tracker.backend.spare_pool(self.node, 3, tracker.backend.identity(tracker.session)).take()
        if conn is None:
            self.lost()
            return
        new = redirects.Sink(SinkOwner(self), tracker.target, tracker.target_id, conn)
        if self.backlog is None:
            self.backlog = []
        self.pending_sink = new
        new.start()

    def sink_ready(self, sink) -> None:
        if self.closed or sink is not self.pending_sink:
            sink.close()
            return
        self.pending_sink = None
        if sink.failed:
            sink.close()
            self.lost()
            return
        self._tracking(redirects.named(self.tracker.args, sink.server_id), sink)
        self._flush()

    def _flush(self) -> None:
        """The commands held while a sink started, in their order, after the tracking command."""
        backlog, self.backlog = self.backlog, None
        for data, pending in backlog or ():
            self.send(data, pending)

    def sink_lost(self, sink) -> None:
        if sink is self.sink or sink is self.pending_sink:
            self.lost()

    def _tracking(self, args, sink) -> None:
        old, self.sink = self.sink, sink
        self.conn.send(hiredis.pack_command(tuple(args)), Pending(Applied(self, old if old is not sink else None,
                                                                          args[2].lower() == b"off"), 1, self.conn))

    def pushed(self, push: bytes) -> None:
        """A RESP3 aside's push: an invalidation for the client itself (no REDIRECT)."""
        if self.closed or not push.startswith(INVALIDATE):
            return
        session = self.tracker.session
        if _live(session) and session.stream is not None and self.tracker.target is None:
            session.answer_locally(push)
            redirects.behind(session, self.conn)

    def deliver(self, pending, data: bytes, done: int) -> None:  # (own_closed's owner interface only)
        pending.remaining -= done

    def pending_failed(self, pending, error: bytes, partial: bool) -> None:
        pending.remaining = 0

    def own_closed(self, conn) -> None:
        if not self.closed:
            self.lost()

    def lost(self) -> None:
        """Failed, or its node no longer a master: dropped, the client told to forget what it
        read here; the next command on that master's keys opens another."""
        if self.closed:
            return
        tracker = self.tracker
        if tracker.asides.get(self.node) is self:
            del tracker.asides[self.node]
        used = self.used
        self.close()
        if used:
            tracker.flushed()
        tracker.backend.router.request_refresh()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        backlog, self.backlog = self.backlog, None
        for _data, pending in backlog or ():
            pending.fail(errors.upstream_lost(str(self.node), "its tracking connection closed"), False)
        for sink in (self.sink, self.pending_sink):
            if sink is not None and not sink.closed:
                sink.close()
        self.sink = self.pending_sink = None
        conn = self.conn
        conn.owner = None
        session = self.tracker.session
        session.forget_upstream(conn)
        conn.close()


class Applied(Receiver):
    """The reply to a tracking command mirrored on an aside: once Redis took it, the sink named
    before is drained and closed (every invalidation redirected there came before); refused (the
    stream's master accepted the same command), the aside is dropped, the client told to forget."""

    __slots__ = ("aside", "old", "off")

    def __init__(self, aside, old, off: bool):
        self.aside = aside
        self.old = old
        self.off = off

    def deliver(self, pending, data: bytes, done: int) -> None:
        pending.remaining -= done
        if not done:
            return
        if self.old is not None:
            self.old.drain()
        if data[:1] == b"-":
            log.info("client %s: CLIENT TRACKING refused on %s: %r", self.aside.tracker.session.describe(),
                     self.aside.node, data[:200])
            self.aside.lost()

    def pending_failed(self, pending, error: bytes, partial: bool) -> None:
        pending.remaining = 0


class AsideReply(Receiver):
    """A command's reply on an aside, for its place in the stream: a -MOVED or -ASK (the slot
    moved, or migrates) sends it to the owner's aside instead."""

    __slots__ = ("tracker", "sink", "slot", "data", "redirected", "caching", "chunks")

    def __init__(self, tracker, sink, slot, data, redirected, caching):
        self.tracker = tracker
        self.sink = sink
        self.slot = slot
        self.data = data
        self.redirected = redirected
        self.caching = caching
        self.chunks = []

    def deliver(self, pending, data: bytes, done: int) -> None:
        pending.remaining -= done
        self.chunks.append(data)
        if not done:
            return
        reply = b"".join(self.chunks)
        self.chunks = []
        tracker = self.tracker
        router = tracker.backend.router
        if reply.startswith((b"-MOVED ", b"-ASK ")) and self.redirected < router.max_redirects:
            moved = parse_redirect(reply)
            if moved is not None:
                node = moved.address(pending.conn.address)
                if not moved.ask:
                    router.moved(moved.slot, node)
                if tracker.send(self.sink, self.slot, self.data, self.redirected + 1, self.caching,
                                None if not moved.ask else node, moved.ask):
                    return
                # (moved to the stream's own master: read on the shared connections, as before)
                session = tracker.session
                router_of = tracker.backend.router_of(session)
                router_of.send(RoutedPending(self.sink, 1, None, self.data, 0, self.slot),
                               session.protocol, session.spread)
                return
        self.sink.deliver(Pending(self.sink, 1), reply, 1)
        session = tracker.session
        if session.write_paused and not pending.conn.closed:
            session.hold_upstream(pending.conn)

    def pending_failed(self, pending, error: bytes, partial: bool) -> None:
        pending.remaining = 0
        self.sink.pending_failed(Pending(self.sink, 1), error, partial)


class Watch:
    """The watcher of a CLIENT TRACKING on the stream (`StreamOrder.watched`): accepted or not."""

    __slots__ = ("session", "args")

    def __init__(self, session, args):
        self.session = session
        self.args = args

    def observe(self, shown: bytes) -> None:
        tracker = tracker_of(self.session, False)
        if tracker is not None:
            tracker.observed(self.args, redirects.accepted(shown))


def tracking(session, batch, index: int, lend, node_for) -> int:
    """CLIENT TRACKING without a REDIRECT, outside a transaction (handlers.stream): on the stream
    (which it starts, on a master of the map, if there is none), watched, its options mirrored on
    the asides once the stream's master accepted them."""
    args = batch.commands[index]
    streaming = session.state.lane is STREAMING
    data = batch.span(index, index + 1)
    if streaming:
        streamend.passes(session, args, session.backend.stream_neutral)
        tracker = tracker_of(session)
        if session.replies_unsure:  # (Redis may not answer: taken as accepted)
            session.route.forward(session, batch, index, index + 1)
            tracker.observed(args, True)
            return index + 1
        StreamOrder.of(session, session.stream).watched(data, Watch(session, args))
        return index + 1
    subscriptions = session.pubsub
    if subscriptions is not None:
        if subscriptions.may_be_active:  # (a RESP3 client's subscriptions aside: no stream beside them)
            session.answer_locally(errors.stream_while_subscribed(args))
            return index + 1
        subscriptions.close()
        session.pubsub = None
    if session.inflight:
        return session.wait(batch, index)
    if session.own is None and lend(node_for()) is None:
        return index + 1
    conn = session.own
    stream = session.begin_stream(streamend.AT_RESET)
    tracker = tracker_of(session)
    if session.replies_unsure:  # (Redis may not answer: taken as accepted)
        conn.send(data, stream)
        tracker.observed(args, True)
        return index + 1
    StreamOrder.of(session, stream).watched(data, Watch(session, args), True)
    return index + 1


__all__ = ["is_tracking", "tracker_of", "close_tracker", "Tracker", "tracking"]

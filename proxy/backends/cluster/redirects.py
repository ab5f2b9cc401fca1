"""CLIENT TRACKING ... REDIRECT in front of a cluster: a tracking client's invalidations sent on
to another session of the same client, as one Redis server sends them.

A cluster client's CLIENT ID is the proxy's number for its session (clientinfo.py), and its
tracking lives on its stream, a connection of its own on one master (handlers.stream). A REDIRECT
may name a session of the same client only (session/tracking.py `same_client`): any other id is
sent upstream as an id no client has (`NO_SUCH_ID`), so that Redis answers its own error, in its
order among the command's other errors, and changes nothing (on a shared connection when the
client does not stream: a command that fails leaves no state). For a session of the same client,
the proxy opens a connection of its own on the stream's master (`Sink`, RESP3, one per tracking
client and target), and the command goes upstream naming the sink's server id: Redis sends the
invalidations there, and the sink hands each to the target session as Redis would have written
it to the target (`for_target`): a RESP3 target gets the `invalidate` push, a RESP2 target a
`__redis__:invalidate` message while it is subscribed (a RESP2 subscriber's stream), else
nothing; the payload is Redis's own bytes (its null for a flush is the tracking client's
protocol's, as Redis writes it). When the target is gone, a RESP3 tracking client gets Redis's
`tracking-redir-broken` push with the id it named, for each invalidation, as Redis sends it.

The tracking command goes on the stream between barriers (`StreamOrder.watched`), the client's
next commands waiting for its answer: once Redis accepted it, the sink named before (if another)
is drained (a PING: every invalidation Redis redirected there came before its PONG) and closed.
A sink never carries anything but pushes of one tracking client for one target, so nothing can
reach another client's replies. Memory: a few sinks per tracking client (`MAX_SINKS`), the
target's unread bytes bounded by its `client_output_buffer` (`Session.pushing_behind`, which stops
reading the sink while the target does not read). The sinks close with the stream (its end,
RESET, the client gone).
"""

from __future__ import annotations

import logging
import re

import hiredis

from ... import errors
from ...pending import Pending, Receiver
from ...session import streamend
from ...session.behaviour import strict_int
from ...session.states import CLOSED, OPEN, STREAM_END, STREAMING, WAITING
from ...session.streamorder import Rewrite, StreamOrder
from ...session.tracking import REDIRECT, naming_nobody, redirects, same_client
from .sides import close_of_session, items, of_session

log = logging.getLogger("redis_guard.cluster")

CLIENT_ID = b"*2\r\n$6\r\nCLIENT\r\n$2\r\nID\r\n"
PING = b"*1\r\n$4\r\nPING\r\n"
INVALIDATE = b">2\r\n$10\r\ninvalidate\r\n"  # an invalidation push, up to its payload
MESSAGE = b"*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n"  # a RESP2 subscriber's, up to it
SINK = "tracking redirect"  # what a client waits for while its sink starts (`Session.wait`)
MAX_SINKS = 8  # per tracking client: current, one starting, those left by replies off


def target_of(session, client_id: int):
    """The open session of the same client whose CLIENT ID is `client_id`, or None."""
    who = same_client(session)
    for other in session.proxy.sessions:
        extra = other.extra
        if (getattr(extra, "id", None) == client_id and other.backend is session.backend
                and other.state.life is not CLOSED and same_client(other) == who):
            return other
    return None


def _id(value):
    """A REDIRECT value as Redis reads it (a signed 64-bit integer), or None (Redis refuses it)."""
    number = strict_int(value) if value is not None else None
    return number if number is not None and -(1 << 63) <= number < (1 << 63) else None


def nobody(args) -> list:
    """`args` with every REDIRECT id made to name nobody (`NO_SUCH_ID`): Redis answers its own
    error for the first, in its place among the others; a value that is no id stays, for Redis's
    error for it."""
    return naming_nobody(args, {value for value in redirects(args) if _id(value) is not None})


def first_redirect(args):
    """The value of the first REDIRECT (the only one Redis reads: it refuses a second), or None."""
    values = redirects(args)
    return values[0] if values else None


def named(args, server_id: int) -> list:
    """`args` with the first REDIRECT naming `server_id` (the others nobody: Redis refuses them
    before reading their value)."""
    out = naming_nobody(args)
    i = 3
    while i + 1 < len(out):
        word = out[i].lower()
        if word == REDIRECT:
            out[i + 1] = b"%d" % server_id
            break
        i += 2 if word in (REDIRECT, b"prefix") else 1
    return out


def for_target(target, payload: bytes) -> bytes | None:
    """What Redis writes to a redirect target for one invalidation (tracking.c
    sendTrackingMessage): a push in RESP3; in RESP2 a `__redis__:invalidate` message while the
    target is subscribed to anything; else nothing."""
    if target.protocol == 3:
        return INVALIDATE + payload
    sides = target.backend.sides.get(target)
    if target.stream is not None and sides is not None and sides.subscriber:
        return MESSAGE + payload
    return None


def accepted(shown: bytes) -> bool:
    """Does what the stream showed of the command hold its +OK (among invalidations or messages)?"""
    reader = hiredis.Reader()
    reader.feed(shown)
    try:
        while (value := reader.gets()) is not False:
            if value == b"OK":  # (a simple string; an error is no bytes, a message or push a list)
                return True
    except hiredis.ProtocolError:
        pass
    return False


def broken(client_id: int) -> bytes:
    return b">2\r\n$21\r\ntracking-redir-broken\r\n:%d\r\n" % client_id


def _live(session) -> bool:
    life = session.state.life
    return life is OPEN or life is WAITING


def behind(session, conn) -> None:
    """After a push from `conn` handed to `session`: over the output limit, disconnect; behind
    its reads, read no more of `conn`. A streaming session's pushes wait for a barrier's answer
    (counted as held, a round trip's worth): only its transport's pause, which its resume undoes,
    holds `conn` then (held on the count alone, nothing would let it go again)."""
    if session.stream is None:
        session.pushing_behind(conn)
    elif session.held_bytes > session.output_limit:
        session.overflow()
    elif session.write_paused and not conn.closed:
        session.hold_upstream(conn)


class Sink(Receiver):
    """A connection of the proxy's on one master that one tracking client's invalidations are
    redirected to upstream, for one target session."""

    __slots__ = ("sinks", "target", "target_id", "conn", "node", "server_id", "failed", "closed", "reply")

    def __init__(self, sinks, target, target_id: int, conn):
        self.sinks = sinks
        self.target = target
        self.target_id = target_id
        self.conn = conn
        self.node = conn.address
        self.server_id = None  # its CLIENT ID upstream, once answered
        self.failed = False
        self.closed = False
        self.reply = b""  # the reply in progress (CLIENT ID's, then PING's when drained)

    def start(self) -> None:
        conn = self.conn
        conn.owner = self
        conn.take_pushes(self)
        conn.send(CLIENT_ID, Pending(self, 1, conn))

    def deliver(self, pending, data: bytes, done: int) -> None:
        self.reply += data
        if not done:
            return
        reply, self.reply = self.reply, b""
        if self.server_id is None:
            self.server_id = strict_int(reply[1:-2]) if reply[:1] == b":" else None
            if self.server_id is None:
                log.info("tracking redirect: CLIENT ID on %s answered %r", self.node, reply[:200])
                self.failed = True
            self.sinks.ready(self)
        else:  # the PING after its last use: every invalidation redirected here came before
            self.close()

    def pending_failed(self, pending, error: bytes, partial: bool) -> None:
        self.own_closed(self.conn)

    def own_closed(self, conn) -> None:
        if not self.closed:
            self.failed = self.closed = True
            self.sinks.lost(self)

    def pushed(self, push: bytes) -> None:
        if self.closed or not push.startswith(INVALIDATE):
            return
        tracker = self.sinks.session
        target = self.target
        if target.state.life is CLOSED:
            if tracker.protocol == 3 and _live(tracker):
                tracker.answer_locally(broken(self.target_id))
                behind(tracker, self.conn)
            return
        if not _live(target):
            return  # (after its QUIT's +OK or RESET's: nothing more)
        out = for_target(target, push[len(INVALIDATE):])
        if out is not None:
            target.answer_locally(out)
            behind(target, self.conn)

    def drain(self) -> None:
        """No longer named upstream: closed once what Redis sent here before is in."""
        if not self.closed and not self.conn.closed:
            self.conn.send(PING, Pending(self, 1, self.conn))
        else:
            self.close()

    def close(self) -> None:
        self.closed = True
        self.sinks.forget(self)
        conn = self.conn
        conn.owner = None
        self.target.forget_upstream(conn)
        self.sinks.session.forget_upstream(conn)
        conn.close()


class Sinks:
    """One tracking client's sinks: the one Redis redirects to as far as the proxy knows
    (`current`), the one for a command not answered yet (`next`), those a command sent while
    replies were off may have named (`unsure`), and those draining."""

    __slots__ = ("session", "current", "next", "unsure", "draining")

    def __init__(self, session):
        self.session = session
        self.current = None
        self.next = None
        self.unsure = []
        self.draining = []

    def all(self) -> list:
        return [sink for sink in (self.current, self.next, *self.unsure, *self.draining) if sink is not None]

    def usable(self, target, node):
        """The sink for `target` on `node`, if any: one that failed to start is given once (the
        command waiting for it then fails), never opened again in a loop."""
        for sink in (self.current, self.next, *self.unsure):
            if sink is not None and sink.target is target and sink.node == node and (
                    not sink.closed or sink.server_id is None):
                if sink.closed:
                    self.forget(sink)
                return sink
        return None

    def ready(self, sink) -> None:
        session = self.session
        if session.waiting_for is SINK:
            session.loop.call_soon(session.resume_dispatch)

    def lost(self, sink) -> None:
        if sink is not self.next or sink.server_id is not None:
            self.forget(sink)
        self.ready(sink)  # (one that failed to start stays `next`, failed: the command waiting fails)

    def forget(self, sink) -> None:
        if self.current is sink:
            self.current = None
        if self.next is sink:
            self.next = None
        if sink in self.unsure:
            self.unsure.remove(sink)
        if sink in self.draining:
            self.draining.remove(sink)

    def answered(self, sink, ok: bool, off: bool) -> None:
        """The tracking command naming `sink` was answered (`ok`: accepted; `off`: it was OFF)."""
        if self.next is sink:
            self.next = None
        if not ok:
            if sink is not self.current and sink not in self.unsure:
                self._drain(sink)
            return
        old, self.current = self.current, (None if off else sink)
        for stale in (old, *self.unsure, None if self.current is sink else sink):
            if stale is not None and stale is not self.current:
                self._drain(stale)
        self.unsure = []

    def _drain(self, sink) -> None:
        self.forget(sink)
        if not sink.closed:
            self.draining.append(sink)
            sink.drain()

    def close(self) -> None:
        for sink in self.all():
            sink.close()


def sinks_of(session, create: bool = True):
    return of_session(session.backend.tracking_sinks, session, Sinks, create)


def close_sinks(session) -> None:
    close_of_session(session.backend.tracking_sinks, session)


class OwnId(Rewrite):
    """CLIENT ID on a client's stream: the master's answer (the id of the stream's connection)
    shown as the proxy's number for the client; anything else (an error, pushes, messages) as
    it is."""

    __slots__ = ("client_id",)

    def __init__(self, client_id: int):
        self.client_id = client_id

    def rewrite(self, shown: bytes) -> bytes:
        out = []
        for item in items(shown):
            if item[:1] == b":" and item.endswith(b"\r\n"):
                item = b":%d\r\n" % self.client_id
            out.append(item)
        return b"".join(out)


REDIRECT_FIELD = re.compile(rb"(\$8\r\nredirect\r\n:)(-?\d+)(\r\n)")


class NamedIds(Rewrite):
    """CLIENT GETREDIR and CLIENT TRACKINGINFO on a tracking client's stream: the id of a sink
    the master redirects to shown as the id of the session the client named."""

    __slots__ = ("session",)

    def __init__(self, session):
        self.session = session

    def rewrite(self, shown: bytes) -> bytes:
        sinks = sinks_of(self.session, False)
        if sinks is None:
            return shown
        names = {sink.server_id: sink.target_id for sink in sinks.all() if sink.server_id is not None}

        def named_id(match) -> bytes:
            number = int(match.group(2))
            return b"%s%d%s" % (match.group(1), names.get(number, number), match.group(3))
        out = []
        for item in items(shown):
            if item[:1] == b":" and item.endswith(b"\r\n"):
                number = strict_int(item[1:-2])
                item = b":%d\r\n" % names.get(number, number) if number is not None else item
            elif item[:1] in (b"*", b"%"):
                item = REDIRECT_FIELD.sub(named_id, item)
            out.append(item)
        return b"".join(out)


class Answer:
    """The watcher of the tracking command on the stream: was it accepted?"""

    __slots__ = ("sinks", "sink", "off", "args", "mirror")

    def __init__(self, sinks, sink, off: bool, args=None, mirror=None):
        self.sinks = sinks
        self.sink = sink
        self.off = off
        self.args = args  # the command as the client sent it (mirrored on the other masters: tracked.py)
        self.mirror = mirror

    def observe(self, shown: bytes) -> None:
        session = self.sinks.session
        ok = accepted(shown)
        self.sinks.answered(self.sink, ok, self.off)
        if self.args is not None and self.mirror is not None:
            self.mirror(session, self.args, ok)
        session.loop.call_soon(session.resume_dispatch)


def tracking(session, batch, index: int, lend, node_for, mirror) -> int:
    """CLIENT TRACKING with a REDIRECT, outside a transaction (handlers.stream). `lend(node)`: a
    connection of the client's own there; `node_for()`: the master a new stream goes to;
    `mirror(session, args, accepted)`: the options, as the stream's master took them, on the
    client's other masters too (tracked.py)."""
    args = batch.commands[index]
    client_id = _id(first_redirect(args))
    target = target_of(session, client_id) if client_id is not None else None
    if target is None:  # (Redis's error: nothing changes, wherever it runs)
        session.route.send(session, args, hiredis.pack_command(tuple(nobody(args))), 1, session)
        return index + 1
    streaming = session.state.lane is STREAMING
    subscriptions = session.pubsub
    if not streaming and subscriptions is not None:
        if subscriptions.may_be_active:  # (a RESP3 client's subscriptions aside: no stream beside them)
            session.answer_locally(errors.stream_while_subscribed(args))
            return index + 1
        subscriptions.close()
        session.pubsub = None
    if not streaming and session.inflight:
        return session.wait(batch, index)
    node = session.stream.conn.address if streaming else (session.own.address if session.own is not None
                                                          else node_for())
    sinks = sinks_of(session)
    sink = sinks.usable(target, node)
    if sink is None:
        if len(sinks.all()) >= MAX_SINKS:
            session.answer_locally(errors.TRACKING_REDIRECT_MANY)
            return index + 1
        backend = session.backend
        conn = backend.spare_pool(node, 3, backend.identity(session)).take()
        if conn is None:
            session.upstream_unavailable(f"no connection to {node}")
            return index + 1
        sink = Sink(sinks, target, client_id, conn)
        if sinks.next is not None:  # (one started for another master, the map changed meanwhile)
            sinks.next.close()
        sinks.next = sink
        sink.start()
    if sink.server_id is None:
        if sink.failed:
            sink.close()
            session.upstream_unavailable(f"no connection to {node} for a tracking redirect")
            return index + 1
        return session.wait(batch, index, SINK)
    data = hiredis.pack_command(tuple(named(args, sink.server_id)))
    off = len(args) > 2 and args[2].lower() == b"off"
    if streaming:
        streamend.passes(session, args, session.backend.stream_neutral)
        if session.replies_unsure:  # (Redis may not answer: whether it took the sink is unknown)
            if sink is sinks.next:
                sinks.next = None
                sinks.unsure.append(sink)
            session.route.send(session, args, data, 1, session)
            mirror(session, args, True)
            return index + 1
        StreamOrder.of(session, session.stream).watched(data, Answer(sinks, sink, off, args, mirror))
        return session.wait(batch, index + 1, STREAM_END)
    if session.own is None and lend(node) is None:
        return index + 1
    # The stream starts with it, on the sink's master (as `streamend.start`, the command rewritten)
    stream = session.begin_stream(streamend.AT_RESET)
    StreamOrder.of(session, stream).watched(data, Answer(sinks, sink, off, args, mirror), True)
    return session.wait(batch, index + 1, STREAM_END)

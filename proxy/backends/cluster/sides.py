"""The other masters' part of a cluster client's stream: MONITOR on every master, a RESP2
subscriber's shard channels on their own masters, and the redirections of the stream's own.

A cluster client's stream (MONITOR, a RESP2 subscriber, CLIENT REPLY OFF...) lives on a connection
of its own on one master, the stream's (`handlers.stream`). Two kinds of stream concern other
masters too, and there each gets a connection aside, lent for the stream (`Sides`, one per
streaming client that has any, closed with the stream, at RESET and with the client):

* MONITOR shows what every master runs: after the stream's own MONITOR, each other master gets one
  on a connection aside (its +OK not shown), and follows the topology: a master that appears (one
  added, a replica promoted) gets one when the proxy's map learns of it, one that is no longer a
  master loses it. A connection aside that fails is opened again at the next topology change.
* A key of the stream's own master whose slot migrates away (-ASK) or moved before the proxy's
  map learnt it (-MOVED): its command is followed to the owner, or gets the refusal one node
  would give there, or a retryable error where it cannot leave the stream (`Checked`).
* A RESP2 subscriber's shard channel lives on its own master (one node would have them all): a
  SSUBSCRIBE or SUNSUBSCRIBE naming a channel of another master goes to a connection aside on that
  master, and a -MOVED (the slot moved, the map did not know yet) sends it to the new owner, never
  to the client. One naming none goes to every master where some are. A master counts only its
  own shard channels, so every confirmation is shown with the client's count over every master,
  as one node would show it (`Tally`).

What a connection aside says goes into the client's stream where the stream's master answers a
barrier (streamorder.py): the stream's server decides the place, always between two of its
replies, so the lines of two masters never cut each other; a confirmation keeps the place of its
command among the client's others (a barrier sent with it, filled when it comes), a message or a
monitor line goes in when it arrives (at most one round trip to the stream's master later), in
the order the connections aside delivered them. The stream's own shard channel commands are
rewritten in place (`StreamOrder.rewritten`) so that their counts include the others'.

Memory stays bounded: while the client does not read (its transport above the high-water mark)
the connections aside are not read either (the servers hold the rest, and apply their
client-output-buffer-limit for monitors and subscribers), nor is the stream's own connection
(Session); what waits for a barrier's answer counts against `client_output_buffer`.
"""

from __future__ import annotations

import collections
import logging

from ... import errors
from ...pending import Pending, Receiver
from ...resp.replies import ReplySplitter, ReplyStreamError
from ...session import streamend
from ...session.behaviour import PASS, SUBCOMMAND
from ...session.states import CLOSED, OPEN, WAITING
from ...session.streamorder import FILTER_END, BarrierEntry, Filter, Resolve, Rewrite, StreamOrder
from ..base import StreamRoute
from .connection import RoutedPending
from .route import Gather, PartSink, gather
from .routing.redirect import parse_redirect

log = logging.getLogger("redis_guard.cluster")

MONITOR = b"*1\r\n$7\r\nMONITOR\r\n"
OK = b"+OK\r\n"
MAIN = "main"  # the stream's own connection, in a Tally
SHARD = frozenset((b"ssubscribe", b"sunsubscribe"))
CONFIRMS = (b"*3\r\n$10\r\nssubscribe\r\n", b"*3\r\n$12\r\nsunsubscribe\r\n")


def of_session(registry: dict, session, make, create: bool = True):
    """A streaming client's entry of one of the backend's registries (its `Sides`, its tracking
    connections, its sinks), made by `make(session)` when missing and `create`."""
    found = registry.get(session)
    if found is None and create:
        found = registry[session] = make(session)
    return found


def close_of_session(registry: dict, session) -> None:
    """The client's stream is over (its end, RESET, the client gone): its entry closes."""
    found = registry.pop(session, None)
    if found is not None:
        found.close()


def sides_of(session, create: bool = True):
    return of_session(session.backend.sides, session, Sides, create)


def close_sides(session) -> None:
    close_of_session(session.backend.sides, session)


def _live(session) -> bool:
    life = session.state.life
    stream = session.stream
    return (life is OPEN or life is WAITING) and stream is not None and not stream.conn.closed


def _behind(session, conn) -> None:
    """The client is not reading (its transport is above the high-water mark): read no more of
    `conn` until it catches up (`Session.resume_writing` lets it go)."""
    if session.write_paused and not conn.closed:
        session.hold_upstream(conn)


def monitoring(session) -> bool:
    """The client's stream began with MONITOR (its lines come from every master)."""
    sides = session.backend.sides.get(session)
    return sides is not None and sides.monitoring


class Sides:
    """One streaming client's connections aside (by master)."""

    __slots__ = ("session", "backend", "main", "monitors", "monitoring", "tally", "shards", "maybe", "main_inflight",
                 "subscriber")

    def __init__(self, session):
        self.session = session
        self.backend = session.backend
        self.main = session.own.address if session.own is not None else None  # the stream's master
        self.monitors = {}  # node -> MonitorSide
        self.monitoring = False
        self.tally = None  # shard channels counted over every master (`Tally`), once any is sent
        self.shards = {}  # node -> ShardSide
        # Where shard channels may be (MAIN, or a node aside) as the client's commands sent so far
        # leave them: a SUNSUBSCRIBE naming none goes there (`on_stream`)
        self.maybe = {}
        self.main_inflight = 0  # shard channel commands on the stream's own connection not shown yet
        self.subscriber = False  # a RESP2 subscriber's stream: another master's key is refused, not run

    # -- MONITOR --------------------------------------------------------------------------------

    def monitor(self) -> None:
        """The stream's master got MONITOR: every other master gets one too."""
        self.monitoring = True
        self.reconcile()

    def reconcile(self) -> None:
        """The masters of the map now: each has a monitor; one that is no longer a master has none."""
        if not self.monitoring or not _live(self.session):
            return
        masters = self.backend.router.slotmap.masters()
        for node in list(self.monitors):
            if node not in masters:
                self.monitors.pop(node).close()
        for node in masters:
            if node != self.main and node not in self.monitors:
                conn = self.backend.lease(self.session, [b"monitor"], node=node)
                if conn is None:
                    log.info("client %s: no connection to %s for MONITOR; retried at the next topology change",
                             self.session.describe(), node)
                    continue
                side = self.monitors[node] = MonitorSide(self, conn)
                conn.send(MONITOR, Pending(side, -1, conn))

    def lost(self, side) -> None:
        """A connection aside failed: forgotten, and the topology looked at again (a failover); a
        monitor is opened again on the masters then, or in a second (killed by a CLIENT KILL)."""
        if self.monitors.get(side.node) is side:
            del self.monitors[side.node]
            self.session.loop.call_later(1.0, self._again)
        if self.shards.get(side.node) is side:
            del self.shards[side.node]
        self.backend.router.request_refresh()

    def _again(self) -> None:
        if sides_of(self.session, False) is self:
            self.reconcile()

    # -- shard channels ---------------------------------------------------------------------

    def shard_tally(self):
        if self.tally is None:
            self.tally = Tally()
        return self.tally

    def shard(self, node):
        side = self.shards.get(node)
        if side is None or side.conn.closed:
            conn = self.backend.lease(self.session, node=node)
            if conn is None:
                return None
            side = self.shards[node] = ShardSide(self, conn)
        return side

    def close(self) -> None:
        sides = [*self.monitors.values(), *self.shards.values()]
        self.monitors = {}
        self.shards = {}
        self.monitoring = False
        for side in sides:
            side.close()


class MonitorSide(Receiver):
    """MONITOR on a master aside: its lines into the client's stream, whole, as they come."""

    __slots__ = ("sides", "conn", "node", "started", "held", "closed")

    def __init__(self, sides: Sides, conn):
        self.sides = sides
        self.conn = conn
        self.node = conn.address
        self.closed = False
        self.started = False  # its +OK was taken (the client saw the stream's own)
        self.held = b""  # a line not whole yet

    def deliver(self, pending, data: bytes, done: int) -> None:
        session = self.sides.session
        if not _live(session):
            return
        data = self.held + data if self.held else data
        if not self.started:
            if len(data) < len(OK) and OK.startswith(data):
                self.held = data
                return
            if not data.startswith(OK):  # (the stream's own MONITOR was refused the same way)
                log.info("client %s: MONITOR refused by %s: %r", session.describe(), self.node, data[:200])
                self.held = b""
                self.close()
                return
            self.started = True
            data = data[len(OK):]
        cut = data.rfind(b"\r\n") + 2  # (a monitor line is one line: Redis quotes what it shows)
        self.held = data[cut:]
        if cut > 1:
            StreamOrder.of(session, session.stream).send(data[:cut])
        _behind(session, self.conn)

    def pending_failed(self, pending, error: bytes, partial: bool) -> None:
        if not self.closed:
            self.closed = True
            self.sides.lost(self)

    def close(self) -> None:
        self.closed = True
        conn = self.conn
        self.sides.session.forget_upstream(conn)
        conn.close()


class Tally(Rewrite):
    """Shard channels by connection (the stream's own: MAIN; one aside: its node), as the
    confirmations shown so far left them; a confirmation is shown with their sum."""

    __slots__ = ("counts",)

    def __init__(self):
        self.counts = {}

    def recount(self, source, shown: bytes) -> bytes:
        out = []
        for item in items(shown):
            if item.startswith(CONFIRMS):
                at = item.rfind(b"\r\n:", 0, len(item) - 2)
                if at > 0:
                    self.counts[source] = int(item[at + 3:-2])
                    item = b"%s\r\n:%d\r\n" % (item[:at], sum(self.counts.values()))
            out.append(item)
        return b"".join(out)


class Recount(Rewrite):
    """The mark of a shard channel command's place: what it makes `source` say, recounted."""

    __slots__ = ("tally", "source")

    def __init__(self, tally: Tally, source):
        self.tally = tally
        self.source = source

    def rewrite(self, shown: bytes) -> bytes:
        return self.tally.recount(self.source, shown)


def items(data: bytes) -> list:
    """The whole replies and pushes of `data`, each as its bytes (the rest, if not whole or not
    RESP, as one more)."""
    out = []
    pos = 0
    try:
        while pos < len(data):
            if data[pos] == 62:  # '>': a push, whose elements are read as that many replies
                line_end = data.find(b"\r\n", pos)
                if line_end < 0:
                    break
                want = int(data[pos + 1:line_end])
                end, done, _pushes = ReplySplitter().scan(data, line_end + 2, want) if want else (line_end + 2, 0, 0)
                if done != want:
                    break
            else:
                end, done, _pushes = ReplySplitter().scan(data, pos, 1)
                if not done:
                    break
            out.append(data[pos:end])
            pos = end
    except (ReplyStreamError, ValueError):
        pass
    if pos < len(data):
        out.append(data[pos:])
    return out


class ShardCommand:
    __slots__ = ("entry", "args", "data", "left", "parts", "redirects")

    def __init__(self, entry, args, data: bytes, left: int, redirects: int):
        self.entry = entry
        self.args = args
        self.data = data
        self.left = left  # confirmations still to come (one per channel named, or per channel left)
        self.parts = []
        self.redirects = redirects


class ShardSide(Receiver):
    """A RESP2 subscriber's shard channels on one master aside: each command's confirmations (or
    error) fill its place in the stream; messages go in as they come."""

    __slots__ = ("sides", "conn", "node", "count", "splitter", "partial", "commands", "stream", "closed")

    def __init__(self, sides: Sides, conn):
        self.sides = sides
        self.conn = conn
        self.closed = False
        self.node = conn.address
        self.count = 0  # this master's shard channels, as its latest confirmation said
        self.splitter = ReplySplitter()
        self.partial = []
        self.commands = collections.deque()
        self.stream = None  # the raw entry its bytes come to, once the first command is sent

    def send(self, command: ShardCommand) -> None:
        self.commands.append(command)
        if self.stream is None:
            self.stream = Pending(self, -1, self.conn)
            self.conn.send(command.data, self.stream)
        else:
            self.conn.send(command.data, None)

    def deliver(self, pending, data: bytes, done: int) -> None:
        session = self.sides.session
        messages = []
        pos = 0
        try:
            while pos < len(data):
                end, whole, _pushes = self.splitter.scan(data, pos, 1)
                self.partial.append(data[pos:end])
                pos = end
                if whole:
                    item = b"".join(self.partial)
                    self.partial = []
                    self._item(item, messages)
        except ReplyStreamError as exc:
            self.conn.fail(f"unreadable reply stream: {exc}")
            return
        if messages and _live(session):
            StreamOrder.of(session, session.stream).send(b"".join(messages))
        _behind(session, self.conn)

    def _item(self, item: bytes, messages: list) -> None:
        commands = self.commands
        head = commands[0] if commands else None
        if head is not None and item[:1] == b"-":
            commands.popleft()
            if item.startswith(b"-MOVED ") and redirect(self.sides, head, item, self.node):
                return
            if _redirection(item):  # (not followed: never a node's address)
                item = errors.slot_moving(head.args, errors.SLOT_MOVING_RETRY)
            _fill(self.sides.session, head.entry, b"".join(head.parts) + item)
        elif head is not None and item.startswith(CONFIRMS):
            at = item.rfind(b"\r\n:", 0, len(item) - 2)
            self.count = int(item[at + 3:-2]) if at > 0 else self.count
            if head.left < 0:  # (one naming none: a confirmation per channel it had, or one for none)
                head.left = 1 if b"\r\n$-1\r\n" in item else self.count + 1
            head.parts.append(item)
            head.left -= 1
            if head.left <= 0:
                commands.popleft()
                if not self.count and not commands:
                    self.sides.maybe[self.node] = False
                _fill(self.sides.session, head.entry, b"".join(head.parts))
        elif item.startswith(CONFIRMS):
            # Unasked: the master dropped a channel whose slot it no longer owns. Shown in its
            # place among the messages, recounted over every master.
            session = self.sides.session
            at = item.rfind(b"\r\n:", 0, len(item) - 2)
            self.count = int(item[at + 3:-2]) if at > 0 else self.count
            if _live(session):
                order = StreamOrder.of(session, session.stream)
                if messages:
                    order.send(b"".join(messages))
                    messages.clear()
                order.send(item, Recount(self.sides.shard_tally(), self.node))
        else:
            messages.append(item)

    def pending_failed(self, pending, error: bytes, partial: bool) -> None:
        """The shard channels of this master are gone: as when a subscriber's server goes away,
        the client's connection closes (after the places still owed, left empty)."""
        if self.closed:
            return
        self.closed = True
        self._drop_places()
        self.sides.lost(self)
        session = self.sides.session
        if session.state.life is not CLOSED:
            session.input_ended = True
            session.close_after_replies()

    def _drop_places(self) -> None:
        commands, self.commands = self.commands, collections.deque()
        for command in commands:
            _fill(self.sides.session, command.entry, b"")

    def close(self) -> None:
        self.closed = True
        self._drop_places()
        conn = self.conn
        self.sides.session.forget_upstream(conn)
        conn.close()


def _fill(session, entry, reply: bytes) -> None:
    if entry.remaining:
        entry.receiver.deliver(entry, reply, 1)


# -- the client's shard channel commands on a RESP2 stream -----------------------------------------

def handles(session, args) -> bool:
    """SSUBSCRIBE/SUNSUBSCRIBE of a RESP2 client, replies on, outside a transaction: sent to the
    channel's master (`shard_command`), not to the stream's, whoever that is."""
    return (args[0].lower() in SHARD and session.protocol == 2 and not session.replies_unsure
            and not session.state.in_transaction)


def start_stream(session, batch, index: int) -> int:
    """The stream starts with a shard channel command on the channel's master (the connection
    lent for it): its confirmations recounted from the first, with the shard channels of the
    other masters to come (`Tally`). Never ends but at RESET (streamend.py)."""
    stream = session.begin_stream(streamend.AT_RESET)
    sides = sides_of(session)
    args = batch.commands[index]
    data = batch.span(index, index + 1)
    sides.subscriber = True
    sides.maybe[MAIN] = args[0].lower() == b"ssubscribe"
    sides.main_inflight += 1
    StreamOrder.of(session, stream).rewritten(data, MainRecount(sides, args, data), True)
    return index + 1


def on_stream(session, batch, index: int, routed) -> int:
    """A shard channel command on the client's RESP2 stream: on the stream's own connection
    where its channel's master is the stream's, else aside on that master; one naming no channel
    to every master that has some (or the stream's, which answers that none is)."""
    args = batch.commands[index]
    if session.stream_ends == streamend.UNSUBSCRIBED:
        session.stream_ends = streamend.AT_RESET  # (a shard channel keeps the stream: streamend.py)
    sides = sides_of(session)
    data = batch.span(index, index + 1)
    if type(routed) is int:
        node = session.backend.router.slotmap.master_for_slot(routed)
        _to_node(session, sides, node, args, data, 0)
        return index + 1
    maybe = sides.maybe
    nodes = [node for node, side in sides.shards.items() if maybe.get(node) and not side.conn.closed]
    if maybe.get(MAIN) or not nodes:
        nodes.insert(0, sides.main)
    for node in nodes:
        _to_node(session, sides, node, args, data, 0)
    return index + 1


def _to_node(session, sides: Sides, node, args, data: bytes, redirects: int) -> None:
    order = StreamOrder.of(session, session.stream)
    tally = sides.shard_tally()
    main = node is None or node == sides.main
    subscribing = args[0].lower() == b"ssubscribe"
    if subscribing or len(args) == 1:
        sides.maybe[MAIN if main else node] = subscribing
    if main:
        sides.main_inflight += 1
        order.rewritten(data, MainRecount(sides, args, data))
        return
    shard = sides.shard(node)
    entry = BarrierEntry(order, order.send(None, Recount(tally, node)))
    if shard is None:
        log.info("client %s: no connection to %s for a shard channel", session.describe(), node)
        _fill(session, entry, b"")
        session.upstream_unavailable(f"no connection to {node}")
        return
    shard.send(ShardCommand(entry, args, data, len(args) - 1 if len(args) > 1 else -1, redirects))


class MainRecount(Recount):
    """The mark of a shard channel command on the stream's own connection: recounted; a -MOVED
    among what it made the server say (the slot left the stream's master) is not shown: the
    command goes to the new owner, aside, its confirmations placed after what is shown now."""

    __slots__ = ("sides", "args", "data")

    def __init__(self, sides: Sides, args, data: bytes):
        super().__init__(sides.shard_tally(), MAIN)
        self.sides = sides
        self.args = args
        self.data = data

    def rewrite(self, shown: bytes) -> bytes:
        sides = self.sides
        sides.main_inflight -= 1
        shown = self.recount_main(shown)
        if not sides.main_inflight and not self.tally.counts.get(MAIN):
            sides.maybe[MAIN] = False
        return shown

    def recount_main(self, shown: bytes) -> bytes:
        kept = []
        for item in items(shown):
            if item.startswith(b"-MOVED "):
                moved = parse_redirect(item)
                router = self.sides.backend.router
                if moved is not None and self.sides.main is not None:
                    node = moved.address(self.sides.main)
                    router.moved(moved.slot, node)
                    session = self.sides.session
                    session.loop.call_soon(self._again, node)
                    continue
            kept.append(item)
        return self.tally.recount(MAIN, b"".join(kept))

    def _again(self, node) -> None:
        session = self.sides.session
        if _live(session) and sides_of(session, False) is self.sides:
            _to_node(session, self.sides, node, self.args, self.data, 1)


def redirect(sides: Sides, command: ShardCommand, error: bytes, answered_by) -> bool:
    """-MOVED for a shard channel command aside: the map learns the new owner and the command
    goes there, aside, in the same place of the stream. False: the client gets the error (too many)."""
    session = sides.session
    router = sides.backend.router
    moved = parse_redirect(error)
    if moved is None or command.redirects >= router.max_redirects or not _live(session):
        return False
    node = moved.address(answered_by)
    router.moved(moved.slot, node)
    shard = sides.shard(node)
    if shard is None:
        return False
    mark = command.entry.barrier[2]
    if isinstance(mark, Recount):
        mark.source = node  # (its confirmations now count for the new owner's connection)
    command.redirects += 1
    command.parts = []
    command.left = len(command.args) - 1 if len(command.args) > 1 else -1
    shard.send(command)
    return True


# -- a key of another master on the stream ---------------------------------------------------------

REPLICA = b"-ERR Replica can't interact with the keyspace\r\n"
SUBSCRIBING = frozenset((b"subscribe", b"psubscribe", b"ssubscribe"))


def in_pubsub_context(name: bytes) -> bytes:
    return (b"-ERR Can't execute '%s': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are "
            b"allowed in this context\r\n" % name)


class ClusterStreamRoute(StreamRoute):
    """The stream's route in front of a cluster: a command whose key another master owns would
    be answered -MOVED by the stream's master (which ran nothing). It goes between two barriers
    there all the same, so that the server says what it says of it in the client's context (a
    RESP2 subscriber's or a monitor's refusal, replies off...), and a -MOVED or -ASK there is
    replaced by the owner's reply (`Elsewhere`); after CLIENT REPLY OFF or SKIP, where the
    server might not answer, it goes to its owner at once, its reply in its place if any. One
    that cannot run apart from the stream (inside MULTI on the stream, where the master's -MOVED
    aborts EXEC as one node's refusal would; one that blocks or holds state: WATCH, BLPOP, EVAL)
    gets a clear error in the -MOVED's place (`Refused`). A key the map gives the stream's own
    master may still be answered -MOVED/-ASK there (its slot migrating away, or moved before the
    map learnt it): such commands go between two barriers, one pair for a run of them, and a
    redirection among their replies is followed or replaced (`Checked`); inside MULTI on the
    stream they go as they are, and a redirection among the transaction's replies is replaced as
    on a transaction's connection (`Queued`)."""

    __slots__ = ("multi", "queued", "caching")

    def __init__(self, conn, neutral=frozenset()):
        super().__init__(conn, neutral)
        self.multi = False  # MULTI was sent on the stream, not ended yet (EXEC, DISCARD, RESET)
        self.queued = None  # the transaction's replies' `Queued` filter, from MULTI to its end
        self.caching = None  # a CLIENT CACHING's argument, for the command after it (tracked.py)

    def forward(self, session, batch, start: int, stop: int) -> None:
        backend = session.backend
        master_for_slot = backend.router.slotmap.master_for_slot
        decide = backend.routes.decide
        commands = batch.commands
        main = self.conn.address
        run = start
        checking = None  # commands of the stream's own master's keys from `run` on: (args, slot, kind)
        for index in range(start, stop):
            args = commands[index]
            name = args[0].lower()
            opening = closing = False
            caching = self.caching
            if caching is not None:
                self.caching = None
            if name == b"multi":
                opening = not self.multi and self.queued is None and not session.replies_unsure
                self.multi = True
            elif name in (b"exec", b"discard", b"reset"):
                closing = self.queued is not None
                self.multi = False
            elif name == b"client" and len(args) == 3 and args[1].lower() == b"caching":
                self.caching = args[2]  # (it concerns the next command, on whatever master: tracked.py)
            routed = decide(args, master_for_slot)
            if type(routed) is int:
                owner = master_for_slot(routed)
                # (not inside MULTI on the stream: a barrier there, an unknown command, would abort EXEC)
                # (nor right after CLIENT CACHING: a barrier between would take its effect)
                if owner is not None and owner == main and not self.multi and caching is None:
                    if checking is None:
                        if run < index:
                            StreamRoute.forward(self, session, batch, run, index)
                        run = index
                        checking = []
                    checking.append((args, routed, self._kind(session, args)))
                    continue
                if checking is not None:
                    self._checked(session, batch, run, index, checking)
                    checking = None
                    run = index
                if owner is not None and owner != main:
                    if run < index:
                        StreamRoute.forward(self, session, batch, run, index)
                    if not session.replies_unsure or session.stream_ends:
                        streamend.passes(session, args, self.neutral)
                    sides = sides_of(session, False)
                    if sides is not None and sides.subscriber and session.protocol == 2:
                        session.answer_locally(in_pubsub_context(_full_name(session, args)))
                    elif self.multi or _action(backend, args) != PASS:
                        StreamOrder.of(session, session.stream).rewritten(batch.span(index, index + 1),
                                                                           Refused(args))
                    else:
                        elsewhere(session, batch, index, routed, caching)
                    run = index + 1
            elif checking is not None:
                self._checked(session, batch, run, index, checking)
                checking = None
                run = index
            if opening or closing or self.queued is not None:
                run = self._transaction(session, batch, run, index, opening, closing)
        if checking is not None:
            self._checked(session, batch, run, stop, checking)
        elif run < stop:
            StreamRoute.forward(self, session, batch, run, stop)

    def _transaction(self, session, batch, run: int, index: int, opening: bool, closing: bool) -> int:
        """MULTI on the stream: a barrier before it (outside the transaction) from whose answer the
        replies pass through a `Queued` filter, which replaces a redirection; EXEC, DISCARD: a
        barrier after it ends the filtering. Each command of the transaction is noted in order (its
        reply's place). Returns where the commands not sent yet start."""
        order = StreamOrder.of(session, session.stream)
        if opening:
            if run < index:
                StreamRoute.forward(self, session, batch, run, index)
            run = index
            self.queued = Queued(session)
            order.send(b"", self.queued)
        self.queued.commands.append(batch.commands[index])
        if closing:
            StreamRoute.forward(self, session, batch, run, index + 1)
            run = index + 1
            self.queued = None
            order.send(b"", FILTER_END)
        return run

    def _kind(self, session, args) -> int:
        """What a -MOVED/-ASK of the stream's master to `args` becomes (`Checked`)."""
        sides = sides_of(session, False)
        if sides is not None and sides.monitoring:
            return AS_MONITOR
        if sides is not None and sides.subscriber and session.protocol == 2:
            return AS_SUBSCRIBER
        if _action(session.backend, args) != PASS:
            return REFUSE
        return FOLLOW

    def _checked(self, session, batch, start: int, stop: int, checking: list) -> None:
        """Commands start..stop, each of a key the map gives the stream's own master. The slot may
        be migrating away (or have moved, the map not knowing yet): the master then answers
        -MOVED/-ASK and runs nothing. Where the server answers every command they go between two
        barriers, one pair for the run, and a redirection among their replies is followed or
        replaced (`Checked`); after CLIENT REPLY OFF/SKIP an ordinary one goes to its owner on the
        shared connections, its reply in its place if the server would write one."""
        if session.replies_unsure:
            for offset, (args, slot, kind) in enumerate(checking):
                if session.stream_ends:
                    streamend.passes(session, args, self.neutral)
                if kind == FOLLOW:
                    elsewhere(session, batch, start + offset, slot)
                else:
                    self.conn.send(batch.span(start + offset, start + offset + 1), None)
            return
        for args, _slot, _kind in checking:
            streamend.passes(session, args, self.neutral)
        order = StreamOrder.of(session, session.stream)
        if checking[0][2] == AS_SUBSCRIBER:  # (messages come among the replies: one a stretch, its name known)
            for offset, command in enumerate(checking):
                resolver = Checked(session, [command], [batch.span(start + offset, start + offset + 1)])
                resolver.entry = order.resolved(resolver.data[0], resolver)
            return
        data = [batch.span(index, index + 1) for index in range(start, stop)]
        resolver = Checked(session, checking, data)
        resolver.entry = order.resolved(batch.span(start, stop), resolver)


def _action(backend, args) -> int:
    """The command's action in front of a cluster on the shared connections (its subcommand's)."""
    table = backend.shared_table
    action = table.get(args[0])
    if action is None:
        action = table.get(args[0].lower(), PASS)
    if action == SUBCOMMAND:
        action = backend.behaviour.subcommand(backend.column, args)
    return action


class Refused(Rewrite):
    """A -MOVED or -ASK the stream's master answered (it ran nothing) shown as the proxy's refusal."""

    __slots__ = ("args",)

    def __init__(self, args):
        self.args = args

    def rewrite(self, shown: bytes) -> bytes:
        out = []
        for item in items(shown):
            if self.args is not None and _redirection(item):
                item, self.args = errors.stream_other_master(self.args), None
            out.append(item)
        return b"".join(out)


def elsewhere(session, batch, index: int, slot: int, caching=None) -> None:
    data = batch.span(index, index + 1)
    order = StreamOrder.of(session, session.stream)
    if session.replies_unsure:
        _route(session, BarrierEntry(order, order.send(None)), slot, data, None, caching)
        return
    resolver = Elsewhere(session, slot, data, caching)
    resolver.entry = order.resolved(data, resolver)


def _full_name(session, args) -> bytes:
    spec = session.backend.behaviour.table.lookup(args)
    return spec.name.encode() if spec is not None else args[0].lower()


def _route(session, entry, slot: int, data: bytes, keep=None, caching=None) -> None:
    """`data` to the owner of `slot` on the shared connections; its reply fills `entry`."""
    def merge(replies) -> bytes:
        if keep is None:
            return replies[0]
        keep(replies[0])
        return b""
    collected = Gather(session, entry, 1, merge)
    tracker = session.backend.tracked.get(session)
    # (a tracking client's: on its connection aside on the owner, where Redis tracks it: tracked.py)
    if tracker is not None and tracker.send(PartSink(collected, 0), slot, data, 0, caching):
        return
    session.backend.router_of(session).send(RoutedPending(PartSink(collected, 0), 1, None, data, 0, slot),
                                            session.protocol, session.spread)


class Elsewhere(Resolve):
    """A command the stream's master was asked to run though another master owns its key: what
    the master said of it is shown, but a -MOVED or -ASK, whose place takes the owner's reply (a
    monitor's connection gets the refusal one node gives a monitor that names a key)."""

    __slots__ = ("session", "slot", "data", "entry", "reply", "caching")

    def __init__(self, session, slot: int, data: bytes, caching=None):
        super().__init__()
        self.session = session
        self.slot = slot
        self.data = data
        self.entry = None
        self.reply = None
        self.caching = caching  # the argument of a CLIENT CACHING just before it (tracked.py)

    def answered(self, stretch: bytes) -> None:
        if not any(_redirection(item) for item in items(stretch)):
            self.session.loop.call_soon(_fill, self.session, self.entry, b"")
            return
        session = self.session
        if monitoring(session):
            self.reply = REPLICA
            session.loop.call_soon(_fill, session, self.entry, b"")
            return
        _route(session, self.entry, self.slot, self.data, self._keep, self.caching)

    def _keep(self, reply: bytes) -> None:
        self.reply = reply

    def rewrite(self, shown: bytes) -> bytes:
        out = []
        for item in items(shown):
            if self.reply is not None and _redirection(item):
                item, self.reply = self.reply, None
            out.append(item)
        return b"".join(out)


FOLLOW, REFUSE, AS_MONITOR, AS_SUBSCRIBER = 0, 1, 2, 3  # what a redirection of a command becomes (`Checked`)


class Checked(Resolve):
    """A run of commands of keys the map gives the stream's own master, between two barriers:
    when the stretch holds a -MOVED or -ASK (the slot migrates away, or moved before the map
    learnt it; nothing ran), each is paired with its command by place (the stretch's replies,
    pushes apart, one a command) and becomes what one node would have answered: the owner's
    reply, read on the shared connections (which send ASKING first after an ASK; a MOVED teaches
    the map first), for an ordinary command; a monitor's or a RESP2 subscriber's refusal; a
    retryable error for one that cannot leave the stream (one that blocks or holds state).
    Not inside MULTI on the stream: there a barrier (an unknown command) would abort EXEC."""

    __slots__ = ("session", "commands", "data", "entry", "replacing")

    def __init__(self, session, commands: list, data: list):
        super().__init__()
        self.session = session
        self.commands = commands  # (args, slot, kind) each
        self.data = data  # each command's bytes
        self.entry = None
        self.replacing = {}  # the place of a redirection among the stretch's replies -> what is shown

    def answered(self, stretch: bytes) -> None:
        session = self.session
        if b"-MOVED " not in stretch and b"-ASK " not in stretch:
            self.known(self.entry, b"")  # (the usual case: shown as it is, without a turn of the loop)
            return
        replies = [item for item in items(stretch) if item[:1] != b">"]
        # (one command: every redirection is its own, messages of a RESP2 subscriber among them or not)
        alone = len(self.commands) == 1
        paired = alone or len(replies) == len(self.commands)
        router = session.backend.router_of(session)
        main = session.stream.conn.address
        follows = []
        for place, reply in enumerate(replies):
            if not _redirection(reply):
                continue
            args, slot, kind = self.commands[0 if alone else place] if paired else (None, None, REFUSE)
            redirect = parse_redirect(reply)
            if redirect is not None and not redirect.ask:
                router.moved(redirect.slot, redirect.address(main))
            if kind == FOLLOW:
                follows.append((place, slot, self.data[0 if alone else place]))
            elif kind == AS_MONITOR:
                self.replacing[place] = REPLICA
            elif kind == AS_SUBSCRIBER:
                self.replacing[place] = in_pubsub_context(_full_name(session, args))
            else:
                self.replacing[place] = errors.slot_moving(args, errors.SLOT_MOVING_STREAM)
        if not follows:
            self.known(self.entry, b"")
            return

        def merge(got) -> bytes:
            for (place, _slot, _data), reply in zip(follows, got):
                args = self.commands[0 if alone else place][0]
                self.replacing[place] = (errors.slot_moving(args, errors.SLOT_MOVING_RETRY)
                                         if _redirection(reply) else reply)
            return b""
        collected = Gather(session, self.entry, len(follows), merge)
        tracker = session.backend.tracked.get(session)
        for part, (_place, slot, data) in enumerate(follows):
            if tracker is not None and tracker.send(PartSink(collected, part), slot, data):
                continue  # (a tracking client's: on its connection aside on the owner, tracked.py)
            router.send(RoutedPending(PartSink(collected, part), 1, None, data, 0, slot), session.protocol,
                        session.spread)

    def rewrite(self, shown: bytes) -> bytes:
        replacing = self.replacing
        if not replacing:
            return shown
        out = []
        place = 0
        for item in items(shown):
            if item[:1] != b">":
                if place in replacing and _redirection(item):
                    item = replacing[place]
                place += 1
            out.append(item)
        return b"".join(out)


class Queued(Filter):
    """The replies on a stream from MULTI to the transaction's end, as they come: a -MOVED or
    -ASK among them (a queued command's key's slot migrating away from the stream's master, or
    moved before the map learnt it: the node flagged the transaction, so EXEC answers EXECABORT;
    or EXEC's own: the node discarded it) becomes what a transaction's connection shows
    (`redirected.TxnReplies`): the TRYAGAIN error that names no node (a monitor's: the refusal
    one node gives a monitor), the map learning a MOVED. Every other byte passes as it came, at
    once: only an error line (one line) or a push's header is held until whole. A reply is
    paired with its command by place (`commands`, noted as the route sends them: MULTI first;
    the commands answered elsewhere are not among them, and the wording may then name another)."""

    __slots__ = ("session", "commands", "replies", "splitter", "left", "held", "lost")

    def __init__(self, session):
        self.session = session
        self.lost = False  # the stream was not RESP as Redis sends it: passed on as it is from then on
        self.commands = []
        self.replies = 0  # the replies seen (pushes apart): the next one's place
        self.splitter = None  # inside a reply (or a push's elements): its splitter
        self.left = 0  # a push's elements still to come (0: inside a reply)
        self.held = b""

    def feed(self, shown: bytes) -> bytes:
        if self.lost:
            return shown
        data = self.held + shown if self.held else shown
        self.held = b""
        out = []
        pos = 0
        size = len(data)
        try:
            while pos < size:
                splitter = self.splitter
                if splitter is not None:
                    if self.left:  # a push's elements
                        end, done, _pushes = splitter.scan(data, pos, self.left)
                        self.left -= done
                        if not self.left:
                            self.splitter = None
                    else:
                        end, done, _pushes = splitter.scan(data, pos, 1)
                        if done:
                            self.splitter = None
                            self.replies += 1
                    out.append(data[pos:end])
                    pos = end
                    continue
                first = data[pos]
                if first == 45 or first == 62:  # '-': an error, one line; '>': a push's header
                    line_end = data.find(b"\n", pos)
                    if line_end < 0:
                        self.held = data[pos:]
                        break
                    line = data[pos:line_end + 1]
                    pos = line_end + 1
                    if first == 62:
                        self.left = int(line[1:].strip() or b"0")
                        if self.left > 0:
                            self.splitter = ReplySplitter()
                        out.append(line)
                        continue
                    if _redirection(line):
                        line = self._replaced(line)
                    self.replies += 1
                    out.append(line)
                    continue
                self.splitter = ReplySplitter()
                self.left = 0
        except (ReplyStreamError, ValueError):
            out.append(data[pos:])  # (not RESP as Redis sends it: shown as it is, no longer filtered)
            self.lost = True
        return b"".join(out)

    def _replaced(self, reply: bytes) -> bytes:
        session = self.session
        commands = self.commands
        args = commands[self.replies] if self.replies < len(commands) else None
        redirect = parse_redirect(reply)
        stream = session.stream
        if redirect is not None and not redirect.ask and stream is not None:
            session.backend.router_of(session).moved(redirect.slot, redirect.address(stream.conn.address))
        if monitoring(session):
            return REPLICA
        if args is not None and args[0].lower() == b"exec":
            return errors.slot_moving(args, errors.SLOT_MOVING_EXEC)
        return errors.slot_moving(args, errors.SLOT_MOVING_QUEUED)


def _redirection(item: bytes) -> bool:
    return item.startswith((b"-MOVED ", b"-ASK "))


def on_one_master(session) -> bool:
    """Does a keyless command meant for every master stay on the stream's master (a RESP2
    subscriber's, a monitor's: Redis refuses it there, and that master's refusal is shown)?"""
    sides = sides_of(session, False)
    return sides is not None and (sides.monitoring or (sides.subscriber and session.protocol == 2))


def fanned(session, args, parts: list, merge) -> None:
    """A keyless command for every master (FLUSHALL, DBSIZE, SCRIPT LOAD...: handlers.fanout)
    sent by a client on a stream: to every master on the shared connections, as without a
    stream, the merged reply placed in the stream where the stream master's answer to a barrier
    says. Where the server answers every command, the command goes out once the master has
    answered what came before it on the stream (`Fanned`: a DBSIZE after pipelined SETs counts
    them); after CLIENT REPLY OFF/SKIP at once, its reply shown only if the barrier is answered
    (as `elsewhere`)."""
    stream = session.stream
    if stream is None or stream.conn.closed:  # (the stream gone: as without one, `route.gather`)
        gather(session, parts, merge)
        return
    route = session.route
    if not session.replies_unsure or session.stream_ends:
        streamend.passes(session, args, getattr(route, "neutral", frozenset()))
    order = StreamOrder.of(session, session.stream)
    if session.replies_unsure:
        _gather(session, BarrierEntry(order, order.send(None)), parts, merge)
        return
    resolver = Fanned(session, parts, merge)
    resolver.entry = order.resolved(b"", resolver)


def _gather(session, entry, parts: list, merge) -> None:
    """`parts` [(slot, request)] to their masters on the shared connections, merged into `entry`."""
    collected = Gather(session, entry, len(parts), merge)
    router = session.backend.router_of(session)
    for index, (slot, data) in enumerate(parts):
        router.send(RoutedPending(PartSink(collected, index), 1, None, data, 0, slot), session.protocol,
                    session.spread)


class Fanned(Resolve):
    """A keyless command for every master on a stream (`fanned`): sent when the stream's master
    has answered the barriers before its place (what came before it ran), its merged reply in
    that place."""

    __slots__ = ("session", "parts", "merge", "entry")

    def __init__(self, session, parts: list, merge):
        super().__init__()
        self.session = session
        self.parts = parts
        self.merge = merge
        self.entry = None

    def answered(self, stretch: bytes) -> None:
        # (filled later, never from inside `answered`: a refusal may come at once)
        self.session.loop.call_soon(_gather, self.session, self.entry, self.parts, self.merge)

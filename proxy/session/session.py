"""The client side: one session per client connection, one dispatch loop for every backend.

Theory of operation: a session reads batches of complete requests and walks them in `_run`, the
one dispatch loop: a command's action comes from one lookup in the session's dispatch table (a
`Guard` first when the policy checks the command), ordinary commands (PASS) accumulate into a
stretch, and anything else is handled by the backend's handler for its action
(`proxy/backends/handlers.py`; a cluster's own in `proxy/backends/cluster/handlers.py`). A stretch leaves through
the session's current `route` (the backend's shared route, or a connection of the client's own),
which is the per-command routing hook: standalone it is one slice of the client's bytes on one
connection, in a cluster one request per master. Each run sent upstream is a `Pending` in the
client's reply queue; the head writes straight to the client as bytes arrive, later ones buffer
until they become the head, so a reply always reaches the client that asked, in order, whichever
connection answered it. Where the client's commands go and whether it is taking requests is its
`ConnState` (`states.py`); a handler that needs the client's replies in flight first suspends the
loop with `_wait` and the loop resumes at the same request.

Flow control and isolation: a client's requests go upstream only while its unread replies are
under its window (`limits.client_write_buffer`, `_budget`): replies are taken off shared
connections at once (other clients must not wait), so what a client does not read is held here,
and the proxy sends no more of its requests (and reads none) until it catches up. Replies are
not sized before they arrive, so what a client may have in flight is counted in units (a
command's arguments past its name: an MGET's keys) against what the window has left over the
size a reply is expected to have: its latest reply's, the one arriving as soon as it is larger,
and never less than window / IN_FLIGHT, whatever small replies came before (`_budget`). The
count slides: each reply that completes lets the next commands go. A command larger than that
goes alone, once nothing is in flight. So a client that stops reading costs at most the window
plus one such command's reply, or IN_FLIGHT replies of a size it never asked for before (small
replies, then many large values one key each), here and in Redis; one that reads slowly is
never disconnected for it. `limits.client_output_buffer` stays a hard safety bound for what
arrives anyway (pushes). Only a connection of the client's own is paused for it. An upstream connection
that does not take requests pauses the clients writing to it. When an upstream connection fails
with a client's requests in flight, or none can be had, the client's connection is closed after
the replies before them: client libraries see a connection error, as when Redis itself goes
away, and reconnect (an error reply would be taken for the command's own failure).
"""

from __future__ import annotations

import collections
import logging
import time

import hiredis

from .. import compiled, errors, metrics
from ..monitor import health, live
from ..monitor.live import NAMES, REJECTED, Tally
from ..pending import HiddenCommand, Pending, Receiver, ReplacingSink, keep, queue_head, queue_popleft
from ..policy.classes import key_class, same_class
from ..policy.decision import SessionState
from ..resp.reader import RequestReader
from ..upstream import connection as upstream_connection
from . import auth, gone, verdicts
from .behaviour import PASS
from .guard import Guard
from .states import (
    CLOSED,
    CLOSING,
    HELD,
    LEASED,
    NONE,
    OPEN,
    REPLIES,
    STREAM_END,
    STREAMING,
    WAITING,
    WINDOW,
    ConnState,
)
from .streamorder import MALFORMED, QUIT, BarrierEntry, StreamOrder
from .verdicts import PENDING

log = logging.getLogger("redis_guard.server")


MAX_NAMES = live.MAX_NAMES

# Replies in flight a client may have while its replies are small (or none has come yet): a reply
# not yet arrived is counted as at least window / IN_FLIGHT bytes (`_budget`), so that whatever
# small replies came before, at most this many unknown replies are ever on their way.
IN_FLIGHT = 32
UNLIMITED = 1 << 62
BIG_REQUEST = 1024 * 1024  # an unfinished request past this is counted as it grows (proxy/bounds.py)


# Commands whose reply does not grow with their arguments: the command table's writers (+OK, a
# count; `one_unit_names`), one unit each in the reply window, so that pipelined writes are not held
# to IN_FLIGHT arguments. Set by the Proxy from its command table.
ONE_UNIT = frozenset()


def one_unit_names(table) -> frozenset:
    """The names, as clients send them in lower and upper case, of the table's write commands."""
    names = set()
    for spec in table:
        if "write" in spec.flags:
            names.add(spec.name.lower().encode())
            names.add(spec.name.upper().encode())
    return frozenset(names)


def _units(args) -> int:
    """What a command counts for in the reply window: a writer one, any other its arguments past
    the name, at least one (an MGET's reply grows with its keys; inline in the hot paths)."""
    units = 1 if args[0] in ONE_UNIT else len(args) - 1
    return units if units > 0 else 1


class Session(Receiver):
    """One client connection. Its surface, by caller (everything else, `_`-named, is its own):

    For command handlers (`handlers.py`, `proxy/backends/cluster/handlers.py`, auth, verdicts, streams):
      answer_locally(reply)        a reply the proxy makes itself, in order after those owed
      reply_later() / fill(entry, reply)   a place in the reply queue now, its reply later
      wait(batch, index, reason)   suspend dispatch at a request (returns HELD); resume_dispatch()
      redispatch(batch, index, action)     handle a request as another action (PASS: the route)
      refused_in_transaction()     a refused command aborts the open transaction's EXEC
      end_transaction, login       verdicts.end_transaction, auth.login on this session
      use_own(conn, event), release_lease(), stream_on_own(...), end_stream()   where commands go
      bind()                       take the dispatch table again (lane, application, policy)
      quit(), noauth(), close_after_replies()   end the connection after the replies owed
      answer_refused(refusal, args, reply)     a refusal remembered (verdicts.apply's, inline)
      pushing_behind(conn), pushed(push)       a push arrived: bound it as replies are
      hold_upstream(conn) / forget_upstream(conn)   read no more of a connection until the client
                                   catches up / it closed (the cluster's subscription sides)
    For backends and routes (`proxy/backends/`, `proxy/backends/cluster/`):
      send(conn, data, count, receiver) / send_hidden(conn, commands)   requests on a connection
      no_connection(opener, count), upstream_unavailable(reason)        none could be had
      wait_for_upstream(conn)      the connection's write buffer is full: stop reading the client
      head_answered() / entry_answered()   a route completed a queue entry (at the head / behind it)
      deliver, pending_failed      the Receiver's: replies, or their connection failed
    For upstream connections: deliver, pending_failed, pushed, own_closed(conn),
      upstream_writable(), stream_caught_up(), overflow() (a reply held here past the bound).
    For the server and the transport: the asyncio Protocol's callbacks, drain() (shutdown),
      pause_reading(reason) / resume_reading(reason) (proxy/bounds.py: memory), describe(), reads.
    Fields read by all of them (`state`, `backend`, `route`, `own`, `queue`, `inflight`, `stream`,
    `protocol`, `db`, `app`, `extra`, ...) are public; the flow-control fields belong to the
    "flow control" section below: outside it only `held_bytes` is counted (against `output_limit`)
    by what holds replies for the client too (streamorder.py, the cluster's scatter.py), inline.
    """

    __slots__ = compiled.declared_fields(__file__, "Session")

    def __init__(self, proxy):
        backend = proxy.backend
        self.proxy = proxy
        self.backend = backend
        self.loop = proxy.loop
        self.transport = None
        self.client_write = None  # the transport's write, bound once (connection_made)
        self.writer = None  # its DirectWriter, when it has one
        self.peer = None
        self.reader = RequestReader(proxy.parse_limits)
        self.queue = collections.deque()  # the reply queue: Pending entries in request order
        self.inflight = 0  # entries still waiting for upstream replies
        self.state = ConnState()
        self.db = backend.default_db
        self.protocol = 2
        self.spread = proxy.assign_spread()  # which of the shared connections this client uses
        self.route = None  # where ordinary commands go now (`backend.shared_route`, or own)
        self.own = None  # the connection of the client's own, lent or pinned
        self.stream = None  # the Pending that takes every reply once they are no longer paired
        self.resume_at = None  # (batch, index) of the request dispatch waits at
        self.waiting_for = None
        self.input_ended = False  # EOF, a protocol error or shutdown: no requests after these
        self.write_paused = False
        self.reading_paused = set()  # reasons reading from the client is paused
        self.waiting_upstreams = set()  # own connections paused until we catch up
        self.held_bytes = 0  # reply bytes buffered behind the head of the queue
        limits = proxy.config.limits
        self.buffer_limit = limits.client_write_buffer
        self.output_limit = limits.client_output_buffer
        self.reply_est = -1  # bytes per reply, the latest (deliver); -1: none yet
        self.reply_acc = 0  # bytes of the reply being delivered
        self.small_reply = max(self.buffer_limit // IN_FLIGHT, 1)  # the least a reply in flight is counted as
        self.units_out = 0  # units (`_units`) sent since nothing was in flight, less the replies since
        self.reads = 0  # reads from the client: the proxy's idle sweep compares them (proxy/memory.py)
        self.policy_state = SessionState()
        self.after_exec = []  # hidden commands the policy adds once the transaction has run
        self.unpaired = False  # the open transaction queued a command whose replies are not paired
        self.replies_unsure = False  # CLIENT REPLY OFF or SKIP was sent: commands may go unanswered
        self.stream_ends = 0  # how the stream may end: never (0), at RESET, with its subscriptions (streamend.py)
        self.pubsub = None  # a RESP3 client's subscriptions, its replies paired (paired_subscriptions.py)
        # While a read's commands are dispatched, the proxy's own replies with nothing before them
        # are collected and written at its end in one write (`answer_locally`), not one system call each.
        self.collecting = False
        self.local_out = None
        self.queued_effects = []  # queued in the open transaction, effects outlive it (`queued.py`)
        # The last command of the client's last batch: its name and second argument, no more (a
        # value is not kept); CLIENT LIST's cmd= in front of a cluster (cluster/clientinfo.py).
        self.last_name = None
        self.last_sub = None
        self.app = None  # the application the client authenticated as (its name)
        self.locked = False
        self.login_result = None  # (AUTH/HELLO arguments, application name or None) once checked
        self.verifying = False  # a password check is running in a worker thread, or a failure's brake
        self.auth_failures = 0  # failed AUTHs on this connection (throttle.py), RESET or not
        self.handlers = backend.handlers
        self.extra = backend.session_extra(self)  # what a backend keeps per client (cluster: CLIENT SETNAME...)
        self.route = backend.shared_route(self)
        self.bind()

    def bind(self) -> None:
        """Take the dispatch table for the client's lane, application and the proxy's current
        policy; on reload an application removed from the policy leaves its clients
        unauthenticated."""
        proxy = self.proxy
        tenants = proxy.tenants
        if self.app is not None and (tenants is None or tenants.engine(self.app) is None):
            self.app = None
        engine, self.plans = proxy.bindings[self.app]
        self.engine = engine
        # The engine's cache of key classes that passed (cleared in place, never replaced) and
        # its translate table: read for every checked command, kept here as C fields.
        self.good_keys = engine.good_keys if engine is not None else None
        self.key_classes = engine.key_classes if engine is not None else None
        self.good_class = None  # the last key class that passed (`_key_passes`), of this engine
        self.shadow = proxy.shadow
        self.locked = tenants is not None and tenants.required and self.app is None
        actions, unknown = self.backend.actions_for(self)
        self.dispatch, self.unknown = proxy.dispatch_for(actions, unknown, self.locked, self.plans)

    # -- transport events -------------------------------------------------------------------

    def connection_made(self, transport) -> None:
        self.transport = transport
        # Bound once, no lookup per reply; compiled, a DirectWriter's `write` is a C call.
        self.writer, self.client_write = upstream_connection.writers(transport)
        self.peer = transport.get_extra_info("peername")
        upstream_connection.no_delay(transport)
        transport.set_write_buffer_limits(high=self.buffer_limit)
        proxy = self.proxy
        full = len(proxy.sessions) >= proxy.config.limits.max_clients
        proxy.sessions.add(self)
        self.bind()  # what changed since __init__ (a pause, a reload) reached the sessions listed then
        metrics.CLIENTS.inc()
        if full:  # as Redis past its maxclients: the error, then close
            metrics.REFUSED_CLIENTS.inc()
            proxy.bounds.refused(self.peer)
            self.answer_locally(errors.MAX_CLIENTS)
            self.input_ended = True
            self.close_after_replies()

    def connection_lost(self, exc) -> None:
        metrics.CLIENTS.dec()
        self.state.to("lost")
        self.proxy.sessions.discard(self)
        self._release_upstreams()
        self.backend.session_closed(self)
        own, self.own = self.own, None
        if own is not None:
            if self.state.lane is LEASED and self.state.txn is NONE and self.inflight == 0 and own.idle:
                self.backend.give_back(self, own)
            else:
                own.close()  # the client's connection state goes with it, as with Redis
        self.queue.clear()
        self.local_out = None

    def data_received(self, data: bytes) -> None:
        self.reads += 1
        if self.state.life is OPEN:
            batch = self.reader.feed_read(data)
            if batch is not None:
                if batch.error is None:  # _handle's usual case without its frame (once per client read)
                    commands = batch.commands
                    if len(commands) == 1 and self.shadow is None:
                        # One command passed on as it is (a client that waits for each reply): what
                        # _run would do with it, without _run's frame and set-up. A Guard's command
                        # passes here by _run's own checks (its key's class, the memo of passes);
                        # one that would need the engine's decision goes to _run.
                        args = commands[0]
                        action = self.dispatch.get(args[0])
                        if type(action) is Guard:
                            guard = action  # (compiled: typed, its fields C fields)
                            if (guard.keys_only and len(args) > 1 and self._key_passes(args[1])) or (
                                    guard.memo is not None and guard.memo.passed(args, self.policy_state)):
                                action = guard.action
                        if type(action) is Tally and not self.write_paused:
                            units = 1 if args[0] in ONE_UNIT else len(args) - 1  # _units, inline
                            if units < 1:
                                units = 1
                            if self.inflight == 0:
                                self.units_out = 0
                            if self.units_out == 0 or self.units_out + units <= self._budget():
                                tally = action  # (compiled: typed, its count a C field)
                                tally.n += 1
                                self.units_out += units
                                self.last_name = args[0]  # (`_run`'s, once per batch)
                                self.last_sub = args[1] if len(args) > 1 else None
                                self.route.forward(self, batch, 0, 1)
                                return
                    self.collecting = True
                    try:
                        self._run(batch, 0)
                    finally:
                        self._flush_local()
                else:
                    self.collecting = True
                    try:
                        self._handle(batch)
                    finally:
                        self._flush_local()
            elif self.reader._size >= BIG_REQUEST:  # counted against limits.max_memory as it grows
                self.proxy.bounds.request_growing(self, self.reader._size)
        else:
            self.reader.feed(data)

    def eof_received(self):
        # Redis answers what was sent before a half-close; so do we, then close. A command that
        # waits is not answered: Redis frees a client at EOF, its block with it (gone.py).
        self.input_ended = True
        gone.cut_waits(self)
        if self.state.life is OPEN:
            self.close_after_replies()
        return True

    # -- requests ---------------------------------------------------------------------------

    def _process(self) -> None:
        read = self.reader.read
        while self.state.life is OPEN:
            batch = read()
            if batch is None:
                break
            self._handle(batch)
        if self.input_ended and self.state.life is OPEN:
            gone.cut_waits(self)  # EOF or shutdown came while dispatch waited: what it sent since
            self.close_after_replies()

    def _handle(self, batch) -> None:
        if batch.commands:
            self._run(batch, 0)
            if self.state.life is WAITING:
                return  # a protocol error after them is answered by _resume
        if batch.error is not None and self.state.life is OPEN:
            self._protocol_error(batch.error.reply)

    def _run(self, batch, index: int) -> None:
        """The dispatch loop: every command of the batch from `index` on. A command passed on as
        it is counts in its Tally (the dispatch table's PASS); one the loop goes past otherwise
        counts by name (`_went_past`), exactly once, also across a wait."""
        commands = batch.commands
        count = len(commands)
        start = index
        dispatch = self.dispatch
        state = self.policy_state
        shadow = self.shadow
        budget = self._budget()
        if count:  # the batch's last command, for CLIENT LIST (once per batch; its name derived there)
            last = commands[count - 1]
            self.last_name = last[0]
            self.last_sub = last[1] if len(last) > 1 else None
        while index < count:
            # The reply window, checked before the command is decided: a command decided is not
            # decided again when the loop resumes there (its findings count once).
            args = commands[index]
            units = 1 if args[0] in ONE_UNIT else len(args) - 1  # _units, inline
            if units < 1:
                units = 1
            if self.units_out + units > budget and (self.units_out or budget < 0):
                self._window_wait(batch, start, index)
                return
            name = args[0]
            action = dispatch.get(name)
            if action is None:
                action = dispatch.get(name.lower(), self.unknown)
            if type(action) is Guard:
                guard = action
                memo = guard.memo
                if not (guard.keys_only and len(args) > 1 and self._key_passes(args[1])) and not (
                        memo is not None and memo.passed(args, state)):
                    refusal = memo.refused(args, state) if memo is not None else None
                    if refusal is not None:  # refused before (policy/refusals.py): verdicts.apply's, inline
                        if start < index:
                            self.route.forward(self, batch, start, index)
                        self.answer_refused(refusal, args, memo.reply(args[1]))
                        names = NAMES  # (live.count_names, inline)
                        names[name] = names.get(name, 0) + 1
                        if len(names) > MAX_NAMES:
                            live.fold(names)
                        start = index = index + 1
                        if self.state.life is not OPEN:
                            return
                        continue
                    verdict = self._decide(guard.plan, commands, index)
                    if verdict is not None:
                        if shadow is not None and verdict.commands is not None:  # rewritten: observed as sent
                            shadow.observe(commands, index, state, self.app, self.peer)
                        next_index = self._apply_verdict(verdict, batch, start, index, guard.code)
                        if next_index == HELD:
                            self._went_past(batch, index)
                            return
                        if next_index is not None:
                            live.count_names(commands, index, next_index)
                            start = index = next_index
                            if self.state.life is not OPEN:
                                return
                            continue
                action = guard.action
            if shadow is not None:  # the candidate policy decides too, changing nothing (policy/shadow.py)
                shadow.observe(commands, index, state, self.app, self.peer)
            if type(action) is Tally:
                tally = action  # (compiled: typed, its count a C field)
                tally.n += 1
                self.units_out += units  # (what goes upstream only: a refusal waits for no reply)
                index += 1
                continue
            if start < index:
                self.route.forward(self, batch, start, index)
            try:
                next_index = self.handlers[action](self, batch, index)
            except Exception:  # a bug in a handler must not take the proxy's other clients down
                live.count_names(commands, index, index + 1)
                self._handler_failed(commands[index])
                return
            if next_index == HELD:
                self._went_past(batch, index)
                return
            live.count_names(commands, index, next_index)
            start = index = next_index
            if self.state.life is not OPEN:
                return
            # The handler may have changed the lane, the application or the policy's state.
            dispatch = self.dispatch
            state = self.policy_state
        if start < count:
            self.route.forward(self, batch, start, count)

    def _key_passes(self, key) -> bool:
        """Does `key` pass every key rule of the client's engine? Its class (policy/keyclass.py)
        is looked up among the engine's good ones, else the engine matches it. The last class
        that passed is kept: a client's commands mostly name keys of one class, and comparing
        with a class as it is read costs less than making and hashing one."""
        if same_class(key, self.key_classes, self.good_class):
            return True
        found = key_class(key, self.key_classes)
        if found in self.good_keys or self.engine.key_ok(key):
            self.good_class = found
            return True
        return False

    def _went_past(self, batch, index: int) -> None:
        """Dispatch stopped at commands[index] to wait: what it resumes after is done with."""
        resume = self.resume_at
        if resume is not None and resume[0] is batch and resume[1] > index:
            live.count_names(batch.commands, index, resume[1])

    def _handler_failed(self, args) -> None:
        log.exception("client %s: the proxy failed on %r; closing the client's connection", _peer(self.peer),
                      args[0][:64])
        self.answer_locally(errors.resp_error("ERR the proxy failed on this command; see its log"))
        self.input_ended = True
        if self.state.life is not CLOSED:
            self.close_after_replies()

    def redispatch(self, batch, index: int, action: int) -> int:
        """Handle commands[index] as `action` (a subcommand's): PASS goes on the current route."""
        if action == PASS:
            self.route.forward(self, batch, index, index + 1)
            return index + 1
        return self.handlers[action](self, batch, index)

    # -- waiting ----------------------------------------------------------------------------

    def wait(self, batch, index: int, reason: str = REPLIES) -> int:
        """Suspend dispatch at commands[index] until `reason` is over (the client's replies in
        flight, before it moves to another connection: its commands still run in the order it
        sent them; or a password check)."""
        self.resume_at = (batch, index)
        self.waiting_for = reason
        self.state.to("wait")
        self.pause_reading("wait")
        return HELD

    def resume_dispatch(self) -> None:
        """Dispatch the request we waited at again."""
        if self.state.life is not WAITING or self.verifying or (self.waiting_for is REPLIES and self.inflight):
            return
        batch, index = self.resume_at
        if self.waiting_for is WINDOW and index < len(batch.commands) and not self._window_open(
                batch.commands[index]):
            return
        self.resume_at = self.waiting_for = None
        self.state.to("resume")
        self.resume_reading("wait")
        self.collecting = True
        try:
            self._run(batch, index)
            if self.state.life is OPEN:
                if batch.error is not None:
                    self._protocol_error(batch.error.reply)
                else:
                    self._process()
        finally:
            self._flush_local()

    # -- the connection the client's commands take -------------------------------------------

    def use_own(self, conn, event: str) -> None:
        """Move to a connection of the client's own (`event`: lease, pin or stream)."""
        self.own = conn
        self.state.to(event)
        self.route = self.backend.own_route(self, conn)
        self.bind()

    def stream_on_own(self, batch, index: int, ends: int = 0, watcher=None) -> int:
        """From commands[index] on, every reply of the own connection is the client's, unpaired,
        until the stream ends as `ends` says (streamend.py; 0: never). A (P)UNSUBSCRIBE that starts
        it goes between barriers for `watcher`, which reads whether any subscription is left."""
        conn = self.own
        stream = self.begin_stream(ends)
        if watcher is None:
            conn.send(batch.span(index, index + 1), stream)
            return index + 1
        StreamOrder.of(self, stream).watched(batch.span(index, index + 1), watcher, True)
        return self.wait(batch, index + 1, STREAM_END)

    def begin_stream(self, ends: int):
        """From now on every reply of the client's own connection is the client's, unpaired (the
        stream's entry, returned), until the stream ends as `ends` says; the backend's stream
        route takes the client's commands. The caller sends what starts it."""
        if self.state.lane is not STREAMING:
            self.state.to("stream")
        conn = self.own
        self.stream_ends = ends
        stream = self.stream = Pending(self, -1, conn)
        self.queue.append(stream)
        self.inflight += 1
        self.route = self.backend.stream_route(self, conn)
        self.bind()
        return stream

    def end_stream(self) -> None:
        """Nothing more arrives unasked on the stream (streamend.py): the replies of its connection
        are paired again, and the backend says where the client's commands go now."""
        stream, self.stream = self.stream, None
        self.stream_ends = 0
        self.queue.remove(stream)
        self.inflight -= 1
        conn = stream.conn
        conn.stream_ended(stream)
        self.backend.stream_ended(self, conn)

    def release_lease(self) -> None:
        """The lent connection has answered everything and holds no state: give it back."""
        own, self.own = self.own, None
        self.state.to("release")
        self.route = self.backend.shared_route(self)
        self.bind()
        if own is not None:
            self.backend.give_back(self, own)

    def own_closed(self, conn) -> None:
        if conn is self.own and self.state.life is not CLOSED:
            # The client's connection state is gone with it; Redis clients expect a drop.
            self.input_ended = True
            self.close_after_replies()

    # -- forwarding -------------------------------------------------------------------------

    def send(self, conn, data: bytes, count: int, receiver=None) -> Pending | None:
        """A run of `count` requests on `conn`, its replies for `receiver` (the session)."""
        if conn is None or conn.state is upstream_connection.CLOSED:
            self.upstream_unavailable(conn.close_reason if conn is not None else "")
            return None
        pending = Pending(receiver or self, count, conn, data)
        self.queue.append(pending)
        self.inflight += 1
        conn.send(data, pending)
        if conn.write_paused:
            self.wait_for_upstream(conn)
        return pending

    def send_hidden(self, conn, commands) -> None:
        """Commands the policy adds after the client's, on the same connection, replies unseen."""
        if conn is not None and not conn.closed:
            for cmd in commands:  # one entry each, so that a failure names its command
                request = hiredis.pack_command(tuple(cmd))
                conn.send(request, HiddenCommand(request, conn))

    def no_connection(self, opener, count: int) -> None:
        """No connection could be had for `count` requests: while the server refuses the proxy's
        start-up (NOAUTH...) that is its answer to them, as to a client of its own; while it
        cannot be reached, the client's connection closes."""
        if opener.refusal is not None:
            self.answer_locally(opener.refusal * count)
        else:
            health.requests_failed(self.backend.label, count)
            self.upstream_unavailable(opener.failed_reason)

    def upstream_unavailable(self, reason: str) -> None:
        """No upstream connection for the client's next requests: close after what is owed."""
        log.info("client %s: upstream %s unavailable (%s); closing the client's connection",
                 _peer(self.peer), self.backend.label, reason or "not connected")
        self.input_ended = True
        if self.state.life is not CLOSED:
            self.close_after_replies()

    # -- policy (verdicts.py) and the proxy's own AUTH (auth.py) ------------------------------

    def answer_refused(self, refusal, args, reply: bytes) -> None:
        """Answer `args`, refused as the engine remembered (`refusal`: policy/refusals.py), with
        `reply`; its findings are counted in bulk (verdicts.py, `PENDING`)."""
        name = args[0]
        pending = (refusal, name, self.app)
        counts = PENDING
        seen = counts.get(pending)
        if seen is None:
            verdicts.pend(self, pending, args)
        else:
            seen[0] += 1
        rejected = REJECTED  # (live.rejected, inline)
        rejected[name] = rejected.get(name, 0) + 1
        if self.collecting and not self.queue:  # (answer_locally's usual case, inline)
            out = self.local_out
            if out is None:
                self.local_out = [reply]
            else:
                out.append(reply)
        else:
            self.answer_locally(reply)
        if self.state.txn is not NONE and self.state.in_transaction:  # (refused_in_transaction, inline)
            self.state.to("refuse")

    def _decide(self, plan, commands, index: int):
        return verdicts.decide(self, plan, commands, index)

    def _apply_verdict(self, verdict, batch, start: int, index: int, action: int = PASS):
        return verdicts.apply(self, verdict, batch, start, index, action)

    def refused_in_transaction(self) -> None:
        """Redis, too, aborts EXEC after a command it refused to queue."""
        if self.state.in_transaction:
            self.state.to("refuse")

    def end_transaction(self, is_exec: bool, batch, index: int) -> int:
        return verdicts.end_transaction(self, is_exec, batch, index)

    def login(self, batch, index: int) -> int:
        return auth.login(self, batch, index)

    # -- replies ----------------------------------------------------------------------------

    def deliver(self, pending: Pending, data: bytes, done: int) -> None:
        if self.state.life is CLOSED:
            if done and pending.remaining > 0:
                pending.remaining -= done
            return
        acc = self.reply_acc + len(data)  # the size of the client's latest replies (_budget)
        if done:
            self.reply_est = acc // done
            self.reply_acc = 0
            units = self.units_out - done
            self.units_out = units if units > 0 else 0
        else:
            self.reply_acc = acc
        queue = self.queue
        if queue_head(queue) is pending:
            self._to_client(data)
            if done:
                remaining = pending.remaining = pending.remaining - done
                if remaining == 0:
                    queue_popleft(queue)
                    self.inflight -= 1
                    if queue or self.state.life is not OPEN or self.waiting_upstreams or self.state.lane is LEASED:
                        self.head_answered()
            if self.write_paused:
                self._reader_behind(pending)
            return
        self.held_bytes += len(data)
        held = keep(pending, data)
        if done:
            pending.remaining -= done
            if pending.remaining == 0:
                self.entry_answered()
        if self.held_bytes > self.output_limit:
            self.overflow()
        elif held > self.buffer_limit:
            self._hold_own(pending.conn)

    def head_answered(self) -> None:
        if self.inflight == 0:
            if self.state.lane is LEASED and self.state.txn is NONE:
                self.release_lease()
            if self.state.life is WAITING and (self.waiting_for is REPLIES or self.waiting_for is WINDOW):
                self.loop.call_soon(self.resume_dispatch)
        elif self.state.life is WAITING and self.waiting_for is WINDOW:  # the window may allow more now
            self.loop.call_soon(self.resume_dispatch)
        self._advance()

    def entry_answered(self) -> None:
        self.inflight -= 1
        if self.state.life is WAITING and (
                (self.inflight == 0 and self.waiting_for is REPLIES) or self.waiting_for is WINDOW):
            self.loop.call_soon(self.resume_dispatch)

    def _advance(self) -> None:
        """The head entry completed: flush the entries behind it that have replies waiting, in
        one write (behind a cluster's pipeline, entries for several masters complete out of
        order: each would otherwise be a system call)."""
        queue = self.queue
        ready = None
        while queue:
            head = queue[0]
            if head.buffered is not None:
                self.held_bytes -= head.buffered_size
                if ready is None:
                    ready = head.buffered
                else:
                    ready += head.buffered
                head.buffered = None
                head.buffered_size = 0
            if head.remaining != 0:
                break
            queue.popleft()
        if ready is not None:
            self._write(ready[0] if len(ready) == 1 else b"".join(ready))
        if not self.write_paused:
            self._release_upstreams()
        if self.state.life is CLOSING:
            self._maybe_close()

    def pending_failed(self, pending: Pending, error: bytes, partial: bool) -> None:
        """The connection carrying `pending` failed: its requests may or may not have run, and
        nothing can be said for them that a client would not take for the commands' own
        result. The replies before it are written, then the client's connection closes."""
        if pending.remaining == 0 or self.state.life is CLOSED:
            pending.remaining = 0
            return
        pending.remaining = 0
        queue = self.queue
        if pending in queue:
            at = queue.index(pending)
            for _ in range(len(queue) - at):
                queue.pop()
        inflight = 0  # (a loop, not a generator: compiled, this method is a C method)
        for entry in queue:
            if entry.remaining != 0:
                inflight += 1
        self.inflight = inflight
        self.input_ended = True
        if partial and not queue and self.transport is not None:
            self.transport.abort()  # part of a reply is out: nothing sensible can follow it
            return
        self.close_after_replies()

    def answer_locally(self, reply: bytes) -> None:
        """A reply the proxy writes itself, in order after everything before it."""
        queue = self.queue
        if not queue:
            if self.collecting:
                out = self.local_out
                if out is None:
                    self.local_out = [reply]
                else:
                    out.append(reply)
                return
            self._write(reply)
            return
        stream = self.stream
        if stream is not None:
            if not stream.conn.closed:
                # Nothing is paired on a stream: the server orders the reply (streamorder.py).
                StreamOrder.of(self, stream).send(reply)
            elif queue[0] is stream:
                self._write(reply)
            else:
                keep(stream, reply)
                self.held_bytes += len(reply)
            return
        pending = Pending(self, 0)
        pending.buffered = [reply]
        pending.buffered_size = len(reply)
        self.held_bytes += len(reply)
        queue.append(pending)

    def pushed(self, push: bytes) -> None:
        """A push cut from the replies of the client's own connection (CLIENT TRACKING's
        invalidations, a RESP3 client's subscriptions), where the server wrote it: before the
        replies it still owes there (with the first entry that awaits them); else after
        everything queued, which is in flight elsewhere if at all (CLIENT UNPAUSE on the control
        connection: not ordered with the push) or the proxy's own."""
        if self.state.life is CLOSED:
            return
        own = self.own
        for entry in self.queue:
            if entry.conn is own and entry.remaining != 0:
                self.deliver(entry, push, 0)
                return
        self.answer_locally(push)
        self.pushing_behind(own)

    def reply_later(self) -> Pending:
        """An entry in the reply queue for a reply the proxy will make (`fill`); on a stream,
        a barrier's (streamorder.py)."""
        stream = self.stream
        if stream is not None and not stream.conn.closed:
            order = StreamOrder.of(self, stream)
            return BarrierEntry(order, order.send(None))
        pending = Pending(self, 1)
        self.queue.append(pending)
        self.inflight += 1
        return pending

    def fill(self, pending: Pending, reply: bytes) -> None:
        pending.receiver.deliver(pending, reply, 1)

    def stream_caught_up(self) -> None:
        """The stream passed on a reply of the proxy's (streamorder.py): one it closes after."""
        if self.state.life is CLOSING:
            self._maybe_close()

    def _write(self, data: bytes) -> None:
        # Written at once: replies for one client arrive once per upstream read, so deferring
        # to the next loop tick would add a callback without saving a system call.
        if self.state.life is not CLOSED:
            self._to_client(data)

    def _to_client(self, data: bytes) -> None:
        if self.local_out is not None:  # the proxy's own replies collected before it (`answer_locally`)
            out = self.local_out
            self.local_out = None
            out.append(data)
            data = b"".join(out)
        writer = self.writer
        if writer is not None:
            writer.write(data)
        else:
            self.client_write(data)

    # -- flow control ----------------------------------------------------------------------
    # Everything that decides whether the client's requests may go and whether its connection or
    # an upstream one is read: the reply window (`_budget`: `units_out`, `reply_est`, `reply_acc`,
    # `small_reply` against `buffer_limit`, limits.client_write_buffer), the replies held here
    # (`held_bytes`) against the hard bound `output_limit` (limits.client_output_buffer,
    # `overflow`), the transport's high-water mark (`write_paused`), the reasons reading the
    # client is paused (`reading_paused`), and the own connections paused until the client catches
    # up (`waiting_upstreams`). Per command the loop and `deliver` read these fields inline (C
    # fields when compiled: no call per command); the methods below run when a bound is crossed.

    def pause_writing(self) -> None:
        self.write_paused = True
        self.pause_reading("client-slow")

    def resume_writing(self) -> None:
        self.write_paused = False
        self.resume_reading("client-slow")
        self._release_upstreams()
        if self.state.life is WAITING and self.waiting_for is WINDOW:
            self.loop.call_soon(self.resume_dispatch)

    def _budget(self) -> int:
        """How many units of the client's commands (`units_out` included) may be in flight now:
        -1 (none) while its unread replies are over the window (the transport's high-water mark:
        `pause_writing`), else what the window has left over the size a reply is expected to
        have: the latest reply's, or the one arriving if larger already, and never less than
        window / IN_FLIGHT. One command goes anyway when nothing is in flight (the loop's rule),
        so that a client that stops reading costs the window plus what was in flight. A stream's
        replies are unpaired (never all in): only the window counts there."""
        if self.write_paused:
            return -1
        if self.stream is not None:
            return UNLIMITED
        if self.inflight == 0:
            self.units_out = 0
        est = self.reply_est
        if self.reply_acc > est:
            est = self.reply_acc
        if est <= self.small_reply:  # (no system call per batch: the unread replies are under the window)
            return IN_FLIGHT
        left = self.buffer_limit - self.held_bytes - self.transport.get_write_buffer_size()
        return left // est if left > 0 else 0

    def _window_open(self, args) -> bool:
        """May `args` go upstream now (`_budget`)? Always when nothing is in flight, unless the
        client is over its window."""
        budget = self._budget()
        return budget >= 0 and (self.units_out == 0 or self.units_out + _units(args) <= budget)

    def _window_wait(self, batch, start: int, index: int) -> None:
        """Send commands[start:index], wait at commands[index] until the window allows more."""
        if start < index:
            self.route.forward(self, batch, start, index)
        if self.state.life is OPEN:
            self.wait(batch, index, WINDOW)
            if self.inflight == 0 and not self.write_paused:  # nothing will come back to resume it
                self.loop.call_soon(self.resume_dispatch)

    def _reader_behind(self, pending) -> None:
        """The client's write buffer is above its high-water mark: pause a connection of its own
        (backpressure), never a shared one (count the bytes against its output limit)."""
        conn = pending.conn
        if conn is not None and conn is self.own:
            self._hold_own(conn)
        elif self.transport.get_write_buffer_size() + self.held_bytes > self.output_limit:
            self.overflow()

    def _hold_own(self, conn) -> None:
        if conn is not None and conn is self.own:
            self.hold_upstream(conn)

    def hold_upstream(self, conn) -> None:
        """Read no more of `conn` (the client's own, or its subscriptions' in front of a cluster)
        until the client catches up (`_release_upstreams`): the server holds the rest."""
        if conn not in self.waiting_upstreams:
            self.waiting_upstreams.add(conn)
            conn.pause_for(self)

    def forget_upstream(self, conn) -> None:
        """`conn`, held for the client (`hold_upstream`), closes: nothing to resume there."""
        self.waiting_upstreams.discard(conn)

    def pushing_behind(self, conn) -> None:
        """After a push from `conn` (the client's own, or its subscriptions' in front of a
        cluster): over the output limit, disconnect; behind its reads, stop reading `conn`, so
        that the server holds the rest (and applies its pub/sub client-output-buffer-limit)."""
        if self.held_bytes > self.output_limit:
            self.overflow()
        elif self.write_paused or self.held_bytes > self.buffer_limit:
            self.hold_upstream(conn)

    def overflow(self) -> None:
        """More unread replies than `limits.client_output_buffer`, a hard safety bound the reply
        window keeps clients far below (pushes, replies far larger than the client's latest):
        disconnect this client only."""
        if self.state.life is CLOSED or self.transport.is_closing():
            return
        metrics.SLOW_CLIENTS.inc()
        proxy = self.proxy
        now = time.monotonic()
        proxy.overflows += 1
        if now - proxy.overflow_logged >= 10.0:
            log.warning("client %s disconnected: %d bytes of replies unread, over client_output_buffer "
                        "(%d); %d such client(s) since the last line", _peer(self.peer),
                        self.transport.get_write_buffer_size() + self.held_bytes, self.output_limit,
                        proxy.overflows)
            proxy.overflow_logged = now
            proxy.overflows = 0
        self.transport.abort()

    def _release_upstreams(self) -> None:
        waiting, self.waiting_upstreams = self.waiting_upstreams, set()
        for conn in waiting:
            conn.resume_for(self)

    def wait_for_upstream(self, conn) -> None:
        """The upstream's write buffer is full: read no more of this client until it drains."""
        conn.blocked_sessions.add(self)
        self.pause_reading("upstream-slow")

    def upstream_writable(self) -> None:
        self.resume_reading("upstream-slow")

    def pause_reading(self, reason: str) -> None:
        if not self.reading_paused and self.transport is not None and self.state.life is not CLOSED:
            self.transport.pause_reading()
        self.reading_paused.add(reason)

    def resume_reading(self, reason: str) -> None:
        if reason in self.reading_paused:
            self.reading_paused.discard(reason)
            if not self.reading_paused and self.transport is not None and self.state.life is not CLOSED:
                self.transport.resume_reading()

    # -- closing ----------------------------------------------------------------------------

    def close_after_replies(self) -> None:
        """Take no more requests; close once every reply owed has been written."""
        life = self.state.life
        if life is CLOSED:
            return
        if life is not CLOSING:
            self.resume_at = self.waiting_for = None  # a request we waited at is not answered
            self.state.to("close")
        self.pause_reading("closing")
        self._maybe_close()

    def _flush_local(self) -> None:
        """The end of a read's dispatch: write the proxy's own replies collected (`answer_locally`)."""
        self.collecting = False
        out = self.local_out
        if out is not None:
            self.local_out = None
            self._write(out[0] if len(out) == 1 else b"".join(out))

    def _maybe_close(self) -> None:
        if self.state.life is not CLOSING:
            return
        if self.local_out is not None:
            self._flush_local()
        queue = self.queue
        if queue:
            stream = self.stream
            if not (len(queue) == 1 and queue[0] is stream):
                return
            if type(stream.receiver) is StreamOrder and stream.receiver.owes():
                return  # a reply of the proxy's is still to come on the stream
        if self.transport is not None:
            self.transport.close()

    def drain(self) -> None:
        """Shutdown: stop taking requests; close once the replies owed are written (a command
        that waits is not waited for: gone.py)."""
        self.input_ended = True
        gone.cut_waits(self)
        self.pause_reading("shutdown")
        if self.state.life is OPEN:
            self.close_after_replies()

    def quit(self) -> None:
        """QUIT: +OK, and nothing after it is read."""
        self._end(None)

    def _protocol_error(self, reply: bytes) -> None:
        """The request after those read is malformed: its error, and nothing after it is read."""
        self._end(reply)

    def _end(self, error) -> None:
        """QUIT (`error` None) or a protocol error: its reply, then close."""
        stream = self.stream
        own = self.own
        if stream is not None and not stream.conn.closed:
            # The server closes the stream's connection after what it owes (streamorder.py).
            StreamOrder.of(self, stream).end(error)
        elif own is not None and own.pushes_to is not None and not own.closed:
            # It may push after the last reply (the invalidation of a key the client just wrote):
            # asked to end as the client's bytes would end it, it writes those first.
            own.close_asked = True
            if error is None:
                self.send(own, QUIT, 1)
            else:
                self.send(own, MALFORMED, 1, ReplacingSink(self, error))
        else:
            self.answer_locally(errors.OK if error is None else error)
        self.input_ended = True
        self.close_after_replies()

    def noauth(self) -> None:
        self.answer_locally(errors.NOAUTH)

    def describe(self) -> str:
        return f"{_peer(self.peer)} {self.state.lane}{' ' + self.app if self.app else ''}"


def _peer(peer) -> str:
    return f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) and len(peer) >= 2 else str(peer)


__all__ = ["Session"]

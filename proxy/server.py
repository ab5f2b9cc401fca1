"""The client side: one session per client connection, replies in order, pinning when needed.

Theory of operation: a session reads batches of complete requests and forwards each run of
ordinary commands as one slice of the client's own bytes to its current upstream connection,
with one `Slot` that expects that many replies. A client's slots form a queue in request order;
the head slot writes straight to the client as bytes arrive, later slots buffer until they
become the head, so a reply always reaches the client that asked, in order, whichever upstream
connection answered it. Changing upstream connection (another database's pool, a dedicated
connection) waits until the client has nothing in flight on the old one, so its commands still
run in the order it sent them. Flow control: a client that does not read its replies pauses the
upstream connection feeding it (and its own request reading); an upstream that does not take
requests pauses the clients writing to it.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import logging
import socket

import hiredis

from . import connstate, errors, metrics
from .connstate import (HELLO, LOCKED, LOGIN, PASS, QUIT, RESET, SELECT, STREAM, SUBCOMMAND, TXN_BEGIN,
                        TXN_DISCARD, TXN_EXEC, Guard, strict_int)
from .login import parse_auth, parse_hello
from .policy.base import AUDIT, Finding
from .policy.engine import SessionState, Verdict
from .resp.reader import ParseLimits, RequestReader
from .slots import HiddenCommand, LaterCommands, ReplacingSink, ScriptVerdictSink, Slot, keep
from .throttle import THROTTLE
from .upstream.connection import CLOSED, HiddenSlot, SharedPool, open_connection, startup_commands

log = logging.getLogger("redis_guard.server")

HELD = -1
POLICY_FAILED = Verdict(Finding("policy", "internal error", "command",
                                "the proxy could not decide on it; see the proxy's log"))


class ClientSession(asyncio.Protocol):
    __slots__ = (
        "proxy", "loop", "transport", "peer", "reader", "slots", "inflight", "db", "protocol", "pool_index", "upstream", "dedicated", "streaming",
        "held", "closing", "closed", "write_paused", "reading_paused",
        "waiting_upstreams", "buffer_limit", "policy_state", "txn_dirty", "after_exec",
        "engine", "plans", "dispatch", "app", "locked", "unknown", "login_result", "verifying",
    )

    def __init__(self, proxy: "Proxy"):
        self.proxy = proxy
        self.loop = proxy.loop
        self.transport = None
        self.peer = None
        self.reader = RequestReader(proxy.parse_limits)
        self.slots = collections.deque()
        self.inflight = 0  # slots still waiting for upstream replies
        self.db = proxy.upstream.db
        self.protocol = 2
        self.pool_index = proxy.assign_shared()
        self.upstream = None  # current connection; shared ones are looked up again when closed
        self.dedicated = False
        self.streaming = None  # the stream slot once replies are no longer paired
        self.held = None  # (batch, index) waiting for in-flight replies before a switch
        self.closing = False
        self.closed = False
        self.write_paused = False
        self.reading_paused = set()  # reasons reading from the client is paused
        self.waiting_upstreams = set()  # upstream connections paused until we catch up
        self.buffer_limit = proxy.config.limits.client_write_buffer
        self.policy_state = SessionState()
        self.txn_dirty = False  # the policy rejected a command queued in the open MULTI
        self.after_exec = []  # hidden commands the policy adds once the transaction has run
        self.app = None  # the application the client authenticated as (its name)
        self.login_result = None  # (AUTH/HELLO arguments, application name or None) once checked
        self.verifying = False  # a password check is running in a worker thread
        self._bind()

    def _bind(self) -> None:
        """Take the engine and command actions of the client's application (or of no application)
        under the proxy's current policy; on reload an application removed from the policy leaves
        its clients unauthenticated."""
        proxy = self.proxy
        tenants = proxy.tenants
        if self.app is not None and (tenants is None or tenants.engine(self.app) is None):
            self.app = None
        self.engine, self.plans = proxy.bindings[self.app]
        self.locked = tenants is not None and tenants.required and self.app is None
        self.unknown = LOCKED if self.locked else PASS
        if self.locked:
            self.plans = {}  # NOAUTH comes before any policy decision
            self._use_actions(proxy.locked_actions)
        elif tenants is not None:
            self._use_actions(proxy.login_actions[self.dedicated])
        else:
            self._use_actions(proxy.dedicated_actions if self.dedicated else proxy.shared_actions)

    def _use_actions(self, actions: dict) -> None:
        self.dispatch = self.proxy.dispatch_table(actions, self.plans)  # name -> action, or Guard

    # -- transport events -------------------------------------------------------------------

    def connection_made(self, transport) -> None:
        self.transport = transport
        self.peer = transport.get_extra_info("peername")
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass
        transport.set_write_buffer_limits(high=self.buffer_limit)
        self.proxy.sessions.add(self)
        metrics.CLIENTS.inc()

    def connection_lost(self, exc) -> None:
        metrics.CLIENTS.dec()
        self.closed = True
        self.proxy.sessions.discard(self)
        self._release_upstreams()
        if self.dedicated and self.upstream is not None:
            self.upstream.close()
        self.slots.clear()

    def data_received(self, data: bytes) -> None:
        if self.held is None and not self.closing:
            batch = self.reader.feed_read(data)
            if batch is not None:
                self._handle(batch)
        else:
            self.reader.feed(data)

    def eof_received(self):
        # Redis answers what was sent before a half-close; so do we, then close.
        self.closing = True
        self._maybe_close()
        return True

    def pause_writing(self) -> None:
        self.write_paused = True
        self._pause_reading("client-slow")

    def resume_writing(self) -> None:
        self.write_paused = False
        self._resume_reading("client-slow")
        self._release_upstreams()

    # -- requests ---------------------------------------------------------------------------

    def _process(self) -> None:
        read = self.reader.read
        while self.held is None and not self.closing:
            batch = read()
            if batch is None:
                return
            self._handle(batch)

    def _handle(self, batch) -> None:
        if batch.commands:
            self._run(batch, 0)
            if self.held is not None:
                return  # a protocol error after them is answered by _resume_held
        if batch.error is not None:
            self._local(batch.error.reply)
            self.closing = True
            self._maybe_close()

    def _run(self, batch, index: int) -> None:
        commands = batch.commands
        count = len(commands)
        start = index
        dispatch = self.dispatch
        engine = self.engine
        good_keys = engine.good_keys if engine is not None else None
        key_classes = engine.key_classes if engine is not None else None
        state = self.policy_state
        while index < count:
            args = commands[index]
            name = args[0]
            action = dispatch.get(name)
            if action is None:
                action = dispatch.get(name.lower(), self.unknown)
            if action.__class__ is Guard:
                if not (action.keys_only and len(args) > 1 and (
                        args[1].translate(key_classes) in good_keys or engine.key_ok(args[1]))) and not (
                        action.passed_before(args, state)):
                    verdict = self._decide(action.plan, commands, index)
                    if verdict is not None:
                        next_index = self._apply_verdict(verdict, batch, start, index)
                        if next_index is not None:
                            start = index = next_index
                            continue
                action = action.action
            if action == PASS:
                index += 1
                continue
            if action == SUBCOMMAND:
                action = connstate.client_action(args, self.dedicated)
                if action == PASS:
                    index += 1
                    continue
            next_index = self._special(action, batch, start, index)
            if next_index == HELD:
                return
            start = index = next_index
            # AUTH, HELLO and RESET may have changed the client's application.
            dispatch = self.dispatch
            engine = self.engine
            good_keys = engine.good_keys if engine is not None else None
            key_classes = engine.key_classes if engine is not None else None
            state = self.policy_state
            if self.closing:
                return
        if start < count:
            self._forward(batch.raw if start == 0 else batch.span(start, count), count - start)

    def _decide(self, plan, commands, index: int):
        try:
            return self.engine.decide(
                plan, commands[index], LaterCommands(commands, index + 1), self.policy_state)
        except Exception:  # a bug in a rule must not take the connection down
            log.exception("policy engine failed on %r", commands[index][0])
            return POLICY_FAILED

    def _special(self, action: int, batch, start: int, index: int) -> int:
        """Handle commands[index]; commands[start:index] are ordinary and not yet sent.
        Returns where to continue: index to dispatch it again under the new state, index + 1
        when it was answered here, HELD when waiting for in-flight replies."""
        args = batch.commands[index]
        if start < index:
            self._forward(batch.span(start, index), index - start)
        if action == QUIT:
            self._local(errors.OK)
            self.closing = True
            self._maybe_close()
            return index + 1
        if action == LOCKED:
            self._local(errors.NOAUTH)
            return index + 1
        if action == LOGIN:
            return self._login(batch, index)
        if action == RESET:
            return self._reset(batch, index)
        if action == TXN_BEGIN:
            self.policy_state.in_multi = True
            self._forward(batch.span(index, index + 1), 1)
            return index + 1
        if action == TXN_EXEC or action == TXN_DISCARD:
            return self._end_transaction(action, batch, index)
        if action == STREAM and self.dedicated:
            self._forward(batch.span(index, index + 1), 1, stream=True)
            return index + 1
        if action == SELECT:
            db = strict_int(args[1]) if len(args) == 2 else None
            if db is None or db == self.db or not 0 <= db < self.proxy.databases:
                # Redis answers with an error (or nothing changes): any connection will do.
                self._forward(batch.span(index, index + 1), 1)
                return index + 1
            return self._switch(batch, index, db=db)
        if action == HELLO:
            if len(args) == 1:
                self._forward(batch.span(index, index + 1), 1)
                return index + 1
            version = strict_int(args[1]) if len(args) == 2 else None
            if len(args) == 2 and version not in (2, 3):
                # -NOPROTO and no change of state
                self._forward(batch.span(index, index + 1), 1)
                return index + 1
            if version is not None:
                if version == self.protocol:
                    self._forward(batch.span(index, index + 1), 1)
                    return index + 1
                return self._switch(batch, index, protocol=version)
        # PIN, STREAM, or HELLO with AUTH/SETNAME: move to our own connection.
        return self._switch(batch, index, dedicated=True)

    # -- applications: the proxy authenticates clients ---------------------------------------

    def _login(self, batch, index: int) -> int:
        """AUTH or HELLO, answered by the proxy: the credentials are checked here and never
        forwarded; HELLO then runs upstream without them (its reply is Redis's own)."""
        args = batch.commands[index]
        is_auth = args[0].lower() == b"auth"
        login = parse_auth(args) if is_auth else parse_hello(args)
        if isinstance(login, bytes):
            self._local(login)
            return index + 1
        if login.user is not None:
            app = self._check(batch, index, login)
            if app == HELD:
                return HELD
            if app is None:
                self._local(errors.WRONGPASS)
                return index + 1
            if app != self.app:
                self.app = app
                self._bind()
        elif self.locked:
            self._local(errors.NOAUTH_HELLO)
            return index + 1
        if is_auth:
            self._local(errors.OK)
            return index + 1
        return self._hello(batch, index, login.hello)

    def _check(self, batch, index: int, login):
        """The application name for these credentials, None when wrong, or HELD while the slow
        hash runs in a worker thread (the client's later requests wait, in order)."""
        args = batch.commands[index]
        done = self.login_result
        if done is not None and done[0] is args:  # dispatched again after a switch or the check
            return done[1]
        proxy = self.proxy
        tenants = proxy.tenants
        tag = tenants.tag(login.user, login.password)
        app = tenants.cached(tag)
        if app is not None:
            self.login_result = (args, app.name)
            return app.name
        self.held = (batch, index)
        self.verifying = True
        self._pause_reading("auth")
        # Connections of one client pool arrive together with the same credentials: one check.
        future = proxy.checks.get(tag)
        if future is None:  # after this address's turn: failed attempts slow down (issue 14)
            future = proxy.checks[tag] = THROTTLE.check(self.loop, self.peer, tenants.check, login.user, login.password)
            future.add_done_callback(functools.partial(proxy.checked, tenants, tag))
        future.add_done_callback(functools.partial(self._checked, args))
        return HELD

    def _checked(self, args, future) -> None:
        app = None if future.cancelled() or future.exception() is not None else future.result()
        self.login_result = (args, app.name if app is not None else None)
        self.verifying = False
        if self.closed:
            return
        self._resume_reading("auth")
        self._resume_held(checked=True)

    def _hello(self, batch, index: int, hello: list[bytes]) -> int:
        """HELLO without credentials: a protocol switch, or a dedicated connection for SETNAME."""
        args = batch.commands[index]
        data = batch.span(index, index + 1) if len(hello) == len(args) else hiredis.pack_command(tuple(hello))
        version = int(hello[1]) if len(hello) > 1 else None
        if self.dedicated:
            if version is not None:
                self.protocol = self.policy_state.protocol = version
        elif len(hello) > 2:  # SETNAME: the name lives on a connection of the client's own
            return self._switch(batch, index, dedicated=True)
        elif version is not None and version != self.protocol:
            return self._switch(batch, index, protocol=version)
        self._forward(data, 1)
        return index + 1

    def _reset(self, batch, index: int) -> int:
        """RESET: the client is no application again, in a fresh connection state."""
        upstream = self.proxy.upstream
        if not self.dedicated and (self.db != upstream.db or self.protocol != 2):
            return self._switch(batch, index, db=upstream.db, protocol=2)  # then dispatched again
        self.app = None
        self.login_result = None
        self.policy_state = SessionState()
        self.txn_dirty = False
        self.after_exec = []
        self._bind()
        if not self.dedicated:
            self._local(errors.RESET)
            return index + 1
        self._forward(batch.span(index, index + 1), 1)
        self.db, self.protocol = upstream.db, 2
        # Redis's RESET logs the connection out too: log the proxy's own connection back in.
        restore = startup_commands(upstream, upstream.db, 2)
        if restore and self.streaming is None and not self.upstream.closed:
            self.upstream.send(b"".join(map(hiredis.pack_command, restore)), HiddenSlot(len(restore)))
        return index + 1

    # -- policy ----------------------------------------------------------------------------

    def _apply_verdict(self, verdict, batch, start: int, index: int):
        """Apply the engine's verdict on commands[index]. Returns where to continue, or None
        when the command goes on as usual (findings in audit mode only)."""
        args = batch.commands[index]
        policy = self.engine.policy.name
        for finding in verdict.findings:
            metrics.record(finding, "audited" if finding.mode == AUDIT else "rejected", args, self.peer, policy,
                           app=self.app)
        if verdict.reject is None:
            for rule in verdict.rewritten_by:
                metrics.count_rewrite(rule, policy, self.app)
        if verdict.reject is None and verdict.commands is None:
            return None
        if start < index:
            self._forward(batch.span(start, index), index - start)
        if verdict.reject is not None:
            self._local(errors.policy_violation(verdict.reject))
            if self.policy_state.in_multi:
                self.txn_dirty = True  # Redis, too, aborts EXEC after a command it refused to queue
            return index + 1
        first, *extra = verdict.commands
        self._forward(hiredis.pack_command(tuple(first)), 1,
                      observe=args if first[0] in (b"EVAL", b"EVALSHA", b"EVAL_RO") else None)
        if extra:
            if self.policy_state.in_multi:
                self.after_exec.extend(extra)  # extra replies would change what EXEC returns
            else:
                self._send_hidden(extra)
        return index + 1

    def _send_hidden(self, commands) -> None:
        """Commands the policy adds after the client's, on the same connection, replies unseen."""
        conn = self.upstream
        if conn is not None and not conn.closed:
            for cmd in commands:  # one slot each, so that a failure names its command
                request = hiredis.pack_command(tuple(cmd))
                conn.send(request, HiddenCommand(request, conn))

    def _end_transaction(self, action: int, batch, index: int) -> int:
        state = self.policy_state
        dirty, extra = self.txn_dirty, self.after_exec
        unmet = state.unmet() if action == TXN_EXEC and not dirty else ()
        state.end_transaction()
        self.txn_dirty = False
        self.after_exec = []
        if unmet:
            engine = self.engine
            unmet = [engine.with_mode(finding) for finding in unmet]
            for finding in unmet:
                metrics.record(finding, "audited" if finding.mode == AUDIT else "rejected",
                               batch.commands[index], self.peer, engine.policy.name, app=self.app)
            unmet = [finding for finding in unmet if finding.mode != AUDIT]
        if unmet:
            reply = errors.policy_violation(unmet[0])
        if action == TXN_EXEC and (dirty or unmet):
            # Nothing of the transaction may run: discard it upstream, answer as Redis would.
            self._forward(hiredis.pack_command(("DISCARD",)), 1,
                          replace=reply if unmet else errors.EXECABORT)
            return index + 1
        self._forward(batch.span(index, index + 1), 1)
        if action == TXN_EXEC and extra:
            self._send_hidden(extra)
        return index + 1

    def _switch(self, batch, index: int, db=None, protocol=None, dedicated=False) -> int:
        if self.inflight:
            self.held = (batch, index)
            self._pause_reading("switch")
            return HELD
        if dedicated:
            self.dedicated = True
            self._bind()
            args = batch.commands[index]
            # With applications the proxy answers AUTH itself: client credentials stay here.
            authenticating = self.proxy.tenants is None and connstate.authenticates(args)
            # The client's own AUTH goes first: on a server that now requires a password, the
            # proxy's HELLO/SELECT would be refused before it.
            self.upstream = open_connection(
                self.loop, self.proxy.upstream,
                0 if authenticating else self.db, 2 if authenticating else self.protocol,
                self.proxy.config.connect_timeout, self._dedicated_closed,
            )
            if authenticating:
                self._forward(batch.span(index, index + 1), 1)
                restore = []
                if self.protocol == 3 and args[0].lower() == b"auth":
                    restore.append(("HELLO", "3"))
                if self.db:
                    restore.append(("SELECT", str(self.db)))
                if restore:
                    self.upstream.send(b"".join(map(hiredis.pack_command, restore)), HiddenSlot(len(restore)))
                return index + 1
        else:
            if db is not None:
                self.db = db
            if protocol is not None:
                self.protocol = protocol
                self.policy_state.protocol = protocol  # scripts the policy sends answer in it
            self.upstream = None
        return index

    def _dedicated_closed(self, conn) -> None:
        if conn is self.upstream and not self.closed:
            # The client's connection state is gone with it; Redis clients expect a drop.
            self.closing = True
            self._maybe_close()

    def _current_upstream(self):
        conn = self.upstream
        if conn is not None and (self.dedicated or conn.state is not CLOSED):
            return conn
        pool = self.proxy.pool(self.db, self.protocol)
        conn = self.upstream = pool.get(self.pool_index)
        return conn

    def _forward(self, data: bytes, count: int, stream: bool = False, replace: bytes | None = None,
                 observe=None) -> None:
        if self.streaming is not None:
            self.upstream.send(data, None)
            return
        conn = self.upstream
        if conn is None or conn.state is CLOSED:
            conn = self._current_upstream()
        if conn is None or conn.state is CLOSED:
            reason = conn.close_reason if conn is not None else self.proxy.pool(self.db, self.protocol).failed_reason
            error = errors.upstream_unavailable(self.proxy.upstream_label, reason or "not connected")
            self._local(error * count)
            return
        slot = Slot(self, -1 if stream else count, conn)
        if stream:
            self.streaming = slot
        else:
            slot.session = self.receiver(replace, observe)
        self.slots.append(slot)
        self.inflight += 1
        conn.send(data, slot)
        self._wait_if_slow(conn)

    def _wait_if_slow(self, conn) -> None:
        """The upstream's write buffer is full: read no more of this client until it drains."""
        if conn.write_paused:
            conn.blocked_sessions.add(self)
            self._pause_reading("upstream-slow")

    def receiver(self, replace: bytes | None, observe):
        """Who receives a slot's replies: the session, or a sink that swaps or observes them."""
        if replace is not None:
            return ReplacingSink(self, replace)
        if observe is not None:
            return ScriptVerdictSink(self, observe)
        return self

    def upstream_writable(self) -> None:
        self._resume_reading("upstream-slow")

    # -- replies ----------------------------------------------------------------------------

    def deliver(self, slot: Slot, data: bytes, done: int) -> None:
        if self.closed:
            if done and slot.remaining > 0:
                slot.remaining -= done
            return
        slots = self.slots
        if slots and slots[0] is slot:
            self.transport.write(data)
            if done:
                remaining = slot.remaining = slot.remaining - done
                if remaining == 0:
                    slots.popleft()
                    self.inflight -= 1
                    if slots or self.held is not None or self.closing or self.waiting_upstreams:
                        self._head_done()
            if self.write_paused:
                self._hold_upstream(slot)
            return
        held = keep(slot, data)
        if done:
            slot.remaining -= done
            if slot.remaining == 0:
                self._slot_done()
        if held > self.buffer_limit:
            self._hold_upstream(slot)

    def _head_done(self) -> None:
        if self.inflight == 0 and self.held is not None:
            self.loop.call_soon(self._resume_held)
        self._advance()

    def _hold_upstream(self, slot: Slot) -> None:
        conn = slot.conn
        if conn is not None and conn not in self.waiting_upstreams:
            self.waiting_upstreams.add(conn)
            conn.pause_for(self)

    def _release_upstreams(self) -> None:
        waiting, self.waiting_upstreams = self.waiting_upstreams, set()
        for conn in waiting:
            conn.resume_for(self)

    def _slot_done(self) -> None:
        self.inflight -= 1
        if self.inflight == 0 and self.held is not None:
            self.loop.call_soon(self._resume_held)

    def _resume_held(self, checked: bool = False) -> None:
        """Dispatch the held request again: after a switch once nothing is in flight, after a
        password check (`checked`) at once, since its reply is the proxy's own."""
        if self.held is None or self.closed or self.verifying or (self.inflight and not checked):
            return
        batch, index = self.held
        self.held = None
        self._resume_reading("switch")
        self._run(batch, index)
        if self.held is None:
            if batch.error is not None:
                self._local(batch.error.reply)
                self.closing = True
                self._maybe_close()
            elif not self.closing:
                self._process()

    def _advance(self) -> None:
        """The head slot completed: flush the slots behind it that have replies waiting."""
        slots = self.slots
        while slots:
            head = slots[0]
            if head.buffered is not None:
                self._write(b"".join(head.buffered))
                head.buffered = None
                head.buffered_size = 0
            if head.remaining != 0:
                break
            slots.popleft()
        if not self.write_paused:
            self._release_upstreams()
        if self.closing:
            self._maybe_close()

    def slot_failed(self, slot: Slot, error: bytes, partial: bool) -> None:
        if slot.remaining == 0:
            return
        if partial or slot.remaining < 0:
            # The client has part of a reply (or a stream): nothing sensible can follow it.
            slot.remaining = 0
            self._slot_done()
            self.closing = True
            self.transport_abort_after_flush(slot)
            return
        count = slot.remaining
        slot.remaining = 0
        if self.slots and self.slots[0] is slot:
            self._write(error * count)
            self.slots.popleft()
            self.inflight -= 1
            self._head_done()
        else:
            slot.buffered = (slot.buffered or []) + [error * count]
            self._slot_done()

    def transport_abort_after_flush(self, slot: Slot) -> None:
        if self.slots and self.slots[0] is slot:
            self.slots.clear()
            if self.transport is not None:
                self.transport.close()
        else:
            # Replies before it are still owed; the truncated one will close the connection.
            slot.buffered = None
            self._maybe_close()

    def _local(self, reply: bytes) -> None:
        """A reply the proxy writes itself, in order after everything before it."""
        if not self.slots:
            self._write(reply)
            return
        stream = self.streaming
        if stream is not None:
            # Nothing is paired on a stream: the reply goes after what the stream has so far.
            if self.slots[0] is stream:
                self._write(reply)
            else:
                stream.buffered = (stream.buffered or []) + [reply]
            return
        slot = Slot(self, 0)
        slot.buffered = [reply]
        slot.buffered_size = len(reply)
        self.slots.append(slot)

    def _write(self, data: bytes) -> None:
        # Written at once: replies for one client arrive once per upstream read, so deferring
        # to the next loop tick would add a callback without saving a system call.
        if not self.closed:
            self.transport.write(data)

    def _maybe_close(self) -> None:
        """Close once every reply owed has been written (QUIT, protocol error, shutdown)."""
        if self.closed or not self.closing or self.held is not None:
            return
        slots = self.slots
        if slots and not (len(slots) == 1 and slots[0] is self.streaming):
            return
        self.transport.close()

    def _pause_reading(self, reason: str) -> None:
        if not self.reading_paused and self.transport is not None and not self.closed:
            self.transport.pause_reading()
        self.reading_paused.add(reason)

    def _resume_reading(self, reason: str) -> None:
        if reason in self.reading_paused:
            self.reading_paused.discard(reason)
            if not self.reading_paused and self.transport is not None and not self.closed:
                self.transport.resume_reading()

    # -- shutdown ---------------------------------------------------------------------------

    def drain(self) -> None:
        """Stop taking requests; close once the replies owed are written."""
        self._pause_reading("shutdown")
        self.closing = True
        self._maybe_close()


class Proxy:
    """Owns the listening socket, the shared pools and the command tables of one process."""

    session_class = ClientSession

    def __init__(self, loop, config, command_table, databases: int = 16, engine=None):
        self.loop = loop
        self.config = config
        self.upstream = config.upstream
        self.upstream_label = str(config.upstream.address)
        self.parse_limits = ParseLimits(
            max_args=config.limits.max_args,
            max_request_bytes=config.limits.max_request_bytes,
        )
        self.databases = databases
        self.command_table = command_table
        blocking = [spec.name for spec in command_table if "blocking" in spec.flags and "|" not in spec.name]
        self.shared_actions, self.dedicated_actions = connstate.build_actions(
            [spec.name for spec in command_table if "|" not in spec.name], blocking
        )
        shared, dedicated, self.locked_actions = connstate.build_login_actions(
            self.shared_actions, self.dedicated_actions)
        self.login_actions = (shared, dedicated)  # indexed by ClientSession.dedicated
        self.engine = None
        self.tenants = None
        self.bindings: dict = {}
        self.sessions: set[ClientSession] = set()
        self.set_engine(engine)
        self.pools: dict[tuple[int, int], SharedPool] = {}
        self._next_shared = 0
        self.server = None

    def set_engine(self, engine) -> None:
        """Use a (new) policy from the next command of every connection on. A client that
        authenticated as an application keeps it when the new policy has one of that name."""
        self.engine = engine
        self.tenants = engine.tenants if engine is not None else None
        self.checks = {}  # password checks running, by credentials tag
        self.bindings = {None: (engine, engine.plans if engine is not None else {})}
        if self.tenants is not None:
            for name, app_engine in self.tenants.engines.items():
                self.bindings[name] = (app_engine, app_engine.plans)
        self.dispatch_tables = {}  # (id of an action table, id of a plans dict) -> both in one
        for session in self.sessions:
            session._bind()

    def checked(self, tenants, tag: bytes, future) -> None:
        """A password check finished: remember good credentials for the next connections."""
        if self.checks.get(tag) is future:
            del self.checks[tag]
        if not future.cancelled() and future.exception() is None and future.result() is not None:
            tenants.remember(tag, future.result())

    def dispatch_table(self, actions: dict, plans: dict) -> dict:
        """A session's table (`connstate.dispatch_table`), shared by the sessions that have the
        same actions under the same engine; both stay alive until `set_engine` drops the tables."""
        if not plans:
            return actions
        key = (id(actions), id(plans))
        table = self.dispatch_tables.get(key)
        if table is None:
            table = self.dispatch_tables[key] = connstate.dispatch_table(actions, plans)
        return table

    def assign_shared(self) -> int:
        index = self._next_shared
        self._next_shared = (index + 1) % self.config.shared_connections
        return index

    def pool(self, db: int, protocol: int) -> SharedPool:
        key = (db, protocol)
        pool = self.pools.get(key)
        if pool is None:
            pool = self.pools[key] = SharedPool(
                self.loop, self.upstream, db, protocol,
                self.config.shared_connections, self.config.connect_timeout,
            )
        return pool

    async def start(self, sock: socket.socket | None = None, reuse_port: bool = False):
        listen = self.config.listen
        if sock is not None:
            self.server = await self.loop.create_server(lambda: self.session_class(self), sock=sock)
        else:
            self.server = await self.loop.create_server(
                lambda: self.session_class(self), listen.host, listen.port,
                reuse_address=True, reuse_port=reuse_port or None, backlog=1024,
            )
        return self.server

    @property
    def bound_address(self):
        return self.server.sockets[0].getsockname()

    def log_state(self) -> None:
        """SIGUSR1: one log line per pool connection and a count of sessions, for operators."""
        log.info("%d client sessions, %d dedicated, %d pools", len(self.sessions),
                 sum(1 for session in self.sessions if session.dedicated), len(self.pools))
        for (db, protocol), pool in self.pools.items():
            for index, conn in enumerate(pool.connections):
                if conn is not None:
                    log.info("pool db=%d resp=%d #%d: %s, %d runs in flight, %d queued writes%s%s",
                             db, protocol, index, conn.state, len(conn.pending), len(conn.out),
                             ", reading paused" if conn.read_paused_by else "",
                             ", writing paused" if conn.write_paused else "")

    async def shutdown(self, timeout: float) -> None:
        """Stop accepting, let in-flight replies finish (bounded), then close everything."""
        if self.server is not None:
            self.server.close()
        for session in list(self.sessions):
            session.drain()
        deadline = self.loop.time() + timeout
        while self.sessions and self.loop.time() < deadline:
            await asyncio.sleep(0.02)
        for session in list(self.sessions):
            if session.transport is not None:
                session.transport.abort()
        for pool in self.pools.values():
            pool.close()

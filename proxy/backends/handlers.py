"""What a session does for each action that is not PASS: the standalone column of the handlers.

Theory of operation: a handler takes the session, the batch and the index of the command and
returns where the dispatch loop goes on: `index + 1` when the command was sent or answered,
`index` to dispatch it again under the state the handler moved to (a lane, a database), or
`HELD` when the session waits (`Session.wait`: the client's replies in flight finish before it
moves to another connection, so its commands run in the order it sent them). `COMMON` are the
handlers every backend shares; `STANDALONE` adds those of a single server (also behind Redis
Sentinel); a cluster's column is in `proxy/backends/cluster/handlers.py`. Which action a command has is
`behaviour.py`'s business; what each lane means is `states.py`'s.
"""

from __future__ import annotations

import asyncio
import logging

import hiredis

from .. import errors
from ..login import parse_hello
from ..pending import Receiver
from ..policy.decision import SessionState
from ..session import clientkill, paired_subscriptions, streamend
from ..session import tracking as tracking_ids
from ..session.behaviour import (
    AUTH,
    CLIENT_ID,
    CLIENT_KILL,
    CONFIG_SET,
    CONTROL,
    DISCARD,
    DRAIN,
    EXEC,
    HELLO,
    LEASE,
    LOCKED,
    LOGIN,
    MULTI,
    PASS,
    PIN,
    PROMOTE,
    QUIT,
    REFUSE,
    RESET,
    SELECT,
    SETINFO,
    STREAM,
    SUBCOMMAND,
    TRACKING,
    UNKNOWN,
    UNWATCH,
    WAIT,
    WATCH,
    authenticates,
    strict_int,
)
from ..session.pause import PauseWatch, watches
from ..session.states import HELD, LEASED, NONE, OPEN, SHARED, STREAMING, WATCHING

log = logging.getLogger("redis_guard.server")

# WAIT counts the replicas that acknowledged the writes of its own connection; the client's
# writes may have gone through others (a shared connection, an earlier lease). A PUBLISH is
# propagated to replicas like a write, so one sent first on the client's connection makes WAIT
# wait for everything written before it, on any connection. Nobody needs to listen.
WAIT_MARK = ("PUBLISH", "__redis_guard__:wait", "")


def forward_one(session, batch, index: int) -> int:
    session.route.forward(session, batch, index, index + 1)
    return index + 1


# -- every backend ------------------------------------------------------------------------------

def quit_(session, batch, index: int) -> int:
    session.quit()
    return index + 1


def locked(session, batch, index: int) -> int:
    session.noauth()
    return index + 1


def login(session, batch, index: int) -> int:
    if session.state.in_transaction and with_credentials(batch.commands[index]):
        # The proxy answers AUTH when it comes: queued, it could not run at EXEC. Refused, and EXEC
        # aborts, as after a command Redis refused to queue (it was answered +OK, then EXECABORT).
        session.answer_locally(errors.AUTH_IN_TRANSACTION)
        session.refused_in_transaction()
        return index + 1
    return session.login(batch, index)


def with_credentials(args: list[bytes]) -> bool:
    """AUTH, or a HELLO with AUTH: what the proxy answers itself (a HELLO without credentials is
    queued upstream, as Redis queues it)."""
    if args[0].lower() == b"auth":
        return True
    parsed = parse_hello(args)
    return not isinstance(parsed, bytes) and parsed.user is not None


def subcommand(session, batch, index: int) -> int:
    backend = session.backend
    action = backend.lane_action(session, backend.behaviour.subcommand(backend.column, batch.commands[index]))
    return session.redispatch(batch, index, action)


def promote(session, batch, index: int) -> int:
    """A command that leaves state on the lent connection: the client keeps it for good."""
    session.own.owner = session
    session.state.to("pin")
    session.bind()
    return index


def drain(session, batch, index: int) -> int:
    """Wait until the client's own connection has answered, then dispatch again."""
    if session.inflight:
        return session.wait(batch, index)
    if session.state.lane is LEASED and session.state.txn is NONE:
        session.release_lease()
    session.bind()
    return index


def refuse_in_transaction(session, batch, index: int) -> int:
    """A command the proxy must see run, queued in MULTI where it would run unseen at EXEC
    (CLIENT KILL could reach the proxy's own connections there): refused, and EXEC aborts, as
    Redis does after a command it refused to queue."""
    session.answer_locally(errors.not_in_transaction(batch.commands[index]))
    session.refused_in_transaction()
    return index + 1


def refuse(session, batch, index: int) -> int:
    session.answer_locally(errors.not_supported(batch.commands[index], session.backend.kind))
    return index + 1


def setinfo(session, batch, index: int) -> int:
    """CLIENT SETINFO (client libraries send it on connect): answered here when the server knows
    it, so that it pins nobody; a server that does not know it answers its own error."""
    args = batch.commands[index]
    if not session.backend.knows("client|setinfo"):
        return forward_one(session, batch, index)
    session.answer_locally(errors.client_setinfo(args))
    return index + 1


def config_set(session, batch, index: int) -> int:
    """CONFIG SET requirepass: the proxy's own new connections log in with the password of its
    upstream settings and would get NOAUTH (BLPOP, MULTI... on a lent connection): refused with
    the reason, and EXEC aborts after it in MULTI. Any other CONFIG SET goes to Redis."""
    args = batch.commands[index]
    if not any(arg.lower() == b"requirepass" for arg in args[2::2]):
        return forward_one(session, batch, index)
    session.answer_locally(errors.config_set_requirepass())
    session.refused_in_transaction()
    return index + 1


def control(session, batch, index: int) -> int:
    """SCRIPT KILL, FUNCTION KILL, CLIENT PAUSE/UNPAUSE...: on the control connection at once,
    never behind the work they control. Inside a transaction they are queued like the rest (a
    CLIENT PAUSE there takes effect at EXEC: `queued.ExecWatch`)."""
    if session.state.in_transaction:
        if watches(batch.commands[index]):
            session.queued_effects.append(batch.commands[index])
        return forward_one(session, batch, index)
    conn = session.backend.control_connection()
    if conn is None:
        session.no_connection(session.backend.control.opener, 1)
        return index + 1
    args = batch.commands[index]
    session.send(conn, batch.span(index, index + 1), 1, PauseWatch(session, args) if watches(args) else None)
    return index + 1


def client_kill(session, batch, index: int) -> int:
    args = batch.commands[index]
    if session.state.in_transaction:
        return refuse_in_transaction(session, batch, index)
    decision = clientkill.plan(args, session.backend.ours())
    if session.state.lane is STREAMING:
        # On a stream (after CLIENT REPLY OFF, MONITOR...) Redis answers in place, in a form that
        # reaches none of the proxy's connections (clientkill.on_stream).
        session.route.send(session, args, hiredis.pack_command(tuple(clientkill.on_stream(args, decision))), 1,
                           session)
        return index + 1
    if type(decision) is clientkill.Reply:
        session.answer_locally(decision.reply)
        return index + 1
    if type(decision) is clientkill.Forward:
        return forward_one(session, batch, index)
    pending = session.reply_later()
    caller = session.own.sockname if session.own is not None else None
    task = session.loop.create_task(kill_resolved(session.backend.control_connection, args, decision, session.backend,
                                                  caller))
    task.add_done_callback(lambda done: session.fill(pending, _task_reply(done)))
    return index + 1


async def kill_resolved(control_connection, args, decision, backend, caller_addr) -> bytes:
    """Validate, list, kill by ID what the filters match apart from the proxy's own."""
    conn = control_connection()
    if conn is None:
        raise ConnectionError("no control connection")
    (checked,) = await conn.ask([decision.validation(args)])
    if isinstance(checked, hiredis.ReplyError):
        return errors.resp_error(str(checked))
    (listing,) = await conn.ask([("CLIENT", "LIST")])
    rows = clientkill.parse_client_list(listing if isinstance(listing, bytes) else b"")
    ids = clientkill.matching(decision.filters, rows, backend.ours(), caller_addr)
    killed = 0
    if ids:
        replies = await conn.ask([("CLIENT", "KILL", "ID", str(client_id)) for client_id in ids])
        killed = sum(reply for reply in replies if isinstance(reply, int))
    return b":%d\r\n" % killed


def _task_reply(task: asyncio.Task) -> bytes:
    if task.cancelled():
        return errors.resp_error("ERR the proxy was stopped before the command completed")
    exc = task.exception()
    if exc is not None:
        log.warning("CLIENT KILL through the control connection failed: %s", exc)
        return errors.resp_error(f"ERR the proxy could not complete the command: {errors.unnamed(str(exc), '')}")
    return task.result()


COMMON = {
    QUIT: quit_,
    LOCKED: locked,
    LOGIN: login,
    SUBCOMMAND: subcommand,
    PROMOTE: promote,
    DRAIN: drain,
    REFUSE: refuse,
    SETINFO: setinfo,
}


# -- a single server ----------------------------------------------------------------------------

def take_own(session, batch, index: int, event: str):
    """Move to a lent connection (a warm spare) once nothing is in flight: HELD, None when the
    upstream is unavailable (the session closes), or the connection."""
    if session.inflight:
        return HELD
    conn = session.backend.lease(session, batch.commands[index])
    if conn is None:
        session.no_connection(session.backend.opener_for(session), 1)
        return None
    conn.owner = session
    session.use_own(conn, event)
    return conn


def on_own(session, batch, index: int, event: str = "lease"):
    """Make sure the client is on a connection of its own: None when it is (or now is), else
    where dispatch goes on (HELD while its replies in flight come back; index + 1 when no
    connection could be had and the client was answered or is closing)."""
    if session.state.lane is not SHARED:
        return None
    taken = take_own(session, batch, index, event)
    if taken is HELD:
        return session.wait(batch, index)
    return None if taken is not None else index + 1


def _moved(session, batch, index: int, event: str) -> int:
    """Dispatch again on a connection of the client's own (`event`: lease or pin)."""
    taken = take_own(session, batch, index, event)
    if taken is HELD:
        return session.wait(batch, index)
    return index if taken is not None else index + 1


def pin(session, batch, index: int) -> int:
    return _moved(session, batch, index, "pin")


def lease(session, batch, index: int) -> int:
    return _moved(session, batch, index, "lease")


def stream(session, batch, index: int) -> int:
    """From this command on, the client's replies are no longer paired with its requests, until
    nothing more can arrive unasked (streamend.py)."""
    done = streamend.no_new_stream(session, batch, index)
    if done is not None:
        return done
    moved = on_own(session, batch, index, "pin")
    if moved is not None:
        return moved
    if paired_subscriptions.pairs(session, batch.commands[index]) and session.own.protocol == 3:
        # (RESP3: the client's own connection for good, its replies paired)
        if session.state.lane is LEASED:
            promote(session, batch, index)
        subscriptions = session.pubsub or paired_subscriptions.Subscriptions(session)
        return paired_subscriptions.send(session, session.own, subscriptions, batch, index)
    return streamend.start(session, batch, index)


def tracking(session, batch, index: int) -> int:
    """CLIENT TRACKING: invalidation messages arrive unasked, as RESP3 pushes on the client's own
    connection (in RESP2, on the REDIRECT connection, a subscriber's stream). That connection is
    the client's for good, and its pushes go to the client apart from its replies, which stay
    paired (`UpstreamConnection.take_pushes`): the policy's own commands and checks still apply.
    A REDIRECT names a connection of the same client only (`tracking.py`); on a stream (CLIENT
    REPLY OFF, MONITOR) the command goes there, checked the same."""
    args = batch.commands[index]
    rewritten = tracking_ids.checked(session, args)
    if session.state.lane is not STREAMING:
        moved = on_own(session, batch, index, "pin")
        if moved is not None:
            return moved
        if session.state.lane is LEASED:
            promote(session, batch, index)  # (a transaction's: the connection stays the client's)
        if session.own.pushes_to is None:  # (else a client's subscriptions take them, and pass them on)
            session.own.take_pushes(session)
    if rewritten is None:
        return forward_one(session, batch, index)
    session.route.send(session, args, hiredis.pack_command(tuple(rewritten)), 1, session)
    return index + 1


def client_id(session, batch, index: int) -> int:
    """CLIENT ID: the id of the client's connection of its own (for good, as any connection
    state), noted as handed to this client: what a CLIENT TRACKING REDIRECT may name
    (`tracking.py`). Inside MULTI it is queued like the rest (its id unnoted)."""
    if len(batch.commands[index]) != 2:
        return forward_one(session, batch, index)  # Redis's arity error
    moved = on_own(session, batch, index, "pin")
    if moved is not None:
        return moved
    if session.state.lane is LEASED:
        promote(session, batch, index)
    if session.state.in_transaction:
        return forward_one(session, batch, index)
    conn = session.own
    session.send(conn, batch.span(index, index + 1), 1, tracking_ids.ClientIdReply(session, conn))
    return index + 1


class OnReply(Receiver):
    """Stands in for the session for one reply: `then(ok)` learns whether Redis accepted the
    command (ok) or refused it (an error reply), before the client's next command goes."""

    __slots__ = ("session", "then", "first")

    def __init__(self, session, then):
        self.session = session
        self.then = then
        self.first = True

    def deliver(self, pending, data: bytes, done: int) -> None:
        if self.first:
            self.first = False
            self.then(data[:1] != b"-")
        self.session.deliver(pending, data, done)

    def pending_failed(self, pending, error: bytes, partial: bool) -> None:
        self.session.pending_failed(pending, error, partial)


def switch_pool(session, batch, index: int, db: int, protocol: int) -> int:
    return switch_pool_with(session, batch, index, db, protocol, batch.span(index, index + 1))


def switch_pool_with(session, batch, index: int, db: int, protocol: int, data: bytes) -> int:
    """SELECT or HELLO on the shared connections: the client moves to the pool of that database
    and protocol, the command goes there, and the client's next command waits for its reply:
    when Redis refuses it (BUSY, NOAUTH...) the client stays where it was."""
    if session.inflight:
        return session.wait(batch, index)
    backend = session.backend
    old = (session.db, session.protocol)

    def undo() -> None:
        session.db, session.protocol = old
        session.policy_state.protocol = old[1]
        session.route = backend.shared_route(session)
        session.bind()

    session.db, session.protocol = db, protocol
    session.policy_state.protocol = protocol
    session.route = backend.shared_route(session)
    session.bind()
    backend.warm(session)  # a client here may move to a connection of its own next
    session.route.send(session, batch.commands[index], data, 1, OnReply(session, lambda ok: ok or undo()))
    if session.state.life is OPEN and session.inflight:
        return session.wait(batch, index + 1)
    return index + 1


def select(session, batch, index: int) -> int:
    args = batch.commands[index]
    db = strict_int(args[1]) if len(args) == 2 else None
    if db is None or db == session.db or not 0 <= db < session.backend.databases:
        return forward_one(session, batch, index)  # Redis answers (an error, or no change)
    return switch_pool(session, batch, index, db, session.protocol)


def hello(session, batch, index: int, hello_args=None) -> int:
    """HELLO: a protocol switch among shared pools, or connection state (SETNAME, AUTH)."""
    args = batch.commands[index]
    refused = paired_subscriptions.check_hello(session, batch, index)
    if refused is not None:
        return refused
    if hello_args is None:
        if authenticates(args):  # (never reached: AUTH and HELLO are the proxy's, session/auth.py)
            return session.login(batch, index)
        hello_args = args
    data = batch.span(index, index + 1) if hello_args is args or len(hello_args) == len(args) else \
        hiredis.pack_command(tuple(hello_args))
    version = strict_int(hello_args[1]) if len(hello_args) > 1 else None
    if version not in (2, 3):  # HELLO alone, or Redis's error: no change of state
        session.route.send(session, args, data, 1, session)
        return index + 1
    lane = session.state.lane
    names = len(hello_args) > 2  # SETNAME: the name lives on a connection of the client's own
    if lane is SHARED:
        if names:
            return pin(session, batch, index)
        if version != session.protocol:
            return switch_hello(session, batch, index, data, version)
    elif lane is LEASED and (names or version != session.protocol):
        return promote(session, batch, index)
    elif version != session.protocol:
        return switch_hello(session, batch, index, data, version)
    session.route.send(session, args, data, 1, session)
    return index + 1


def switch_hello(session, batch, index: int, data: bytes, version: int) -> int:
    """HELLO 2|3 changing the protocol: on the shared connections, the pool of that protocol;
    on a connection of the client's own, that connection. Either way the client's next command
    waits for the reply, and a refused HELLO leaves the protocol as it was."""
    if session.state.lane is SHARED:
        if session.inflight:
            return session.wait(batch, index)
        return switch_pool_with(session, batch, index, session.db, version, data)
    old = session.protocol

    def undo() -> None:
        session.protocol = session.policy_state.protocol = old

    session.protocol = session.policy_state.protocol = version
    session.route.send(session, batch.commands[index], data, 1, OnReply(session, lambda ok: ok or undo()))
    if session.state.life is OPEN and session.inflight and session.state.lane is not STREAMING:
        # (On a stream no reply is paired, nor waited for: the stream's entry is never answered.)
        return session.wait(batch, index + 1)
    return index + 1


def reset(session, batch, index: int) -> int:
    """RESET: a fresh connection state; with applications, no application any more."""
    if len(batch.commands[index]) != 1:
        return forward_one(session, batch, index)  # Redis answers the arity error, resetting nothing
    backend = session.backend
    lane = session.state.lane
    if lane is SHARED and session.inflight and session.app is not None and backend.acl_users is not None:
        return session.wait(batch, index)  # its later commands run as another upstream user
    if lane is SHARED and (session.db != backend.default_db or session.protocol != 2):
        if session.inflight:
            return session.wait(batch, index)
        session.db, session.protocol = backend.default_db, 2
        session.policy_state.protocol = 2
        session.route = backend.shared_route(session)
    session.app = None
    session.pubsub = None  # (RESET unsubscribes)
    session.login_result = None
    session.policy_state = SessionState()
    session.after_exec = []
    session.queued_effects = []
    if session.state.txn is not NONE:
        session.state.to("end")
    if lane is not STREAMING:  # (on a stream, AUTH's reply would come among the stream's)
        backend.identity_changed(session)
    session.bind()
    if lane is SHARED:
        session.answer_locally(errors.RESET)
        return index + 1
    if lane is STREAMING:
        session.db, session.protocol = backend.default_db, 2
        return streamend.reset_on_stream(session, batch, index)  # (a stream it ends is over once answered)
    forward_one(session, batch, index)
    session.db, session.protocol = backend.default_db, 2
    # Redis's RESET logs the connection out too: log the proxy's own connection back in.
    backend.restore_after_reset(session, session.own)
    return index + 1


def _begin(session, batch, index: int, event: str) -> int:
    """MULTI or WATCH: on a connection of the client's own until the transaction ends; inside
    MULTI they go to Redis, which refuses them (nested MULTI, WATCH inside MULTI)."""
    if session.state.in_transaction:
        return forward_one(session, batch, index)
    moved = on_own(session, batch, index)
    if moved is not None:
        return moved
    forward_one(session, batch, index)
    session.state.to(event)
    if event == "multi":
        session.policy_state.in_multi = True
    return index + 1


def multi(session, batch, index: int) -> int:
    return _begin(session, batch, index, "multi")


def watch(session, batch, index: int) -> int:
    return _begin(session, batch, index, "watch")


def unwatch(session, batch, index: int) -> int:
    forward_one(session, batch, index)
    if session.state.txn is WATCHING:
        session.state.to("unwatch")
    return index + 1


def exec_(session, batch, index: int) -> int:
    if not session.state.in_transaction:
        return forward_one(session, batch, index)  # Redis: EXEC without MULTI
    return session.end_transaction(True, batch, index)


def discard(session, batch, index: int) -> int:
    if not session.state.in_transaction:
        return forward_one(session, batch, index)
    return session.end_transaction(False, batch, index)


def wait_(session, batch, index: int) -> int:
    """WAIT on a connection of the client's own, after a write that covers all of its own."""
    if session.state.in_transaction:
        return forward_one(session, batch, index)
    moved = on_own(session, batch, index)
    if moved is not None:
        return moved
    session.own.send_hidden([WAIT_MARK])
    return forward_one(session, batch, index)


STANDALONE = {
    **COMMON,
    CONFIG_SET: config_set,
    PIN: pin,
    UNKNOWN: pin,  # a command the table does not know may change anything: a connection of its own
    LEASE: lease,
    STREAM: stream,
    TRACKING: tracking,
    CLIENT_ID: client_id,
    SELECT: select,
    HELLO: hello,
    AUTH: login,  # (the dispatch tables send AUTH to LOGIN: credentials never reach Redis)
    RESET: reset,
    MULTI: multi,
    WATCH: watch,
    UNWATCH: unwatch,
    EXEC: exec_,
    DISCARD: discard,
    WAIT: wait_,
    CONTROL: control,
    CLIENT_KILL: client_kill,
}

__all__ = ["COMMON", "STANDALONE", "PASS", "forward_one", "take_own"]

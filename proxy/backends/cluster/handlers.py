"""What a session does for each action that is not PASS in front of a Redis Cluster: the cluster
column of the handlers.

Theory of operation: as standalone (`proxy/backends/handlers.py`), with what a cluster changes.
There is no connection of the client's own for good: connection state a single server would
hold is kept by the proxy (`ClusterClient`: CLIENT SETNAME/GETNAME/ID, READONLY, ASKING; CLIENT
INFO/LIST and CLIENT KILL ID in the proxy's ids, `clientinfo.py`) or refused with a clear error;
a transaction runs on a connection lent for it by the owner of its
first key's slot (the node it would have to reach anyway); a blocking command or a script on a
connection lent by its key's owner, the client's next command waiting until it has answered;
a subscription on a connection of its own on any master (the cluster bus carries PUBLISH;
SSUBSCRIBE on its shard channel's owner; a RESP3 client's on connections aside, by master for
shard channels). What a stream owes other masters (MONITOR's lines, a RESP2 subscriber's shard
channels, a key of another master) goes through connections aside or the owner, never a -MOVED
(`sides.py`). Whole-keyspace commands go to every master, replies
merged (`keyspace.py`); SCRIPT KILL, FUNCTION KILL and CLIENT PAUSE/UNPAUSE to every master's
control connection at once; CLIENT KILL to every master, never reaching the proxy's own
connections; WAIT to every master on lent connections, after a write that covers the client's.
CLUSTER is the proxy's in every lane (a node would describe the real cluster): as a server
without cluster support answers it, or, with `face: cluster`, as a one-node cluster (`face.py`).
"""

from __future__ import annotations

import asyncio
import logging

import hiredis

from ... import errors
from ...pending import Pending, Receiver, hidden
from ...policy.decision import SessionState
from ...session import clientkill, paired_subscriptions, streamend, tracking
from ...session.behaviour import (
    AUTH,
    CLIENT_GETNAME,
    CLIENT_ID,
    CLIENT_INFO,
    CLIENT_KILL,
    CLIENT_NO_EVICT,
    CLIENT_SETNAME,
    CONTROL,
    DISCARD,
    EXEC,
    FANOUT,
    HELLO,
    LEASE,
    LOCAL_OK,
    MULTI,
    NO_CLUSTER,
    RESET,
    SCAN,
    STREAM,
    UNKNOWN,
    UNWATCH,
    WAIT,
    WATCH,
    authenticates,
    strict_int,
)
from ...session.pause import PauseWatch, watches
from ...session.states import CLOSED, HELD, LEASED, NONE, OPEN, QUEUEING, SHARED, STREAMING, WATCHING
from ...session.streamorder import StreamOrder
from ..handlers import COMMON, _task_reply, forward_one, kill_resolved, login, refuse_in_transaction
from . import clientinfo, face, presented, redirected, redirects, sides, tracked
from .connection import RoutedPending
from .keyspace import FANOUT as MERGES
from .keyspace import decode_cursor, merge_min, merge_ok, merge_with_args, scan_reply
from .route import Gather, PartSink, TransformSink, TxnRoute, gather, replay
from .routing.multikey import Reject, Split
from .routing.redirect import CROSSSLOT, parse_redirect
from .routing.slots import hash_slot

log = logging.getLogger("redis_guard.cluster")

CLUSTER_MODE = b"$7\r\ncluster\r\n"
STANDALONE_MODE = b"$10\r\nstandalone\r\n"
CLUSTERDOWN = errors.resp_error("CLUSTERDOWN Hash slot not served")
CLUSTER_IS_DOWN = errors.resp_error("CLUSTERDOWN The cluster is down")


def _node(session, routed):
    """The master for a hash slot, or one spread by client for none; None when unknown."""
    slotmap = session.backend.router.slotmap
    if routed is not None:
        return slotmap.master_for_slot(routed)
    masters = slotmap.masters()
    return masters[session.spread % len(masters)] if masters else None


def _lend(session, node, event: str):
    """A connection of the client's own on `node` (a warm spare there), or None (closing)."""
    conn = session.backend.lease(session, node=node)
    if conn is None:
        session.upstream_unavailable(f"no connection to {node}")
        return None
    conn.owner = session
    session.use_own(conn, event)
    return conn


# -- the whole keyspace -----------------------------------------------------------------------

def fanout(session, batch, index: int) -> int:
    """A keyless command that concerns every node (KEYS, DBSIZE, SCRIPT LOAD, CONFIG SET, INFO...:
    `keyspace.merge_for`): to every master, the replies merged into one as a cluster client
    merges them."""
    args = batch.commands[index]
    name = args[0].lower()
    full = name + b"|" + args[1].lower() if len(args) > 1 else name
    if session.state.txn is not NONE or session.state.lane is STREAMING:
        # (kept there for what the face presents: INFO, ROLE, CONFIG GET, ACL LOG; the rest as before)
        if not presented.presents(name, full):
            if session.state.lane is STREAMING and not sides.on_one_master(session):
                # (on a stream: to every master all the same, the merged reply in its place there)
                if getattr(session.route, "multi", False):  # (MULTI on the stream: its master only)
                    session.answer_locally(errors.fanout_in_multi(args))
                    session.refused_in_transaction()
                    return index + 1
            else:
                if full == b"script|load" and len(args) == 3:  # (one master caches it, as with EVAL)
                    session.backend.router.known.saw_eval(args[2])
                return forward_one(session, batch, index)
        if session.state.in_transaction:
            session.answer_locally(errors.presented_in_multi(args))
            session.refused_in_transaction()
            return index + 1
    masters = session.backend.router.master_slots()
    if not masters:
        session.answer_locally(CLUSTER_IS_DOWN)
        return index + 1
    backend = session.backend
    merges = backend.merges
    if full == b"config|set" and any(arg.lower() == b"requirepass" for arg in args[2::2]):
        session.answer_locally(errors.config_set_requirepass())
        return index + 1
    merge = merges.get(name, MERGES.get(name))
    if merge is None and len(args) > 1:
        merge = merges.get(full)
        if merge is None:
            merge = merge_with_args(full.decode("latin-1"), args)
    if name in (b"script", b"function"):  # what a node added later lacks (`scripts.Known`)
        merge = backend.router.known.watching(args, merge)
    merge = presented.presenting(name, full, merge, lambda: presented_where(session))  # (INFO, ROLE, CONFIG GET...)
    data = hiredis.pack_command(tuple(args))
    if session.state.lane is STREAMING:
        sides.fanned(session, args, [(slot, data) for _node, slot in masters], merge)
    else:
        gather(session, [(slot, data) for _node, slot in masters], merge)
    if full in backend.every_node:
        to_replicas(session, masters, data)
    return index + 1


class ReplicaReply(Receiver):
    """A replica's reply to a command sent to every node: not the client's (the masters' replies
    are), logged when it is an error."""

    __slots__ = ("node",)

    def __init__(self, node):
        self.node = node

    def deliver(self, entry, data: bytes, done: int) -> None:
        if data[:1] in (b"-", b"!"):
            log.warning("cluster replica %s refused a command sent to every node: %s", self.node,
                        data.split(b"\r\n", 1)[0].decode("utf-8", "replace"))

    def pending_failed(self, entry, error: bytes, partial: bool) -> None:
        self.deliver(entry, error, 1)


def to_replicas(session, masters, data: bytes) -> None:
    """A command whose state Redis keeps on each node (`request_policy:all_nodes` that changes
    something: SCRIPT LOAD/FLUSH, CONFIG SET...) to every replica too, on the shared read-only
    connections, so that a replica promoted by a failover has it. Best effort: a replica that is
    down or refuses it is logged, the client's reply is the masters'."""
    router = session.backend.router_of(session)
    for _node, slot in masters:
        for replica in router.slotmap.replicas_for_slot(slot):
            conn = router.pool(replica, session.protocol, True).get(session.spread % router.size)
            if conn is None:
                log.warning("cluster replica %s unreachable: a command sent to every node did not reach it", replica)
                continue
            conn.send(data, Pending(ReplicaReply(replica), 1, conn))


NO_CLUSTER_SUPPORT = errors.resp_error("ERR This instance has cluster support disabled")


def _arity_refused(session, args) -> bool:
    """Redis's arity error for a CLUSTER subcommand (written: True)."""
    spec = session.backend.behaviour.table.lookup(args)
    if spec is not None and (len(args) < spec.arity if spec.arity < 0 else len(args) != spec.arity):
        session.answer_locally(errors.resp_error(f"ERR wrong number of arguments for '{spec.name}' command"))
        session.refused_in_transaction()
        return True
    return False


def no_cluster(session, batch, index: int) -> int:
    """CLUSTER ...: answered as a server without cluster support answers it (the proxy presents
    itself as one standalone server; the nodes' addresses never reach a client)."""
    if not _arity_refused(session, batch.commands[index]):
        session.answer_locally(NO_CLUSTER_SUPPORT)
        session.refused_in_transaction()
    return index + 1


def face_me(session, announced: bool = True) -> face.Me:
    """The one node the client sees (`face: cluster`): the proxy where the client reached it, or
    where `cluster_face.announce` says (unless not `announced`: where it listens)."""
    transport = session.transport
    sockname = transport.get_extra_info("sockname") if transport is not None else None
    tls = transport is not None and transport.get_extra_info("ssl_object") is not None
    proxy = session.proxy
    servers = proxy.servers
    first = servers[0].sockets[0].getsockname()[1]
    if len(servers) > 1:  # `listen` plain, `tls_listen` TLS
        plain, tls_port = first, servers[1].sockets[0].getsockname()[1]
    elif proxy.tls is not None:
        plain, tls_port = None, first
    else:
        plain, tls_port = first, None
    me = face.me(sockname, tls, plain, tls_port)
    announce = session.backend.config.cluster_face
    return face.announced(me, announce, tls) if announced and announce.announce is not None else me


def presented_where(session) -> presented.Where:
    """The proxy as INFO, ROLE and CONFIG GET present it (presented.py)."""
    me = face_me(session, announced=False)
    announce = session.backend.config.cluster_face
    shown = face_me(session) if announce.announce is not None else None
    return presented.Where(me.host, me.plain_port, me.tls_port, session.backend.face == "cluster",
                           shown.host if shown else None, shown.plain_port if shown else None,
                           shown.tls_port if shown else None)


def cluster_face(session, batch, index: int) -> int:
    """CLUSTER ... with `face: cluster`: answered as a one-node cluster that owns every slot at
    the proxy's own address (`face.py`); COUNTKEYSINSLOT/GETKEYSINSLOT by the slot's real owner.
    Inside MULTI refused (EXEC aborts): the proxy's replies cannot join the transaction's."""
    args = batch.commands[index]
    if _arity_refused(session, args):
        return index + 1
    if session.state.in_transaction:
        session.answer_locally(errors.CLUSTER_FACE_IN_MULTI)
        session.refused_in_transaction()
        return index + 1
    decided = face.decide(args, face_me(session), session.protocol)
    if type(decided) is face.ToSlot:
        gather(session, [(decided.slot, hiredis.pack_command(tuple(args)))], _first)
    else:
        session.answer_locally(decided)
    return index + 1


def scan(session, batch, index: int) -> int:
    args = batch.commands[index]
    if session.state.lane is STREAMING:  # (a RESP2 subscriber's, a monitor's: its master's refusal)
        if sides.on_one_master(session):
            return forward_one(session, batch, index)
        if getattr(session.route, "multi", False):  # (MULTI on the stream: its master only)
            session.answer_locally(errors.fanout_in_multi(args))
            session.refused_in_transaction()
            return index + 1
    masters = session.backend.router.master_slots()
    decoded = decode_cursor(args[1]) if len(args) > 1 else None
    if decoded is None or decoded[0] >= len(masters):
        session.answer_locally(errors.resp_error("ERR invalid cursor"))
        return index + 1
    position, node_cursor = decoded
    data = hiredis.pack_command((args[0], b"%d" % node_cursor, *args[2:]))
    total = len(masters)
    parts = [(masters[position][1], data)]
    if session.state.lane is STREAMING:  # (its reply placed by a barrier: sides.fanned)
        sides.fanned(session, args, parts, lambda replies: scan_reply(replies[0], position, total))
        return index + 1
    gather(session, parts, lambda replies: scan_reply(replies[0], position, total))
    return index + 1


# -- connection state the proxy keeps -----------------------------------------------------------

def queued_on_own(session, batch, index: int):
    """Inside MULTI, connection state Redis would queue and answer in EXEC's reply: sent to the
    transaction's connection (which then holds state: closed, not given back) that carries the
    client's name since it was lent (`pin_transaction`). None outside MULTI."""
    if not session.state.in_transaction:
        return None
    client = session.extra
    if client.deferred is not None and client.deferred_name is None:
        client.deferred_name = client.name or b""  # the name the connection takes (`pin_transaction`)
    client.tainted = True
    return forward_one(session, batch, index)


def client_id(session, batch, index: int) -> int:
    if len(batch.commands[index]) != 2:
        return forward_one(session, batch, index)  # Redis's arity error
    queued = queued_on_own(session, batch, index)
    if queued is not None:
        return queued
    if session.state.lane is STREAMING:
        # On the stream, where the master says what it says of it (a RESP2 subscriber's refusal,
        # nothing under CLIENT REPLY OFF), its id shown as the proxy's number for the client:
        # the one a CLIENT TRACKING REDIRECT names (redirects.py)
        streamend.passes(session, batch.commands[index], session.backend.stream_neutral)
        StreamOrder.of(session, session.stream).rewritten(batch.span(index, index + 1),
                                                           redirects.OwnId(session.extra.id))
        return index + 1
    session.answer_locally(b":%d\r\n" % session.extra.id)
    return index + 1


def client_getname(session, batch, index: int) -> int:
    if len(batch.commands[index]) != 2:
        return forward_one(session, batch, index)
    queued = queued_on_own(session, batch, index)
    if queued is not None:
        return queued
    name = session.extra.name
    session.answer_locally(b"$%d\r\n%s\r\n" % (len(name), name) if name else
                   (b"_\r\n" if session.protocol == 3 else b"$-1\r\n"))
    return index + 1


def client_setname(session, batch, index: int) -> int:
    args = batch.commands[index]
    if len(args) != 3:
        return forward_one(session, batch, index)
    if any(c <= 32 or c >= 127 for c in args[2]):
        session.answer_locally(
            errors.resp_error("ERR Client names cannot contain spaces, newlines or special characters."))
        session.refused_in_transaction()
        return index + 1
    queued = queued_on_own(session, batch, index)
    if queued is not None:  # Redis checks the name when queueing; EXEC sets it, if it runs
        session.queued_effects.append(args)
        return queued
    session.extra.name = args[2] or None
    if session.own is not None:  # watching: the transaction's connection answers GETNAME in MULTI
        name_connection(session, args[2])
    session.answer_locally(errors.OK)
    return index + 1


def client_no_evict(session, batch, index: int) -> int:
    """CLIENT NO-EVICT ON|OFF: the client's connection is the proxy's, which Redis's client
    eviction never sees; the proxy notes the flag (CLIENT INFO's `e`: clientinfo.py) and answers
    as Redis does. Inside MULTI queued on the transaction's connection, noted when EXEC's reply
    says the transaction ran (`queued.ExecWatch`)."""
    args = batch.commands[index]
    if len(args) != 3:
        return forward_one(session, batch, index)  # Redis's arity error
    if session.state.in_transaction:
        session.queued_effects.append(args)
        return queued_on_own(session, batch, index)
    mode = args[2].lower()
    if mode == b"on" or mode == b"off":
        session.extra.no_evict = mode == b"on"
        session.answer_locally(errors.OK)
    else:
        session.answer_locally(errors.SYNTAX)
    return index + 1


def client_view(session, batch, index: int) -> int:
    """CLIENT INFO and CLIENT LIST: the client as the proxy knows it, with the id CLIENT ID gave
    and the name CLIENT SETNAME set (clientinfo.py); refused inside MULTI (EXEC's reply would hold
    what the transaction's node says of its own connection: its address). CLIENT GETREDIR and
    TRACKINGINFO: the stream's master's, the REDIRECT's id as the client named it."""
    args = batch.commands[index]
    if args[1].lower() in (b"getredir", b"trackinginfo"):
        if session.state.lane is STREAMING and not session.state.in_transaction:
            # The stream's tracking as its master says, the id of a REDIRECT shown as the client
            # named it (the master knows the proxy's connection it redirects to: redirects.py)
            streamend.passes(session, args, session.backend.stream_neutral)
            StreamOrder.of(session, session.stream).rewritten(batch.span(index, index + 1),
                                                               redirects.NamedIds(session))
            return index + 1
        return forward_one(session, batch, index)  # (not streaming: no tracking; or queued)
    if session.state.in_transaction:  # (the transaction's node would describe its own connection)
        session.answer_locally(errors.presented_in_multi(args))
        session.refused_in_transaction()
        return index + 1
    if args[1].lower() == b"info":
        if len(args) != 2:
            return forward_one(session, batch, index)  # Redis's arity error
        session.answer_locally(clientinfo.client_info(clientinfo.view_of(session, "client|info"), session.protocol))
    else:
        session.answer_locally(clientinfo.client_list(args, clientinfo.lines_of(session), session.protocol))
    return index + 1


def local_ok(session, batch, index: int) -> int:
    """READONLY, READWRITE, ASKING. With `face: cluster` +OK: the proxy routes by slot itself;
    queued in a transaction (on a master's connection they change nothing; EXEC's reply holds
    their +OK); on a stream the stream's node answers. With the standalone face what a server
    without cluster support answers, as CLUSTER's subcommands (`no_cluster`: refused inside
    MULTI too), but to a RESP2 subscriber, whose stream's node refuses them in its context as
    one server would."""
    if session.backend.face != "cluster":
        if session.state.lane is STREAMING:
            streaming = sides.sides_of(session, False)
            if streaming is not None and streaming.subscriber and session.protocol == 2:
                return forward_one(session, batch, index)
        return no_cluster(session, batch, index)
    if session.state.in_transaction or session.state.lane is STREAMING:
        return forward_one(session, batch, index)
    args = batch.commands[index]
    name = args[0].lower().decode()
    if len(args) != 1:
        session.answer_locally(errors.resp_error(f"ERR wrong number of arguments for '{name}' command"))
        session.refused_in_transaction()
    else:
        session.answer_locally(errors.OK)
    return index + 1


def hello(session, batch, index: int, hello_args=None) -> int:
    """HELLO says `mode: standalone` (the client talks to one server; `mode: cluster` with
    `face: cluster`, the one-node cluster of `face.py`); SETNAME is kept here,
    once Redis accepted the HELLO; a protocol switch waits for the client's replies in flight
    (while WATCHing, the transaction's connection switches: it is closed, not given back)."""
    refused = paired_subscriptions.check_hello(session, batch, index)
    if refused is not None:
        return refused
    args = batch.commands[index] if hello_args is None else hello_args
    if hello_args is None and authenticates(args):  # (never reached: the proxy's, session/auth.py)
        return session.login(batch, index)
    if session.state.in_transaction:
        # Queued: its reply comes in EXEC's, which says the protocol the client has after it
        # (`queued.ExecWatch`); the transaction's connection may change protocol: closed after.
        session.queued_effects.append(args)
        session.extra.tainted = True
        return forward_one(session, batch, index)
    if session.state.lane is STREAMING:
        # On the stream, as every command there (a login's HELLO, credentials taken out): its
        # reply comes with the stream's, unpaired, and there is no pool to move to.
        version = strict_int(args[1]) if len(args) > 1 else None
        if version in (2, 3):
            session.protocol = session.policy_state.protocol = version
        session.route.send(session, args, hiredis.pack_command(tuple(args)), 1, None)
        return index + 1
    client = session.extra
    name = None
    rest = [arg.lower() for arg in args[2:]]
    if b"setname" in rest:
        at = 2 + rest.index(b"setname")
        if at + 1 < len(args):
            name = args[at + 1]
        args = args[:at] + args[at + 2:]
    version = strict_int(args[1]) if len(args) > 1 else None
    watching = session.state.txn is not NONE
    if version in (2, 3) and version != session.protocol:
        if watching:
            client.tainted = True
        elif session.inflight:
            return session.wait(batch, index)
        else:
            session.route = None  # the pool of the new protocol, once the protocol is set
        session.protocol = session.policy_state.protocol = version
        if session.route is None:
            session.route = session.backend.shared_route(session)

    def accepted(reply: bytes) -> bytes:
        if name is not None and reply[:1] != b"-":
            client.name = name or None
        reply = presented.hello(reply, client.id)  # (the id CLIENT ID gives, not a node connection's)
        return reply if session.backend.face == "cluster" else reply.replace(CLUSTER_MODE, STANDALONE_MODE, 1)

    sink = TransformSink(session, accepted)
    data = hiredis.pack_command(tuple(args))
    if watching:
        session.route.send(session, args, data, 1, sink)
    else:
        entry = RoutedPending(sink, 1, None, data, 0, None, client)
        session.queue.append(entry)
        session.inflight += 1
        session.backend.router_of(session).send(entry, session.protocol, session.spread)
    if name is not None and session.state.life is OPEN:
        return session.wait(batch, index + 1)  # a CLIENT GETNAME after it sees the name it set
    return index + 1


def reset(session, batch, index: int) -> int:
    """RESET: no name, RESP2, no transaction, no application; a lent connection goes back
    (closed when the transaction left state on it)."""
    if len(batch.commands[index]) != 1:
        return forward_one(session, batch, index)  # Redis answers the arity error, resetting nothing
    streaming = session.state.lane is STREAMING  # (replies unpaired: none to wait for)
    if session.inflight and not streaming:
        return session.wait(batch, index)
    subscriptions, session.pubsub = session.pubsub, None
    unsubscribing = subscriptions is not None and subscriptions.reset(session)
    client = session.extra
    if session.state.txn is not NONE:
        client.tainted = client.tainted or session.own is not None
        session.state.to("end")
    if session.state.lane is LEASED:
        session.release_lease()
    client.name = None
    client.no_evict = False  # (Redis's RESET clears it too)
    client.txn_slot = None
    client.deferred = client.deferred_name = None
    client.txn_scripts = None
    session.protocol = 2
    session.policy_state = SessionState()
    session.after_exec = []
    session.queued_effects = []
    session.app = None  # with applications: unauthenticated again
    if streaming:  # Redis resets the stream's connection, and the proxy logs it in again
        sides.close_sides(session)  # (nothing monitored or subscribed aside is left either)
        redirects.close_sinks(session)  # (nor tracking: no invalidation to redirect)
        tracked.close_tracker(session)  # (nor tracking aside: tracking is off after RESET)
        session.bind()
        return streamend.reset_on_stream(session, batch, index)  # (a stream it ends is over once answered)
    session.route = session.backend.shared_route(session)
    session.bind()
    session.answer_locally(errors.RESET)
    if unsubscribing and session.state.life is OPEN:
        return session.wait(batch, index + 1)
    return index + 1


# -- transactions -------------------------------------------------------------------------------

def _first_key_slot(session, commands, index: int):
    """The hash slot of the first command with keys from `index` up to EXEC/DISCARD."""
    backend = session.backend
    master_for_slot = backend.router.slotmap.master_for_slot
    for args in commands[index:]:
        if args[0].lower() in (b"exec", b"discard"):
            return None
        routed = backend.routes.decide(args, master_for_slot)
        if type(routed) is int:
            return routed
    return None


def name_connection(session, name: bytes) -> None:
    """The lent connection answers CLIENT GETNAME queued in MULTI as the client's own would."""
    session.own.send_hidden([("CLIENT", "SETNAME", name)])
    session.extra.tainted = True


def pin_transaction(session, hash_slot, name=None) -> bool:
    """A connection lent by the owner of the transaction's slot (any master for none), named
    as the client (`name`, else the client's name) before MULTI reaches it."""
    node = _node(session, hash_slot) or session.backend.seed
    conn = _lend(session, node, "lease")
    if conn is None:
        return False
    backend = session.backend
    name = session.extra.name if name is None else name
    if name:
        name_connection(session, name)
    session.extra.txn_slot = hash_slot
    session.route = TxnRoute(conn, backend.routes, backend.router_of(session), backend.safe)
    session.bind()
    return True


def multi(session, batch, index: int) -> int:
    client = session.extra
    if session.state.in_transaction:
        if client.deferred is not None:
            session.answer_locally(errors.resp_error("ERR MULTI calls can not be nested"))
            return index + 1
        return forward_one(session, batch, index)
    if session.state.txn is WATCHING:
        forward_one(session, batch, index)
    else:
        if session.inflight:
            return session.wait(batch, index)
        slot = _first_key_slot(session, batch.commands, index + 1)
        if slot is None:
            # No key yet: the transaction goes where its first key will send it.
            client.deferred = []
            session.route = session.backend.deferred_route
            session.answer_locally(errors.OK)
        else:
            if not pin_transaction(session, slot):
                return index + 1
            forward_one(session, batch, index)
    session.state.to("multi")
    session.policy_state.in_multi = True
    session.bind()
    return index + 1


def watch(session, batch, index: int) -> int:
    client = session.extra
    if session.state.in_transaction:
        if client.deferred is not None:
            session.answer_locally(errors.resp_error("ERR WATCH inside MULTI is not allowed"))
            session.refused_in_transaction()
            return index + 1
        return forward_one(session, batch, index)
    args = batch.commands[index]
    backend = session.backend
    routed = backend.routes.decide(args, backend.router.slotmap.master_for_slot)
    if type(routed) is not int:
        session.answer_locally(CROSSSLOT if type(routed) in (Split, Reject) else errors.resp_error(
            "ERR wrong number of arguments for 'watch' command"))
        return index + 1
    if session.state.txn is NONE:
        if session.inflight:
            return session.wait(batch, index)
        if not pin_transaction(session, routed):
            return index + 1
    forward_one(session, batch, index)  # the TxnRoute says CROSSSLOT for a key of another slot
    session.state.to("watch")
    session.bind()
    return index + 1


def unwatch(session, batch, index: int) -> int:
    forward_one(session, batch, index)
    if session.state.txn is WATCHING:
        session.state.to("unwatch")
        session.extra.txn_slot = None
        session.bind()  # DRAIN until the lent connection is idle, then shared again
    return index + 1


def _end(session, batch, index: int, is_exec: bool) -> int:
    client = session.extra
    if not session.state.in_transaction:
        return forward_one(session, batch, index)  # EXEC/DISCARD without MULTI: Redis's error
    if client.txn_scripts is not None:
        if is_exec and client.deferred is not None:
            if not session.backend.pin_deferred(session, None):
                return index + 1
        if is_exec and _preload(session, batch, index):
            return HELD
        client.txn_scripts = None
    if client.deferred is not None:
        if not is_exec:
            client.deferred = client.deferred_name = None
            session.policy_state.end_transaction()
            session.after_exec = []
            session.queued_effects = []  # (a name set in it is not the next EXEC's to take)
            session.state.to("end")
            session.route = session.backend.shared_route(session)
            session.bind()
            session.answer_locally(errors.OK)
            return index + 1
        if not session.backend.pin_deferred(session, None):
            return index + 1
    next_index = session.end_transaction(is_exec, batch, index)
    client.txn_slot = None
    session.bind()  # DRAIN until the lent connection has answered, then shared again
    return next_index


def exec_(session, batch, index: int) -> int:
    return _end(session, batch, index, True)


def discard(session, batch, index: int) -> int:
    return _end(session, batch, index, False)


# -- a connection lent for one command ----------------------------------------------------------

def _target(session, batch, index: int):
    """The node a keyed command must run on, or the index to continue at (answered here)."""
    args = batch.commands[index]
    backend = session.backend
    routed = backend.routes.decide(args, backend.router.slotmap.master_for_slot)
    if type(routed) is Reject:
        session.answer_locally(routed.reply)
        return index + 1
    if type(routed) is Split:
        session.answer_locally(CROSSSLOT)
        return index + 1
    node = _node(session, routed)
    if node is None:
        session.answer_locally(CLUSTERDOWN)
        return index + 1
    return node


def lease(session, batch, index: int) -> int:
    """A blocking command or a script: on a connection lent by its key's owner; the client's
    next command waits until it has answered (`DRAIN`), so its commands keep their order.
    Inside a transaction (or with keys watched), on the transaction's connection: the scripts
    its EVALSHA/FCALL name are noted for EXEC (`_end`). The body of an EVAL is kept for the
    masters that did not run it (`scripts.Known.saw_eval`)."""
    args = batch.commands[index]
    name = args[0].lower()
    known = session.backend.router.known
    if session.state.txn is not NONE:
        if name in EVALS and len(args) > 2:
            known.saw_eval(args[1])
        elif name in RELOADED and len(args) > 1 and session.state.in_transaction and known.any():
            client = session.extra
            if client.txn_scripts is None:
                client.txn_scripts = [(name, args[1])]
            elif len(client.txn_scripts) < MAX_QUEUED_SCRIPTS:
                client.txn_scripts.append((name, args[1]))
        return forward_one(session, batch, index)
    node = _target(session, batch, index)
    if type(node) is int:
        return node
    if session.inflight:  # what the client sent before (an LPUSH its BLPOP waits for) goes first
        return session.wait(batch, index)
    conn = _lend(session, node, "lease")
    if conn is None:
        return index + 1
    if name in EVALS and len(args) > 2:
        known.saw_eval(args[1])
    data = batch.span(index, index + 1)
    reload = name in RELOADED and known.any()
    session.send(conn, data, 1, LeaseReplies(session, data, 0, known if reload else None))
    return index + 1


RELOADED = frozenset((b"evalsha", b"evalsha_ro", b"fcall", b"fcall_ro"))
EVALS = frozenset((b"eval", b"eval_ro"))
MAX_QUEUED_SCRIPTS = 1024  # EVALSHA/FCALL noted per transaction (one SCRIPT LOAD each, at most, before EXEC)


def _preload(session, batch, index: int) -> bool:
    """EXEC of a transaction that queued EVALSHA/FCALL of scripts or libraries the proxy knows
    (`client.txn_scripts`): its master may lack them (added, restarted, promoted, or never ran
    the EVAL), and inside MULTI nothing can be loaded on the transaction's own connection (a load
    would be queued, its reply in EXEC's). They are loaded on a shared connection of the same
    master, replies unseen, and EXEC waits until they are answered (True): it then runs them as
    one Redis would. False: nothing to load, EXEC goes now."""
    client = session.extra
    queued, client.txn_scripts = client.txn_scripts, None
    own = session.own
    if queued is None or own is None or session.state.txn is not QUEUEING:
        return False
    router = session.backend.router_of(session)
    loads = router.known.preloads(queued)
    if loads is None:
        return False
    conn = router.pool(own.address, session.protocol).get(session.spread % router.size)
    if conn is None or conn.closed:
        return False
    data, count = loads
    pending = Pending(Preloaded(session), count, conn, data)
    session.queue.append(pending)
    session.inflight += 1
    conn.send(data, pending)
    session.wait(batch, index)
    return True


class Preloaded(Receiver):
    """The replies to `_preload`'s loads: the client sees none (a load refused, a library there
    already, changes nothing: EXEC answers as the master can)."""

    __slots__ = ("session",)

    def __init__(self, session):
        self.session = session

    def deliver(self, pending, data: bytes, done: int) -> None:
        if data[:1] in (b"-", b"!") and not data.startswith(b"-ERR Library"):
            log.info("cluster: a script load before EXEC was refused: %s",
                     data.split(b"\r\n", 1)[0].decode("utf-8", "replace"))
        if done:
            self.session.deliver(pending, b"", done)

    def pending_failed(self, pending, error: bytes, partial: bool) -> None:
        if pending.remaining:
            self.session.deliver(pending, b"", pending.remaining)


class LeaseReplies(Receiver):
    """The reply of a command on a lent connection (a blocking command, a script).

    A -MOVED or -ASK there (the slot moved and the proxy's map did not know yet; nothing ran)
    sends it again on a connection lent by the node named, the map learning a MOVED, in the same
    place among the client's replies. A NOSCRIPT or "Function not found" for a script or library
    loaded through the proxy (`known`: the node was added, restarted or promoted since,
    `scripts.Known`) has the proxy load it there and send the command again, once, on the same
    connection. The client sees the reply, never the redirection (at most `max_redirects`) nor
    the missing script."""

    __slots__ = ("session", "data", "redirects", "held", "known")

    def __init__(self, session, data: bytes, redirects: int, known=None):
        self.session = session
        self.data = data
        self.redirects = redirects
        self.held = b""
        self.known = known

    def deliver(self, pending, data: bytes, done: int) -> None:
        session = self.session
        if self.held or (data[:1] == b"-" and not self.held):
            data = self.held = self.held + data
            if not done:
                return
            self.held = b""
            if data.startswith((b"-MOVED ", b"-ASK ")):
                if self._again(pending, data):
                    return
                data = redirected.unredirected(data, redirected.command_of(self.data))
            if self.known is not None and self._reload(pending, data):
                return
        session.deliver(pending, data, done)

    def _reload(self, pending, error: bytes) -> bool:
        known = self.known
        loads = known.loads_for(self.data, error)
        conn = pending.conn
        if loads is None or conn is None or not conn.pending or conn.pending[0] is not pending:
            return False
        self.known = None  # (once: a second refusal is the client's)
        conn.pending.popleft()
        conn.restamp(pending, None)
        log.info("cluster node %s lacked a script or function loaded through the proxy: loaded there", conn.address)
        conn.send(loads, hidden(known.load_count(error)))
        conn.send(self.data, pending)
        return True

    def _again(self, pending, error: bytes) -> bool:
        session = self.session
        backend = session.backend
        router = backend.router_of(session)
        redirect = parse_redirect(error)
        old = pending.conn
        if (redirect is None or old is None or self.redirects >= router.max_redirects or session.state.life is CLOSED
                or session.own is not old):
            return False
        node = redirect.address(old.address)
        conn = backend.lease(session, node=node)
        if conn is None:
            return False
        if error.startswith(b"-MOVED "):
            router.moved(redirect.slot, node)
        else:
            conn.send_hidden([("ASKING",)])
        conn.owner = session
        old.owner = None
        session.own = conn
        session.route = backend.own_route(session, conn)
        session.send(conn, self.data, 1, LeaseReplies(session, self.data, self.redirects + 1, self.known))
        session.deliver(pending, b"", 1)  # (after: the client's next commands go on waiting)
        backend.give_back(session, old)  # (it ran nothing: no state left on it)
        return True

    def pending_failed(self, pending, error: bytes, partial: bool) -> None:
        self.session.pending_failed(pending, error, partial)


def stream(session, batch, index: int) -> int:
    """A subscription (or MONITOR...): a connection of the client's own, for good. SSUBSCRIBE
    on its shard channel's owner; the others on any master (the cluster bus carries PUBLISH).
    The stream ends when nothing more can arrive unasked (session/streamend.py). A RESP3 client's
    channels, patterns and shard channels make no stream (`subscribe_aside`, `shard_aside`);
    while it has some, what would start a stream elsewhere is refused."""
    args = batch.commands[index]
    if args[0].lower() == b"client" and tracking.redirects(args):
        # No server's id is ever handed out here: a REDIRECT names a session of the same client,
        # whose invalidations come by a connection of the proxy's (redirects.py), or nobody.
        if session.state.in_transaction:
            return paired_subscriptions.refuse(session, errors.TRACKING_REDIRECT_MULTI, index)
        return redirects.tracking(session, batch, index, lambda node: _lend(session, node, "stream"),
                                  lambda: _node(session, None) or session.backend.seed, tracked.mirror)
    if tracked.is_tracking(args) and session.state.in_transaction:
        # (queued, it would reach the transaction's master only: the others' reads untracked)
        return paired_subscriptions.refuse(session, errors.TRACKING_MULTI, index)
    if tracked.is_tracking(args):
        # Tracking every master: its options on the client's connections aside (tracked.py)
        done = tracked.tracking(session, batch, index, lambda node: _lend(session, node, "stream"),
                                lambda: _node(session, None) or session.backend.seed)
        if done is not None:
            return done
    if (session.state.lane is STREAMING and session.protocol == 2 and args[0].lower() in sides.SUBSCRIBING
            and not session.state.in_transaction):
        sides.sides_of(session).subscriber = True  # (another master's key is refused there, not run)
    if session.state.lane is STREAMING and sides.handles(session, args):
        # A RESP2 subscriber's shard channel command: to its channel's master (cluster/sides.py)
        backend = session.backend
        routed = backend.routes.decide(args, backend.router.slotmap.master_for_slot)
        if type(routed) in (Reject, Split):
            session.answer_locally(CROSSSLOT)
            return index + 1
        return sides.on_stream(session, batch, index, routed)
    subscriptions = session.pubsub
    if subscriptions is not None and session.state.in_transaction and subscriptions.may_be_active:
        # (at EXEC, on the transaction's connection: subscriptions in two places)
        return paired_subscriptions.refuse(session, errors.stream_while_subscribed(batch.commands[index]), index)
    unsure = session.replies_unsure
    done = streamend.no_new_stream(session, batch, index)
    if done is not None:
        return done
    if paired_subscriptions.pairs(session, args, paired_subscriptions.CLASSIC):
        return subscribe_aside(session, batch, index)
    if paired_subscriptions.pairs(session, args, paired_subscriptions.SHARD):
        return shard_aside(session, batch, index)
    if subscriptions is not None:
        refused = paired_subscriptions.refused_while_subscribed(session, batch, index,
                                                                errors.stream_while_subscribed(args))
        if refused is not None:
            session.replies_unsure = unsure  # (a CLIENT REPLY refused, or not sent yet, turns nothing off)
            return refused
        subscriptions.close()  # (nothing subscribed is left on it)
        session.pubsub = None
    if session.state.lane is SHARED:
        if session.inflight:
            return session.wait(batch, index)
        backend = session.backend
        routed = backend.routes.decide(args, backend.router.slotmap.master_for_slot)
        node = _node(session, routed if type(routed) is int else None) or backend.seed
        if _lend(session, node, "stream") is None:
            return index + 1
        if args[0].lower() in sides.SHARD and sides.handles(session, args):
            return sides.start_stream(session, batch, index)  # (its counts over every master)
        next_index = streamend.start(session, batch, index)
        if args[0].lower() == b"monitor" and len(args) == 1 and not session.replies_unsure:
            sides.sides_of(session).monitor()  # every other master's lines too
        elif args[0].lower() in sides.SUBSCRIBING and session.protocol == 2 and not session.replies_unsure:
            sides.sides_of(session).subscriber = True
        return next_index
    return streamend.start(session, batch, index)


def subscribe_aside(session, batch, index: int) -> int:
    """A RESP3 client's channels and patterns: on a connection of their own on any master, lent
    for the session, the client's other commands still routed by slot (paired_subscriptions.py).
    What the client sent before is answered first, and what it sends next waits for the
    confirmations: a PUBLISH on a shared connection is ordered with the subscription as the
    client's commands are on one server."""
    if session.inflight:
        return session.wait(batch, index)
    subscriptions = session.pubsub
    if subscriptions is None or subscriptions.aside is None or subscriptions.aside.closed:
        backend = session.backend
        node = _node(session, None) or backend.seed
        conn = backend.lease(session, node=node)
        if conn is None:
            session.upstream_unavailable(f"no connection to {node}")
            return index + 1
        if subscriptions is None:
            subscriptions = paired_subscriptions.Subscriptions(session, cluster=True)
        subscriptions.aside = conn  # (beside the shard channels' connections, if any)
        conn.owner = subscriptions  # (told when it fails: the subscriptions are gone with it)
    paired_subscriptions.send(session, subscriptions.aside, subscriptions, batch, index)
    return session.wait(batch, index + 1) if session.state.life is OPEN else index + 1


def shard_aside(session, batch, index: int) -> int:
    """A RESP3 client's shard channels: on a connection of their own on each channel's master,
    lent for the session (one a master), the client's other commands still routed by slot, as
    with `subscribe_aside`. SUNSUBSCRIBE without a channel goes to every master where some are,
    or to one (which answers that none is), its confirmations shown in that order."""
    if session.inflight:
        return session.wait(batch, index)
    args = batch.commands[index]
    backend = session.backend
    routed = backend.routes.decide(args, backend.router.slotmap.master_for_slot)
    if type(routed) is Reject:  # (CROSSSLOT)
        session.answer_locally(routed.reply)
        return index + 1
    subscriptions = session.pubsub
    if subscriptions is None:
        subscriptions = session.pubsub = paired_subscriptions.Subscriptions(session, cluster=True)
    nodes = None
    if len(args) == 1 and args[0].lower() == b"sunsubscribe":
        nodes = [node for node, shard in subscriptions.shards.items() if shard.count]
    nodes = nodes or [_node(session, routed if type(routed) is int else None) or backend.seed]
    shards = []
    for node in nodes:
        shard = subscriptions.shards.get(node) or _lend_shard(session, subscriptions, node)
        if shard is None:
            session.upstream_unavailable(f"no connection to {node}")
            return index + 1
        shards.append(shard)
    data = batch.span(index, index + 1)
    for at, shard in enumerate(shards):
        later = -1 if len(shards) == 1 else sum(after.count for after in shards[at + 1:])
        _send_shard(session, subscriptions, shard, data, args, later, 0)
    return session.wait(batch, index + 1) if session.state.life is OPEN else index + 1


def _send_shard(session, subscriptions, shard, data: bytes, args, base: int, redirects: int) -> None:
    def moved(pending, error: bytes) -> bool:
        return _moved_shard(session, subscriptions, pending, error, data, args, redirects + 1)
    paired_subscriptions.send_shard(session, shard, data, args, base, moved)


def _moved_shard(session, subscriptions, pending, error: bytes, data: bytes, args, redirects: int) -> bool:
    """-MOVED for a shard channel's subscription command (its slot moved, and the proxy's map
    did not know yet): the map learns the new owner, and the command goes there, its entry in
    place of this one (the client's next commands wait for it). False: the client gets it."""
    router = session.backend.router_of(session)
    redirect = parse_redirect(error)
    if redirect is None or redirects > router.max_redirects or session.state.life is CLOSED:
        return _not_followed(session, pending, args)
    node = redirect.address(pending.conn.address)
    router.moved(redirect.slot, node)
    shard = subscriptions.shards.get(node) or _lend_shard(session, subscriptions, node)
    if shard is None:
        return _not_followed(session, pending, args)
    _send_shard(session, subscriptions, shard, data, args, -1, redirects)
    session.deliver(pending, b"", 1)  # (after: the client's next commands go on waiting)
    return True


def _not_followed(session, pending, args) -> bool:
    """A -MOVED the proxy cannot follow: the client gets the TRYAGAIN error that names no node."""
    session.deliver(pending, errors.slot_moving(args, errors.SLOT_MOVING_RETRY), 1)
    return True


def _lend_shard(session, subscriptions, node):
    """A connection aside on `node` for the client's shard channels there (None: none to lend)."""
    conn = session.backend.lease(session, node=node)
    if conn is None:
        return None
    conn.owner = subscriptions  # (told when it fails: the subscriptions are gone with it)
    shard = subscriptions.shards[node] = paired_subscriptions.ShardAside(subscriptions, conn)
    conn.take_pushes(shard)
    return shard


# -- every master -------------------------------------------------------------------------------

_tags: dict[int, bytes] = {}


def tag_for_slot(slot: int) -> bytes:
    """A short hash tag whose key lands in `slot` (found once per slot)."""
    tag = _tags.get(slot)
    if tag is None:
        number = 0
        while hash_slot(b"%d" % number) != slot:
            number += 1
        tag = _tags[slot] = b"%d" % number
    return tag


def to_each(session, nodes, request: bytes, merge, connection, entry=None, before=None, after=None) -> None:
    """One request to each node on `connection(node)`, the replies merged into one client reply
    in the client's order (`before(conn, part)` sends first; `after(conn)` once it answered)."""
    entry = entry or session.reply_later()
    collected = Gather(session, entry, len(nodes), merge)
    for part, node in enumerate(nodes):
        conn = connection(node)
        if conn is None:
            sink = PartSink(collected, part)
            sink.pending_failed(Pending(sink, 1), errors.upstream_unavailable(str(node), "no connection"), False)
            continue
        if before is not None:
            before(conn, part)
        done = (lambda _entry, conn=conn: after(conn)) if after is not None else None
        conn.send(request, Pending(PartSink(collected, part, done), 1, conn))


class WaitEntry(Pending):
    """The client's entry for a WAIT on every master: the connections lent for it, which a
    client that goes away has half-closed (`session/gone.py`), as Redis frees a client of its
    own that leaves while WAIT waits."""

    __slots__ = ("lent",)

    def __init__(self, session, lent: list):
        super().__init__(session, 1)
        self.lent = lent


def wait_(session, batch, index: int) -> int:
    """WAIT counts the replicas that acknowledged the writes of its own connection: on each
    master, a lent connection first makes a write that covers everything written before it (a
    transaction that sets and deletes a key of the proxy's own, invisible to others), then
    WAIT; the client gets the smallest count, and its next command waits for it."""
    if session.state.in_transaction:
        return forward_one(session, batch, index)
    backend = session.backend
    masters = backend.router.master_slots()
    if not masters:
        session.answer_locally(CLUSTER_IS_DOWN)
        return index + 1
    if session.inflight:
        return session.wait(batch, index)

    def mark(conn, part) -> None:
        key = b"__redis_guard__:wait:{" + tag_for_slot(masters[part][1]) + b"}"
        conn.send_hidden([("MULTI",), ("SET", key, "1"), ("DEL", key), ("EXEC",)])

    lent = []

    def lend(node):
        conn = backend.lease(session, node=node)
        if conn is not None:
            lent.append(conn)
        return conn

    entry = None
    if session.stream is None:  # (else a barrier's entry: session.reply_later)
        entry = WaitEntry(session, lent)
        session.queue.append(entry)
        session.inflight += 1
    to_each(session, [node for node, _slot in masters], batch.span(index, index + 1), merge_min,
            lend, entry=entry, before=mark, after=lambda conn: backend.give_back(session, conn))
    session.state.to("lease")  # no connection of its own: the next command waits (DRAIN)
    session.bind()
    return index + 1


def masters_or_down(session):
    """The cluster's masters, or None once the client was told the cluster is down."""
    masters = session.backend.router.slotmap.masters()
    if not masters:
        session.answer_locally(CLUSTER_IS_DOWN)
        return None
    return masters


def control(session, batch, index: int) -> int:
    """To every master's control connection (SCRIPT KILL, FUNCTION KILL: the one running it
    answers OK; CLIENT PAUSE/UNPAUSE: each pauses), or to one (FUNCTION STATS...)."""
    if session.state.in_transaction:
        return forward_one(session, batch, index)
    args = batch.commands[index]
    backend = session.backend
    masters = masters_or_down(session)
    if masters is None:
        return index + 1
    sub = args[1].lower() if len(args) > 1 else b""
    name = args[0].lower()
    if sub == b"kill" and name in (b"script", b"function"):
        merge = _any_ok
    elif name == b"client":
        merge = merge_ok
    else:
        masters = [masters[session.spread % len(masters)]]
        merge = _first
    entry = session.reply_later()
    if watches(args):
        entry.receiver = PauseWatch(session, args)
    to_each(session, masters, batch.span(index, index + 1), merge, backend.control_connection, entry)
    return index + 1


def _any_ok(replies) -> bytes:
    """SCRIPT/FUNCTION KILL: OK from the master that ran it, else the first error (NOTBUSY)."""
    return next((reply for reply in replies if reply.startswith(b"+")), replies[0])


def _first(replies) -> bytes:
    return replies[0]


def client_kill(session, batch, index: int) -> int:
    """On every master, never reaching the proxy's own connections (`clientkill`)."""
    if session.state.in_transaction:
        return refuse_in_transaction(session, batch, index)
    args = batch.commands[index]
    backend = session.backend
    if session.state.lane is STREAMING:  # (on the stream's master, as in front of one server)
        killing = clientkill.on_stream(args, clientkill.plan(args, backend.ours()))
        session.route.send(session, args, hiredis.pack_command(tuple(killing)), 1, session)
        return index + 1
    if len(args) == 3:  # the old form, CLIENT KILL addr:port
        killed = _own_matching(session, {b"addr": args[2]}, skipme=False)
        if killed:
            return _kill_own(session, killed, b"+OK\r\n", index)
    else:
        # (an ADDR counted as "ours" only so that `plan` gives the filters: Resolve, not Forward)
        addrs = frozenset(args[i + 1] for i in range(2, len(args) - 1, 2) if args[i].lower() == b"addr")
        decision = clientkill.plan(args, clientkill.Ours(addrs=addrs))
        if type(decision) is clientkill.Resolve and set(decision.filters) <= OWN_FILTERS \
                and set(decision.filters) & {b"id", b"addr", b"laddr"}:
            # The ids and addresses a cluster client sees are the proxy's (CLIENT ID, CLIENT LIST):
            # so is the one it kills. An address none of its clients has may be a node's client.
            skipme = decision.filters.get(b"skipme", b"yes") == b"yes"
            killed = _own_matching(session, decision.filters, skipme)
            if b"id" in decision.filters or killed:
                return _kill_own(session, killed, b":%d\r\n" % len(killed), index)
    masters = masters_or_down(session)
    if masters is None:
        return index + 1
    entry = session.reply_later()
    task = session.loop.create_task(_kill_everywhere(backend, args, masters))
    task.add_done_callback(lambda done: session.fill(entry, _task_reply(done)))
    return index + 1


# CLIENT KILL filters that name the proxy's own clients as CLIENT ID and CLIENT LIST show them.
OWN_FILTERS = frozenset({b"id", b"addr", b"laddr", b"skipme"})


def _own_matching(session, filters: dict, skipme: bool) -> list:
    """The proxy's clients that are the same client as `session` (clientinfo.py: the same
    application, else the same host) and match every filter of CLIENT KILL ID/ADDR/LADDR."""
    matching = []
    for other in clientinfo.same_sessions(session):
        if skipme and other is session:
            continue
        if b"id" in filters and other.extra.id != int(filters[b"id"]):
            continue
        if b"addr" in filters or b"laddr" in filters:
            view = clientinfo.view_of(other)
            if filters.get(b"addr", view.addr.encode()) != view.addr.encode() or \
                    filters.get(b"laddr", view.laddr.encode()) != view.laddr.encode():
                continue
        matching.append(other)
    return matching


def _kill_own(session, killed: list, reply: bytes, index: int) -> int:
    """Close the proxy's clients `killed`, as Redis closes a client it kills; the caller after
    `reply`."""
    session.answer_locally(reply)
    for other in killed:
        if other is session:
            session.input_ended = True
            session.close_after_replies()
        elif other.transport is not None:
            other.transport.abort()
    return index + 1


async def _kill_everywhere(backend, args, masters) -> bytes:
    async def on(node) -> bytes:
        decision = clientkill.plan(args, backend.ours(node))
        if type(decision) is clientkill.Reply:
            return decision.reply
        connection = lambda: backend.control_connection(node)  # noqa: E731
        if type(decision) is clientkill.Forward:
            conn = connection()
            if conn is None:
                log.warning("CLIENT KILL: no control connection to %s", node)
                raise ConnectionError("no connection to a cluster node")  # (its address: in the log only)
            (reply,) = await conn.ask([args])
            if isinstance(reply, hiredis.ReplyError):
                return errors.resp_error(str(reply))
            return b"+OK\r\n" if reply == b"OK" else b":%d\r\n" % reply
        return await kill_resolved(connection, args, decision, _NodeOurs(backend, node), None)

    replies = await asyncio.gather(*(on(node) for node in masters))
    if len(args) == 3:  # the old form: OK when one master had it
        return next((reply for reply in replies if reply.startswith(b"+")), replies[0])
    error = next((reply for reply in replies if reply.startswith(b"-")), None)
    if error is not None:
        return error
    return b":%d\r\n" % sum(int(reply[1:]) for reply in replies)


class _NodeOurs:
    """`ours()` of one node, for `kill_resolved`."""

    def __init__(self, backend, node):
        self.backend = backend
        self.node = node

    def ours(self):
        return self.backend.ours(self.node)


def unknown(session, batch, index: int) -> int:
    """A command the table does not know: Redis's own error (no node can be chosen for it)."""
    session.answer_locally(errors.unknown_command(batch.commands[index]))
    session.refused_in_transaction()
    return index + 1


CLUSTER = {
    **COMMON,
    FANOUT: fanout,
    SCAN: scan,
    CLIENT_ID: client_id,
    CLIENT_GETNAME: client_getname,
    CLIENT_SETNAME: client_setname,
    CLIENT_INFO: client_view,
    CLIENT_NO_EVICT: client_no_evict,
    LOCAL_OK: local_ok,
    AUTH: login,  # (the dispatch tables send AUTH to LOGIN: credentials never reach Redis)
    HELLO: hello,
    RESET: reset,
    MULTI: multi,
    WATCH: watch,
    UNWATCH: unwatch,
    EXEC: exec_,
    DISCARD: discard,
    LEASE: lease,
    STREAM: stream,
    WAIT: wait_,
    CONTROL: control,
    CLIENT_KILL: client_kill,
    UNKNOWN: unknown,
    NO_CLUSTER: no_cluster,
}

__all__ = ["CLUSTER", "HELD", "replay"]

"""A Redis Cluster behind the proxy: the router's shared connections per master, warm spares and
a control connection per node.

Theory of operation: a session in front of a cluster has the same dispatch loop as any other;
this backend gives it the cluster's column of the behaviour table and of the handlers
(`handlers.py`), the routes (`route.py`: by hash slot while the client has no connection of its
own), and the connections: the router's shared connections (`router.py`), a warm spare lent by
a node for a transaction, a blocking command, a script or a subscription, and each node's control
connection. While a cluster client has a lent connection answering a blocking command or a
script, its dispatch table is DRAIN (its next command waits); inside a transaction, everything
but the transaction's own commands goes to the transaction's connection (`TxnRoute`).
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import time

from ...config import Upstream
from ...session.behaviour import (
    CLIENT_GETNAME,
    CLIENT_ID,
    CLIENT_INFO,
    CLIENT_KILL,
    CLIENT_NO_EVICT,
    CLIENT_SETNAME,
    CLUSTER,
    DISCARD,
    DRAIN,
    EXEC,
    FANOUT,
    HELLO,
    LEASE,
    LOCAL_OK,
    LOCKED,
    LOGIN,
    MULTI,
    NO_CLUSTER,
    NO_NAMES,
    PASS,
    QUIT,
    RESET,
    SCAN,
    STREAM,
    SUBCOMMAND,
    UNWATCH,
    WATCH,
    Behaviour,
    both_cases,
    check_columns,
    stream_table_extra,
)
from ...session.clientkill import Ours
from ...session.pause import Pauses, paused_table
from ...session.states import NONE, SHARED, STREAMING
from ...session.streamend import stream_neutral
from ...upstream.connection import CLOSED
from ...upstream.pools import ControlConnection, Opener, SparePool, refills_now
from ..base import BackendBase, OwnRoute, StreamRoute, relogin, restore_after_reset
from .handlers import CLUSTER as HANDLERS
from .handlers import cluster_face, pin_transaction
from .keyspace import FANOUT as KEYSPACE_FANOUT
from .keyspace import every_node, fans_out, merge_for, merge_info_cluster
from .redirects import close_sinks
from .route import ClusterClient, ClusterRoute, DeferredRoute, RouteTable, TxnRoute, replay
from .router import ClusterRouter
from .routing.multikey import Planner
from .sides import ClusterStreamRoute, close_sides
from .tracked import close_tracker

log = logging.getLogger("redis_guard.cluster")

# Inside a cluster transaction: the transaction's own commands, and those that end the session;
# CLUSTER's too (a node would describe the real cluster: the proxy answers, refusing it there).
_TXN_KEPT = {QUIT, MULTI, EXEC, DISCARD, WATCH, UNWATCH, RESET, LOGIN, LOCKED, STREAM, HELLO, CLIENT_ID,
             CLIENT_GETNAME, CLIENT_SETNAME, LOCAL_OK, SUBCOMMAND, NO_CLUSTER,
             FANOUT, CLIENT_INFO, CLIENT_NO_EVICT,  # (INFO, ROLE, CONFIG GET, CLIENT INFO/LIST refused: presented.py)
             LEASE}  # (forwarded there; a script's noted: handlers.lease)
# A subcommand on a stream (MONITOR, CLIENT REPLY...): CLUSTER's answered by the proxy, in order
# with the stream (its reply behind a barrier), never by the stream's node.
_STREAM_KEPT = {QUIT, LOGIN, LOCKED, RESET, STREAM, CLIENT_KILL, NO_CLUSTER, CLIENT_ID,
                FANOUT, CLIENT_INFO, LOCAL_OK}  # (INFO, ROLE, CONFIG GET, CLIENT INFO/LIST as the face presents them)


class Client(ClusterClient):
    """A cluster client, when it connected (CLIENT INFO's age: clientinfo.py), and whether it
    asked CLIENT NO-EVICT ON (its flag `e` there: handlers.client_no_evict)."""

    __slots__ = ("born", "txn_scripts", "no_evict")

    def __init__(self, session, client_id: int):
        super().__init__(session, client_id)
        self.born = time.monotonic()
        self.txn_scripts = None  # (name, sha or function) of EVALSHA/FCALL queued in MULTI (handlers._end)
        self.no_evict = False


class ClusterBackend(BackendBase):
    kind = "Cluster"
    column = CLUSTER
    default_db = 0
    databases = 1

    def __init__(self, loop, config, table):
        self.loop = loop
        self.config = config
        self.acl_users = None  # set by the Proxy: the policy's ACL users, applied on every node
        seeds = config.upstream_cluster
        self.seed = seeds[0].address
        self.label = "cluster " + ",".join(str(seed.address) for seed in seeds)
        self.router = ClusterRouter(
            loop, [seed.address for seed in seeds], seeds[0], config.shared_connections, config.connect_timeout,
            config.failover_timeout, read_from_replicas=config.read_from_replicas,
        )
        self.router.known.eval_budget = config.eval_scripts_memory  # (followers share it)
        self.routers = {self.default_identity: self.router}  # identity -> its router (`router_for`)
        self.routes = RouteTable(table, Planner(table))
        self.behaviour = Behaviour(table)
        # The one face (handlers.no_cluster), or a one-node cluster at the proxy's address (face.py).
        self.face = config.face
        self.handlers = HANDLERS if self.face != "cluster" else {**HANDLERS, NO_CLUSTER: cluster_face}
        check_columns(self.behaviour, self.column, self.handlers)
        actions = self.behaviour.actions[CLUSTER]
        self.shared_table = both_cases(actions)
        self.txn_table = both_cases({name: action if action in _TXN_KEPT else PASS for name, action in actions.items()})
        self.stream_table = both_cases({name: action if action in (QUIT, LOGIN, LOCKED, RESET, STREAM) else PASS
                                        for name, action in actions.items()})
        self.stream_table.update(stream_table_extra(actions))
        if actions.get("cluster") == SUBCOMMAND:  # (answered by the proxy there too: `_STREAM_KEPT`)
            self.stream_table.update(both_cases({"cluster": SUBCOMMAND}))
        # INFO, ROLE, CONFIG GET on a stream: as the face presents them (every master, `handlers.fanout`)
        self.stream_table.update(both_cases({name: actions[name] for name in ("info", "role", "config")
                                             if actions.get(name) in (FANOUT, SUBCOMMAND)}))
        # Every other keyless command for every master (FLUSHALL, DBSIZE, KEYS, SCRIPT LOAD...) on a
        # stream: to every master too, its merged reply in its place on the stream (`handlers.fanout`)
        subcommands = self.behaviour.subcommands[CLUSTER]
        fanning = {name for name, subs in subcommands.items() if FANOUT in subs.values() and name != "client"}
        self.stream_table.update(both_cases({name: action for name, action in actions.items()
                                             if action in (FANOUT, SCAN)
                                             or (action == SUBCOMMAND and name in fanning)}))
        # READONLY/READWRITE/ASKING on a stream: as the face answers them (handlers.local_ok)
        self.stream_table.update(both_cases({name: LOCAL_OK for name, action in actions.items() if action == LOCAL_OK}))
        self.stream_neutral = stream_neutral(actions)
        self.paused_table = paused_table(self.behaviour, CLUSTER)
        self.pauses = Pauses(loop, lambda: None)  # the Proxy sets on_change: its sessions rebind
        # Commands that leave no state on a lent connection (those that do close it after).
        self.safe = {name.encode(): action in (PASS, LEASE, FANOUT, SCAN) and name not in ("select",)
                     for name, action in actions.items()}
        self.names = {spec.name for spec in table.walk()}
        # Keyless commands to every master: how their replies merge (by name, 'script|load'...).
        self.merges = {spec.name.encode(): merge_for(spec.name, spec.tips) for spec in table.walk()
                       if fans_out(spec.name, spec.tips) or spec.name.encode() in KEYSPACE_FANOUT}
        if self.face == "cluster":
            self.merges[b"info"] = merge_info_cluster
        # Of those, the ones whose state Redis keeps on each node: to the replicas too (`handlers.to_replicas`).
        self.every_node = frozenset(spec.name.encode() for spec in table.walk() if every_node(spec.tips))
        self.deferred_route = DeferredRoute(self)
        self.shared_routes: dict[tuple, ClusterRoute] = {}
        self.spares: dict[tuple, SparePool] = {}
        self.controls: dict = {}
        self._client_ids = itertools.count(1)
        self.sides = {}  # session -> its stream's connections aside (sides.py: MONITOR, shard channels)
        self.tracking_sinks = {}  # session -> its tracking redirect's sinks (redirects.py)
        self.tracked = {}  # session -> its tracking's connections on the other masters (tracked.py)
        self.router.listeners.append(self._topology_changed)

    async def start(self) -> None:
        await self.router.start()

    def close(self) -> None:
        self.router.close()
        for spares in self.spares.values():
            spares.close()
        for control in self.controls.values():
            control.close()

    # -- sessions -------------------------------------------------------------------------

    def session_extra(self, session) -> ClusterClient:
        session.reader.keep_ends()  # (its pipelines are dealt out to their masters: copied by the split's ends)
        return Client(session, next(self._client_ids))

    def _topology_changed(self) -> None:
        for streaming in list(self.sides.values()):
            streaming.reconcile()
        for tracker in list(self.tracked.values()):
            tracker.reconcile()

    def session_closed(self, session) -> None:
        close_sides(session)
        close_sinks(session)
        close_tracker(session)
        if session.pubsub is not None:  # (a RESP3 client's subscriptions, on a connection of their own)
            session.pubsub.close()

    def actions_for(self, session) -> tuple:
        state = session.state
        if state.txn is not NONE:
            return self.txn_table, PASS
        lane = state.lane
        if lane is SHARED:
            table = self.paused_table if self.pauses.writes_held else self.shared_table
            return table, self.behaviour.unknown_command[CLUSTER]
        if lane is STREAMING:
            return self.stream_table, PASS
        return NO_NAMES, DRAIN

    def lane_action(self, session, action: int) -> int:
        state = session.state
        if state.txn is not NONE:
            return action if action in _TXN_KEPT else PASS
        if state.lane is SHARED:
            return action
        if state.lane is STREAMING:  # (CLIENT's subcommands there: `stream_table_extra`)
            return action if action in _STREAM_KEPT else PASS
        return DRAIN

    # -- identities: the upstream user a client's commands run as --------------------------------

    @property
    def default_identity(self) -> tuple:
        return (self.router.username, self.router.password)

    def router_for(self, identity) -> ClusterRouter:
        """The router whose connections run as `identity`: the proxy's own, or a follower of it
        (same topology and refreshes, connections of its own)."""
        router = self.routers.get(identity)
        if router is None:
            leader = self.router
            credentials = Upstream(self.seed, identity[0], identity[1], 0)
            router = self.routers[identity] = ClusterRouter(
                self.loop, leader.seeds, credentials, leader.size, leader.connect_timeout, leader.failover_timeout,
                read_from_replicas=leader.read_from_replicas, leader=leader)
        return router

    def router_of(self, session) -> ClusterRouter:
        return self.router_for(self.identity(session))

    def identity_changed(self, session) -> None:
        """The client's application changed (AUTH, RESET, a reload): its shared route, or the
        connection lent to it logged in again as the new identity (and the one its RESP3
        subscriptions live on: those it makes next are the new identity's)."""
        if session.pubsub is not None:
            for conn in session.pubsub.asides():
                relogin(conn, self.identity(session))
        if not session.state.own:
            if session.state.txn is NONE:
                session.route = self.shared_route(session)
            return
        relogin(session.own, self.identity(session))

    def restore_after_reset(self, session, conn) -> None:
        """After the client's RESET on its stream: the node's connection logged in again."""
        if conn is not None and conn.upstream is not None:
            identity = self.identity(session)
            restore_after_reset(session, conn, dataclasses.replace(conn.upstream, username=identity[0],
                                                                   password=identity[1], db=0), 0)

    def hello(self, session, batch, index: int, hello_args) -> int:
        return self.handlers[HELLO](session, batch, index, hello_args)

    # -- routes and connections -------------------------------------------------------------

    def shared_route(self, session) -> ClusterRoute:
        identity = self.identity(session)
        key = (session.protocol, session.spread, identity)
        route = self.shared_routes.get(key)
        if route is None:
            route = self.shared_routes[key] = ClusterRoute(self.router_for(identity), self.routes, session.protocol,
                                                           session.spread)
        return route

    def own_route(self, session, conn):
        if session.state.txn is not NONE:
            return TxnRoute(conn, self.routes, self.router_of(session), self.safe)
        return OwnRoute(conn)

    def stream_route(self, session, conn) -> StreamRoute:
        return ClusterStreamRoute(conn, self.stream_neutral)  # (another master's key: its owner answers)

    def stream_ended(self, session, conn) -> None:
        """No subscription is left on the client's stream: back to the shared connections,
        routed by slot again. The connection is closed, not given back: the proxy keeps a
        cluster client's connection state itself, and nothing of the stream's is left to keep."""
        session.own = None
        conn.owner = None
        session.forget_upstream(conn)  # (paused for a slow reader: closed now)
        session.state.to("drop")
        session.route = self.shared_route(session)
        session.bind()
        conn.close()
        close_sides(session)
        close_sinks(session)
        close_tracker(session)

    def _upstream(self, node) -> Upstream:
        return self.router.upstream_for(node)

    def spare_pool(self, node, protocol: int, identity=None) -> SparePool:
        identity = identity or self.default_identity
        key = (node, protocol, identity)
        spares = self.spares.get(key)
        if spares is None:
            upstream = Upstream(node, identity[0], identity[1], 0)
            opener = Opener(self.loop, upstream, 0, protocol, self.config.connect_timeout, retry_interval=0.25)
            spares = self.spares[key] = SparePool(opener, self.config.warm_spares)
        return spares

    def lease(self, session, args=None, node=None):
        return self.spare_pool(node or self.seed, session.protocol, self.identity(session)).take(refills_now(args))

    def give_back(self, session, conn) -> None:
        conn.owner = None
        client = session.extra
        if client.tainted:
            client.tainted = False
            conn.close()
            return
        upstream = conn.upstream
        if upstream is None:
            conn.close()
            return
        self.spare_pool(conn.address, conn.protocol, (upstream.username, upstream.password)).give_back(conn)

    def pin_deferred(self, session, hash_slot) -> bool:
        """The first key of a deferred transaction picks its node: lend a connection there and
        replay MULTI and the keyless commands answered so far."""
        client = session.extra
        deferred, client.deferred = client.deferred, None
        name, client.deferred_name = client.deferred_name, None
        if not pin_transaction(session, hash_slot, name):
            return False
        replay(session.own, deferred)
        return True

    def control_connection(self, node=None):
        node = node or (self.router.slotmap.masters() or (self.seed,))[0]
        control = self.controls.get(node)
        if control is None:
            control = self.controls[node] = ControlConnection(
                Opener(self.loop, self._upstream(node), 0, 2, self.config.connect_timeout, retry_interval=0.25))
        return control.get()

    def connections(self, node=None) -> list:
        """(role, connection) of the proxy's own live connections (of one node)."""
        found = []
        for router in (self.router, *self.router.followers):
            for (address, _protocol, _readonly), pool in router.pools.items():
                if node is None or address == node:
                    found += [(conn.role, conn) for conn in pool.live()]
        for (address, _protocol, _identity), spares in self.spares.items():
            if node is None or address == node:
                found += [(conn.role, conn) for conn in spares.idle if conn.state is not CLOSED]
        for address, control in self.controls.items():
            if (node is None or address == node) and control.conn is not None and control.conn.state is not CLOSED:
                found.append((control.conn.role, control.conn))
        return found

    def ours(self, node=None) -> Ours:
        conns = [conn for _role, conn in self.connections(node)]
        users = {(identity[0] or "default").encode() for identity in self.routers}
        users |= {(identity[0] or "default").encode() for _node, _protocol, identity in self.spares}
        return Ours(frozenset(conn.sockname for conn in conns if conn.sockname is not None), frozenset(users))

    # -- operators --------------------------------------------------------------------------

    def log_state(self) -> None:
        router = self.router
        log.info("cluster: %s; %d parked requests; %d topology refreshes", router.slotmap.describe(),
                 len(router.parked), router.refreshes)
        for (node, protocol, readonly), pool in router.pools.items():
            for index, conn in enumerate(pool.connections):
                if conn is not None:
                    log.info("node %s%s resp=%d #%d: %s, %d runs in flight", node,
                             " (replica reads)" if readonly else "", protocol, index, conn.state, len(conn.pending))

"""One Redis server behind the proxy: shared pools, warm spares and a control connection.

Theory of operation: clients with no connection state share the connections of one pool per
(identity, database, protocol) (`SharedRoute`: one slice of the client's bytes per stretch, the
hot path); a client that moves to a connection of its own is lent a warm spare of its pool's
kind (`SparePool`) and gives it back once it is idle and holds no state; commands that must not
wait behind the work they control take the control connection. The identity is the upstream
user a session's connections run as (the upstream URL's, or its application's ACL user). A
Sentinel-managed master is this backend with an address that changes (`sentinel.py`).
"""

from __future__ import annotations

import logging

from .. import compiled
from ..config import Upstream
from ..pending import Pending, queue_append
from ..session.behaviour import STANDALONE, Behaviour, check_columns, lane_tables, own_action
from ..session.clientkill import Ours
from ..session.pause import Pauses, paused_table
from ..session.states import SHARED
from ..session.streamend import stream_neutral
from ..upstream.connection import CLOSED
from ..upstream.pools import ControlConnection, Opener, SharedPool, SparePool, refills_now
from . import handlers
from .base import BackendBase, OwnRoute, StreamRoute, relogin, restore_after_reset
from .route import Route

log = logging.getLogger("redis_guard.server")


class SharedRoute(Route):
    """The shared connection of one pool a session sticks to: a stretch is one slice of the
    client's bytes and one entry in its reply queue."""

    __slots__ = compiled.declared_fields(__file__, "SharedRoute")

    def __init__(self, pool: SharedPool, index: int):
        self.pool = pool
        self.index = index
        self.conn = None

    def connection(self):
        conn = self.conn
        if conn is None or conn.state is CLOSED:
            conn = self.conn = self.pool.get(self.index)
        return conn

    def forward(self, session, batch, start: int, stop: int) -> None:
        conn = self.conn
        if conn is None or conn.state is CLOSED:
            conn = self.connection()
            if conn is None:
                session.no_connection(self.pool.opener, stop - start)
                return
        # The hot path's send, in this frame (once per client read): the run is one slice of the
        # client's bytes and one entry in its reply queue; a whole read is its raw bytes without
        # span's call (its cost: benchmarks/README.md, "Figures behind the code").
        count = stop - start
        sent = batch.raw if count == len(batch.commands) else batch.span(start, stop)
        pending = Pending.__new__(Pending)  # Pending(session, count, conn, sent) without argument parsing (compiled)
        pending._fill_pending(session, count, conn, sent)
        queue_append(session.queue, pending)
        session.inflight += 1
        conn.send(sent, pending)
        if conn.write_paused:
            session.wait_for_upstream(conn)

    def send(self, session, args, data: bytes, count: int, receiver) -> None:
        conn = self.connection()
        if conn is None:
            session.no_connection(self.pool.opener, count)
            return
        session.send(conn, data, count, receiver)

    def hidden(self, session, args, commands) -> None:
        session.send_hidden(self.connection(), commands)


class StandaloneBackend(BackendBase):
    kind = "server"
    column = STANDALONE

    def __init__(self, loop, config, table, databases: int = 16, handler_table=None):
        self.loop = loop
        self.config = config
        self.upstream = config.upstream
        self.address = config.upstream.address  # a Sentinel-managed master's changes
        self.label = str(config.upstream.address)
        self.default_db = config.upstream.db
        self.databases = databases
        self.timeout = config.connect_timeout
        self.size = config.shared_connections
        self.warm_spares = config.warm_spares
        self.behaviour = Behaviour(table)
        self.handlers = handler_table or handlers.STANDALONE
        check_columns(self.behaviour, self.column, self.handlers)
        self.tables = lane_tables(self.behaviour, self.column)
        self.stream_neutral = stream_neutral(self.behaviour.actions[self.column])
        self.paused_table = paused_table(self.behaviour, self.column)
        self.pauses = Pauses(loop, lambda: None)  # the Proxy sets on_change: its sessions rebind
        self.names = {spec.name for spec in table.walk()}
        self.openers: dict[tuple, Opener] = {}
        self.pools: dict[tuple, SharedPool] = {}
        self.spares: dict[tuple, SparePool] = {}
        self.routes: dict[tuple, SharedRoute] = {}
        self.control = ControlConnection(self._opener(self.default_identity, 0, 2))
        self.acl_users = None  # set by the Proxy: the policy's ACL users, applied upstream

    # -- connections ------------------------------------------------------------------------

    def _opener(self, identity, db: int, protocol: int) -> Opener:
        key = (identity, db, protocol)
        opener = self.openers.get(key)
        if opener is None:
            opener = self.openers[key] = Opener(self.loop, self.upstream_as(identity), db, protocol, self.timeout)
        return opener

    @property
    def default_identity(self) -> tuple:
        return (self.upstream.username, self.upstream.password)

    def upstream_as(self, identity) -> Upstream:
        return Upstream(self.address, identity[0], identity[1], self.default_db)

    def _key(self, session) -> tuple:
        return (self.identity(session), session.db, session.protocol)

    def pool(self, key: tuple) -> SharedPool:
        pool = self.pools.get(key)
        if pool is None:
            pool = self.pools[key] = SharedPool(self._opener(*key), self.size)
        return pool

    def spare_pool(self, key: tuple) -> SparePool:
        spares = self.spares.get(key)
        if spares is None:
            spares = self.spares[key] = SparePool(self._opener(*key), self.warm_spares)
        return spares

    async def start(self) -> None:
        """Warm spares for the default database in both protocols, and the control connection."""
        identity = self.default_identity if self.acl_users is None else self.acl_users.credentials_for(None)
        for protocol in (2, 3):
            self.spare_pool((identity, self.default_db, protocol)).refill()
        self.control.get()

    def shared_route(self, session) -> SharedRoute:
        key = self._key(session)
        index = session.spread
        route = self.routes.get(key + (index,))
        if route is None:
            route = self.routes[key + (index,)] = SharedRoute(self.pool(key), index)
        return route

    def own_route(self, session, conn) -> OwnRoute:
        return OwnRoute(conn)

    def stream_route(self, session, conn) -> StreamRoute:
        return StreamRoute(conn, self.stream_neutral)

    def stream_ended(self, session, conn) -> None:
        """No subscription is left on the client's stream: the connection stays the client's
        (it may hold state the client set before), its replies paired."""
        session.state.to("unstream")
        session.route = self.own_route(session, conn)
        session.bind()

    def warm(self, session) -> None:
        """Spares ready in the session's database and protocol (it just moved there)."""
        self.spare_pool(self._key(session)).refill()

    def lease(self, session, args=None):
        return self.spare_pool(self._key(session)).take(refills_now(args))

    def give_back(self, session, conn) -> None:
        conn.owner = None
        conn.pushes_to = None
        if conn.upstream is None or conn.upstream.address != self.address:
            conn.close()
            return
        identity = (conn.upstream.username, conn.upstream.password)
        self.spare_pool((identity, conn.db, conn.protocol)).give_back(conn)

    def restore_after_reset(self, session, conn) -> None:
        """After the client's RESET on its own connection: the proxy's credentials again, in the
        default database and RESP2 (the state RESET leaves a client in)."""
        restore_after_reset(session, conn, self.upstream_as(self.identity(session)), self.default_db)

    def control_connection(self, node=None):
        return self.control.get()

    def opener_for(self, session) -> Opener:
        return self._opener(*self._key(session))

    def identity_changed(self, session) -> None:
        """The session's application changed (AUTH, RESET, a reload): its shared route, or its
        own connection logged in again as the new identity."""
        if not session.state.own:
            session.route = self.shared_route(session)
            return
        relogin(session.own, self.identity(session))

    def connections(self) -> list:
        """(role, connection) of every live connection the backend holds."""
        found = []
        for pool in self.pools.values():
            found += [(conn.role, conn) for conn in pool.live()]
        for spares in self.spares.values():
            found += [(conn.role, conn) for conn in spares.idle if conn.state is not CLOSED]
        if self.control.conn is not None and self.control.conn.state is not CLOSED:
            found.append((self.control.conn.role, self.control.conn))
        return found

    def ours(self) -> Ours:
        """What Redis knows the proxy's own connections by (never a client's own)."""
        conns = [conn for _role, conn in self.connections()]
        users = {(identity[0] or "default").encode() for identity, _db, _protocol in self.openers}
        return Ours(frozenset(conn.sockname for conn in conns if conn.sockname is not None), frozenset(users))

    # -- behaviour --------------------------------------------------------------------------

    def actions_for(self, session) -> tuple[dict, int]:
        lane = session.state.lane
        if lane is SHARED and self.pauses.writes_held:
            return self.paused_table, self.behaviour.unknown(self.column, lane)
        return self.tables[lane], self.behaviour.unknown(self.column, lane)

    def lane_action(self, session, action: int) -> int:
        return own_action(action, session.state.lane)

    def session_extra(self, session):
        return None

    def session_closed(self, session) -> None:
        pass

    def hello(self, session, batch, index: int, hello_args) -> int:
        return handlers.hello(session, batch, index, hello_args)

    # -- operators --------------------------------------------------------------------------

    def log_state(self) -> None:
        for (_identity, db, protocol), pool in self.pools.items():
            for index, conn in enumerate(pool.connections):
                if conn is not None:
                    log.info("pool db=%d resp=%d #%d: %s, %d runs in flight, %d queued writes%s",
                             db, protocol, index, conn.state, len(conn.pending), len(conn.out),
                             ", writing paused" if conn.write_paused else "")
        spares = sum(len(pool.idle) for pool in self.spares.values())
        log.info("%d warm spare connection(s); control connection %s", spares,
                 self.control.conn.state if self.control.conn is not None else "not opened")

    def close(self) -> None:
        for pool in self.pools.values():
            pool.close()
        for spares in self.spares.values():
            spares.close()
        self.control.close()

"""The listening side of one proxy process: the socket, the sessions, the policy they run under.

`Proxy` accepts client connections (one `Session` each, `proxy/session/`), owns the backend that
holds every upstream connection (`proxy/backends/`: a server, a Redis Cluster or a
Sentinel-managed master), and keeps what sessions share: the engine of the current policy per
application, and the dispatch tables built from it (one per lane table and policy, shared by
every session that uses both). On shutdown it stops accepting, lets the replies in flight finish
(bounded) and closes everything.
"""

from __future__ import annotations

import asyncio
import logging
import socket

from .backends.cluster.backend import ClusterBackend
from .backends.sentinel import SentinelBackend
from .backends.standalone import StandaloneBackend
from .bounds import Bounds
from .resp.reader import ParseLimits
from .session import session as session_module
from .session.behaviour import LOCKED, NO_NAMES, counted, counted_unknown, dispatch_table, locked, with_login
from .session.session import Session, one_unit_names
from .tls import ServerContexts, peer_name
from .upstream.connection import loop_settings
from .upstream_acl import Keeper
from .upstream_scripts import load_for

log = logging.getLogger("redis_guard.server")


class TLSSession(Session):
    """A client of a TLS listener: with `tls.auth_clients_user: CN`, a certificate whose common
    name names an application of the policy logs the client in as it, without AUTH (Redis 8's
    tls-auth-clients-user); any other client AUTHs as before."""

    def connection_made(self, transport) -> None:
        Session.connection_made(self, transport)
        proxy = self.proxy
        if proxy.config.tls.auth_clients_user and proxy.tenants is not None:
            name = peer_name(transport)
            if name is not None and proxy.tenants.engine(name) is not None:
                self.app = name
                self.backend.identity_changed(self)
                self.bind()


def make_backend(loop, config, command_table, databases: int):
    if config.upstream_cluster:
        return ClusterBackend(loop, config, command_table)
    if config.upstream_sentinel is not None:
        return SentinelBackend(loop, config, command_table, databases)

    return StandaloneBackend(loop, config, command_table, databases)


class Proxy:
    """Owns the listening socket, the backend and the policy bindings of one process."""

    def __init__(self, loop, config, command_table, databases: int = 16, engine=None, backend=None):
        self.loop = loop
        self.config = config
        self.parse_limits = ParseLimits(
            max_args=config.limits.max_args,
            max_request_bytes=config.limits.max_request_bytes,
        )
        self.command_table = command_table
        session_module.ONE_UNIT = one_unit_names(command_table)  # (the reply window's units)
        loop_settings(loop).request_timeout = getattr(config, "request_timeout", 0.0)
        self.backend = backend or make_backend(loop, config, command_table, databases)
        self.backend.pauses.on_change = self.rebind
        self.engine = None
        self._shadow = None
        self.tenants = None
        self.bindings: dict = {}
        self.sessions: set[Session] = set()
        self.tables: dict = {}
        self._next_spread = 0
        self.server = None
        self.servers = []  # every listener: `listen`, and `tls_listen` when set
        self.tls = None  # tls.ServerContexts when a listener speaks TLS
        self.overflows = 0  # clients disconnected for unread replies since the last log line
        self.overflow_logged = float("-inf")
        self.bounds = Bounds(self, config.limits)  # max_memory, max_clients, client_idle_timeout
        self.set_engine(engine)

    @property
    def upstream_label(self) -> str:
        return self.backend.label

    @property
    def acl_users(self):
        """The policy's ACL users the upstream connections run as (`policy/acl.py`), or None:
        every connection runs as the upstream URL's user."""
        return self.backend.acl_users

    @acl_users.setter
    def acl_users(self, users) -> None:
        self.backend.acl_users = users
        # A server restarted without persistence refuses them (WRONGPASS): the keeper applies them again
        # (and the approved function libraries, which have no EVAL to fall back on, are loaded again)
        keeper = None
        if users is not None:
            keeper = Keeper(self.config, users, backend=self.backend, after=self._load_approved)
        loop_settings(self.loop).keeper = keeper
        for session in self.sessions:
            self.backend.identity_changed(session)

    async def _load_approved(self, config) -> None:
        await load_for(config, self.engine)

    @property
    def shadow(self):
        """A candidate policy decided next to the engine's (policy/shadow.py), or None."""
        return self._shadow

    @shadow.setter
    def shadow(self, shadow) -> None:
        # Every session takes it at once (Session.bind): the dispatch loop reads the session's own
        # field, not the proxy's attribute, once per read.
        self._shadow = shadow
        self.rebind()

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
        self.tables = {}  # (id of an action table, locked, id of a plans dict) -> dispatch table
        for session in self.sessions:
            session.bind()

    def rebind(self) -> None:
        """Every session takes its dispatch table again (a pause of the upstream began or ended)."""
        for session in self.sessions:
            session.bind()

    def checked(self, tenants, tag: bytes, future) -> None:
        """A password check finished: remember good credentials for the next connections."""
        if self.checks.get(tag) is future:
            del self.checks[tag]
        if not future.cancelled() and future.exception() is None and future.result() is not None:
            tenants.remember(tag, future.result())

    def dispatch_for(self, actions, unknown: int, is_locked: bool, plans: dict):
        """A session's dispatch table and its action for names not in it: the backend's lane
        table, with AUTH/HELLO answered here (with applications that require it, NOAUTH for
        everything before them), a Guard for every name the policy checks, and each command
        that passes as its Tally (the monitor's count). Shared by the sessions with the same
        three; alive until `set_engine` drops them."""
        if actions is NO_NAMES:  # every name takes `unknown`: nothing to add or lock
            return actions, unknown
        key = (id(actions), is_locked, id(plans))
        table = self.tables.get(key)
        if table is None:
            # AUTH and HELLO are always answered here: a client's credentials never reach Redis
            # (session/auth.py), so the proxy alone decides who its upstream connections are.
            table = locked(actions) if is_locked else with_login(actions)
            if not is_locked:
                table = dispatch_table(table, plans)
            table = self.tables[key] = counted(table)
        return table, LOCKED if is_locked else counted_unknown(unknown)

    def assign_spread(self) -> int:
        """Which of the `shared_connections` of a pool the next client sticks to."""
        index = self._next_spread
        self._next_spread = (index + 1) % self.config.shared_connections
        return index

    async def start(self, sock: socket.socket | None = None, reuse_port: bool = False):
        config = self.config
        if config.tls is not None and self.tls is None:
            self.tls = ServerContexts(config.tls)  # before the backend: a bad file stops here
        await self.backend.start()
        self.bounds.start(self.loop)
        listen = config.listen
        # `tls` alone: the listener speaks TLS; with `tls_listen`, `listen` stays plain (Redis's
        # port and tls-port)
        ssl = self.tls.context if self.tls is not None and config.tls_listen is None else None
        first = TLSSession if ssl is not None else Session
        if sock is not None:
            self.server = await self.loop.create_server(lambda: first(self), sock=sock, ssl=ssl)
        else:
            self.server = await self.loop.create_server(
                lambda: first(self), listen.host, listen.port,
                reuse_address=True, reuse_port=reuse_port or None, backlog=1024, ssl=ssl,
            )
        self.servers = [self.server]
        if self.tls is not None and config.tls_listen is not None:
            self.servers.append(await self.loop.create_server(
                lambda: TLSSession(self), config.tls_listen.host, config.tls_listen.port,
                reuse_address=True, reuse_port=reuse_port or None, backlog=1024, ssl=self.tls.context,
            ))
        return self.server

    @property
    def bound_address(self):
        return self.server.sockets[0].getsockname()

    @property
    def tls_address(self):
        """Where the `tls_listen` listener is bound (None: no second listener)."""
        return self.servers[1].sockets[0].getsockname() if len(self.servers) > 1 else None

    def log_state(self) -> None:
        """SIGUSR1: the sessions by lane and the backend's connections, for operators."""
        lanes = {}
        for session in self.sessions:
            lanes[session.state.lane] = lanes.get(session.state.lane, 0) + 1
        log.info("%d client sessions (%s)", len(self.sessions),
                 ", ".join(f"{count} {lane}" for lane, count in sorted(lanes.items())) or "none")
        if self.tls is not None:
            log.info("%d of them over TLS", sum(1 for session in self.sessions if type(session) is TLSSession))
        self.backend.log_state()

    async def shutdown(self, timeout: float) -> None:
        """Stop accepting, let in-flight replies finish (bounded), then close everything."""
        for server in self.servers or [self.server]:
            if server is not None:
                server.close()
        self.bounds.stop()
        for session in list(self.sessions):
            session.drain()
        cut = sum(1 for session in self.sessions if session.own is not None and session.own.close_asked)
        if cut:  # (session/gone.py: a command that waits is not waited for)
            log.info("stopping: %d client(s) waiting in a blocking command closed at once", cut)
        deadline = self.loop.time() + timeout
        while self.sessions and self.loop.time() < deadline:
            await asyncio.sleep(0.02)
        for session in list(self.sessions):
            if session.transport is not None:
                session.transport.abort()
        self.backend.close()

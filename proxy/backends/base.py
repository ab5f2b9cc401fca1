"""What a session needs from the upstream side: the `Backend` and `Route` interfaces.

In the spirit of Envoy's router / connection-pool split, a backend owns every upstream
connection and says where a session's commands go; the session never knows whether it talks to
one server, a Redis Cluster or a Sentinel-managed master. A backend gives:

* routes (`Route`, route.py: the interface both sides import): the shared route for
  the session's database, protocol and identity, and the routes of a connection of the client's
  own (paired, or streaming);
* connections of the client's own (`lease`: a warm spare, given back when clean) and a control
  connection that never carries client traffic;
* its column of the behaviour table (`session/behaviour.py`) and its handler table (`handlers.py`,
  `cluster/handlers.py`).

`OwnRoute`, `StreamRoute` and `relogin` are the same for every backend and live here.
"""

from __future__ import annotations

import dataclasses
from typing import Protocol

import hiredis

from ..pending import ScriptVerdictSink
from ..session import streamend
from ..session.behaviour import LEASE, PASS
from ..session.streamorder import StreamOrder, turns_replies_off
from ..upstream.connection import startup_commands
from ..upstream.relogin import send_logged
from .route import Route


class Backend(Protocol):
    """What the session, the common handlers, the server and the monitor ask of any backend
    (tests/meta/test_backend_protocol.py checks that each backend has every member, and that no
    caller outside a backend's own modules asks for one not declared here)."""

    label: str  # for logs and errors
    kind: str  # "server", "cluster", "sentinel"
    column: int  # its column of the behaviour table
    handlers: dict  # action -> handler: its column of the handlers (common ones included)
    behaviour: object  # the behaviour table (session/behaviour.py) its column is read from
    default_db: int  # the database a client starts in (and is back in after RESET)
    databases: int  # how many databases SELECT may name
    pauses: object  # CLIENT PAUSE as the proxy saw it go upstream (session/pause.py `Pauses`)
    acl_users: object  # the policy's ACL users applied upstream, None when not (set by the Proxy)
    default_identity: tuple  # (user, password) of the upstream URL: what connections run as by default

    async def start(self) -> None:
        """Open what it needs before clients come (warm spares, the control connection, the topology)."""

    def close(self) -> None:
        """Close every upstream connection it holds."""

    def log_state(self) -> None:
        """Log its pools and connections (SIGUSR1)."""

    def session_extra(self, session):
        """What it keeps per session (`session.extra`): None, or the cluster's client."""

    def session_closed(self, session) -> None:
        """The session is gone: let go of what it held for it."""

    def actions_for(self, session) -> tuple[dict, int]:
        """The dispatch table for the session's lane and the action of a command not in it."""

    def lane_action(self, session, action: int) -> int:
        """What `action` becomes in the session's lane (a command lent a connection is PASS there)."""

    def shared_route(self, session) -> Route:
        """The shared route for the session's database, protocol and identity."""

    def own_route(self, session, conn) -> Route:
        """The route of a connection of the client's own, replies paired."""

    def stream_route(self, session, conn) -> Route:
        """The route of the client's stream: replies no longer paired with requests."""

    def stream_ended(self, session, conn) -> None:
        """No subscription is left on the client's stream: back to paired replies."""

    def hello(self, session, batch, index: int, hello_args) -> int:
        """HELLO with the proxy's own login done: its switch of protocol (a handler's return)."""

    def lease(self, session, args=None):
        """A connection of the client's own (a warm spare), None when none can be had."""

    def give_back(self, session, conn) -> None:
        """A lent connection back, kept as a spare when it holds no state, else closed."""

    def restore_after_reset(self, session, conn) -> None:
        """After the client's RESET on its own connection: the proxy's login, database, RESP2 again."""

    def control_connection(self, node=None):
        """The connection that never carries client traffic, None while it is not open."""

    def ours(self):
        """What Redis knows the proxy's own connections by (`clientkill.Ours`)."""

    def knows(self, name: str) -> bool:
        """Whether the command table has the command `name`."""

    def identity_changed(self, session) -> None:
        """The session's application changed (AUTH, RESET, a reload): its connections follow."""

    def connections(self) -> list:
        """(role, connection) of every live upstream connection it holds."""


class SingleServer(Backend, Protocol):
    """What the standalone column of handlers (handlers.py) asks more of the backends that serve
    it: one server, alone or behind Sentinel."""

    control: object  # the control connection's holder (`upstream.pools.ControlConnection`)

    def opener_for(self, session):
        """The opener of the session's pool: what `session.no_connection` reports the failure of."""

    def warm(self, session) -> None:
        """Spares ready in the session's database and protocol (it just moved there)."""

class BackendBase:
    """What every backend does the same way: each backend class derives from it."""

    __slots__ = ()

    def identity(self, session) -> tuple:
        """The upstream user and password the session's connections run as: its application's
        ACL user when the policy's users are applied upstream (`policy/acl.py`), else the URL's."""
        users = self.acl_users
        return self.default_identity if users is None else users.credentials_for(session.app)

    def knows(self, name: str) -> bool:
        return name in self.names


class OwnRoute(Route):
    """A connection of the client's own: everything goes there, in order."""

    __slots__ = ("conn",)

    def __init__(self, conn):
        self.conn = conn

    def forward(self, session, batch, start: int, stop: int) -> None:
        session.send(self.conn, batch.span(start, stop), stop - start)

    def send(self, session, args, data: bytes, count: int, receiver) -> None:
        session.send(self.conn, data, count, receiver)

    def hidden(self, session, args, commands) -> None:
        session.send_hidden(self.conn, commands)


class StreamRoute(Route):
    """A connection whose replies are no longer paired with requests: requests go as they are,
    every reply goes to the session's stream entry. A command not in `neutral` (one that may
    hold connection state) keeps the stream when its subscriptions end (session/streamend.py)."""

    __slots__ = ("conn", "neutral")

    def __init__(self, conn, neutral=frozenset()):
        self.conn = conn
        self.neutral = neutral

    def forward(self, session, batch, start: int, stop: int) -> None:
        if not session.replies_unsure or session.stream_ends:
            commands = batch.commands
            for index in range(start, stop):
                args = commands[index]
                if turns_replies_off(args):
                    session.replies_unsure = True
                streamend.passes(session, args, self.neutral)
        self.conn.send(batch.span(start, stop), None)

    def send(self, session, args, data: bytes, count: int, receiver) -> None:
        if type(receiver) is ScriptVerdictSink and not session.replies_unsure:
            StreamOrder.of(session, session.stream).watched(data, receiver)  # its refusal is counted
        else:
            self.conn.send(data, None)

    def hidden(self, session, args, commands) -> None:
        pass  # replies that cannot be told apart from the client's: the policy adds nothing here


def kept_on_lease(action: int) -> bool:
    return action == PASS or action == LEASE


def relogin(conn, identity: tuple) -> None:
    """A connection lent or pinned to a client whose identity changed (AUTH as another
    application): logged in again as `identity`, so that it goes back to that identity's spares.
    A connection the client authenticated itself (`upstream` None) runs as the client's user."""
    if conn is None or conn.upstream is None:
        return
    if identity != (conn.upstream.username, conn.upstream.password):
        conn.upstream = dataclasses.replace(conn.upstream, username=identity[0], password=identity[1])
        send_logged(conn, [("AUTH", identity[0] or "default", identity[1] or "")])


def restore_after_reset(session, conn, upstream, db: int) -> None:
    """After the client's RESET on a connection of its own (which logs it out): the proxy's
    credentials `upstream` again, database `db`, RESP2. On the client's stream their replies are
    hidden between barriers (session/streamorder.py): after RESET the server answers every
    command (replies on) and pushes nothing (no subscription, tracking or MONITOR is left)."""
    if conn is None:
        return
    commands = startup_commands(upstream, db, 2)
    stream = session.stream
    if stream is not None and stream.conn is conn:
        if commands:
            StreamOrder.of(session, stream).hidden(b"".join(hiredis.pack_command(tuple(cmd)) for cmd in commands))
    else:
        send_logged(conn, commands)  # (right behind RESET, whose reply is in flight)
    if conn.upstream is not None:
        conn.upstream = upstream
    conn.db, conn.protocol = db, 2

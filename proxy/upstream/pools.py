"""Where upstream connections come from: shared pools, warm spares, the control connection.

Theory of operation: a `SharedPool` holds the shared connections of one (database, protocol,
identity): clients without connection state are spread over them and stick to one, so a
client's requests run in the order it sent them. A `SparePool` keeps connections of one
(database, protocol, identity) opened, authenticated and idle, so that a client moving to a
connection of its own (a blocking command, a script, a transaction, connection state) is
written to at once instead of waiting for a connect, and commands other clients send after it
cannot overtake it; it refills itself in the background and takes back lent connections that
are idle and clean. A `ControlConnection` is the one connection on which the proxy sends
commands that must not wait behind the work they control (SCRIPT KILL, FUNCTION KILL, CLIENT
PAUSE/UNPAUSE) and its own questions (CLIENT LIST for a client's CLIENT KILL). None of these
wait on a timer: connections are (re)opened when asked for, and failures remembered for
`retry_interval` so that a client is answered at once while the upstream is known to be down.
"""

from __future__ import annotations

import time

from .connection import CLOSED, CONTROL, OWN, SHARED, SPARE, UpstreamConnection, loop_settings, open_connection


class Opener:
    """Opens connections of one (address, identity, database, protocol), remembering a recent
    failure to connect so that callers are answered at once while the upstream is down."""

    __slots__ = ("loop", "upstream", "db", "protocol", "timeout", "failed_at", "failed_reason",
                 "retry_interval", "cls", "extra", "on_failure", "refusal")

    def __init__(self, loop, upstream, db: int, protocol: int, timeout: float, cls=UpstreamConnection,
                 retry_interval: float = 0.1, on_failure=None, **extra):
        self.loop = loop
        self.upstream = upstream
        self.db = db
        self.protocol = protocol
        self.timeout = timeout
        self.failed_at = -1e9
        self.failed_reason = ""
        self.retry_interval = retry_interval
        self.cls = cls
        self.extra = extra
        self.on_failure = on_failure  # (connection) -> None, after a connection failed on its own
        self.refusal = None  # the server's own reply when it refused the last start-up (NOAUTH...)

    def down(self) -> bool:
        return time.monotonic() - self.failed_at < self.retry_interval

    def open(self, role: str, on_close=None, **extra) -> UpstreamConnection:
        def closed(conn):
            if conn.transport is None or conn.refused:
                self.failed_at = time.monotonic()
                self.failed_reason = conn.close_reason
                self.refusal = conn.refusal
            if on_close is not None:
                on_close(conn)
            if self.on_failure is not None and conn.close_reason != "closed by the proxy":
                self.on_failure(conn)

        keeper = loop_settings(self.loop).keeper
        if keeper is not None:  # a restart seen by its run_id (upstream_acl.Keeper.opened)
            keeper.opened(self.upstream.address)
        return open_connection(self.loop, self.upstream, self.db, self.protocol, self.timeout, closed,
                               cls=self.cls, role=role, **{**self.extra, **extra})


class SharedPool:
    """Shared connections for one (database, protocol, identity)."""

    __slots__ = ("opener", "connections")

    def __init__(self, opener: Opener, size: int):
        self.opener = opener
        self.connections: list[UpstreamConnection | None] = [None] * size

    @property
    def failed_reason(self) -> str:
        return self.opener.failed_reason

    def get(self, index: int) -> UpstreamConnection | None:
        """The live connection at index, reconnecting if it closed; None while the upstream is
        known to be down (a failed connect less than retry_interval ago): callers answer at once
        instead of queueing behind a connect that will fail."""
        conn = self.connections[index]
        if conn is not None and conn.state is not CLOSED:
            return conn
        if self.opener.down():
            return None
        conn = self.connections[index] = self.opener.open(SHARED, **self._extra(index))
        return conn

    def _extra(self, index: int) -> dict:
        return {}

    def live(self):
        return [conn for conn in self.connections if conn is not None and conn.state is not CLOSED]

    def close(self) -> None:
        for conn in self.connections:
            if conn is not None:
                conn.close()


class SparePool:
    """Idle connections of one (database, protocol, identity), ready to be lent to a client."""

    __slots__ = ("opener", "idle", "target", "max_idle")

    def __init__(self, opener: Opener, target: int = 1, max_idle: int = 8):
        self.opener = opener
        self.idle: list[UpstreamConnection] = []
        self.target = target
        self.max_idle = max_idle

    def take(self, refill: bool = True) -> UpstreamConnection | None:
        """A connection for one client: a warm spare when there is one, else a new connection
        (requests sent to it wait for its start-up); None while the upstream is down. Without
        `refill` the spare it took is replaced at the pool's next use, not now."""
        self._prune()
        if self.idle:
            conn = self.idle.pop()
        elif self.opener.down():
            return None
        else:
            conn = self.opener.open(OWN)
        conn.role = OWN
        if refill:
            self.refill()
        return conn

    def refill(self) -> None:
        self._prune()
        while len(self.idle) < self.target and not self.opener.down():
            self.idle.append(self.opener.open(SPARE))

    def give_back(self, conn: UpstreamConnection) -> None:
        """A lent connection the client no longer needs: idle again, or closed."""
        self._prune()
        if conn.idle and len(self.idle) < self.max_idle:
            conn.role = SPARE
            self.idle.append(conn)
        else:
            conn.close()

    def _prune(self) -> None:
        if any(conn.state is CLOSED for conn in self.idle):
            self.idle = [conn for conn in self.idle if conn.state is not CLOSED]

    def close(self) -> None:
        idle, self.idle = self.idle, []
        for conn in idle:
            conn.close()


class ControlConnection:
    """The proxy's own connection for commands that must reach Redis at once."""

    __slots__ = ("opener", "conn")

    def __init__(self, opener: Opener):
        self.opener = opener
        self.conn = None

    def get(self) -> UpstreamConnection | None:
        conn = self.conn
        if conn is not None and conn.state is not CLOSED:
            return conn
        if self.opener.down():
            return None
        conn = self.conn = self.opener.open(CONTROL)
        return conn

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()


def refills_now(args) -> bool:
    """Whether taking a spare for `args` refills the pool at once: not for MONITOR, whose
    connection would show the new spare's start-up (SELECT...) as its first lines."""
    return not args or args[0].lower() != b"monitor"

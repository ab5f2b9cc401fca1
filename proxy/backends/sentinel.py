"""A master managed by Redis Sentinel: the standalone backend with an address that changes.

Theory of operation: the master is found by asking the sentinels, in turn, `SENTINEL
GET-MASTER-ADDR-BY-NAME` and confirmed with `ROLE` on the address they give (a sentinel may
still name a demoted master). The proxy then works as in front of one server. It follows a
failover two ways: a subscription to `+switch-master` on one sentinel (reconnected to the next
one when it drops), and a check of the sentinels whenever a connection to the master fails. On a
switch every connection to the old master is closed: requests in flight on it may or may not
have run, so their clients' connections close (client libraries reconnect); nothing is retried.
Requests that were never sent (a shared connection that could not connect, or sent while no
master is confirmed) wait, in order, at most `failover_timeout`, and go to the new master.
With `read_from_replicas`, read-only commands go to a replica the sentinels list as healthy.
The sentinel protocol itself (`parse_*`) is read without I/O.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time

import hiredis

from .. import errors
from ..config import Address, Upstream
from ..pending import Pending
from ..tls import upstream_ssl
from ..upstream.connection import CLOSED, SHARED, StartupPending, UpstreamConnection
from ..upstream.pools import Opener, SharedPool
from ..upstream.probe import ask
from .standalone import SharedRoute, StandaloneBackend

log = logging.getLogger("redis_guard.sentinel")

RECHECK_EVERY = 0.25  # seconds between checks of the sentinels while requests wait for a master


# -- the sentinel protocol, sans I/O --------------------------------------------------------------

def parse_master_addr(reply) -> Address | None:
    """SENTINEL GET-MASTER-ADDR-BY-NAME's reply: [ip, port], or nil for an unknown master."""
    if not isinstance(reply, list) or len(reply) != 2:
        return None
    try:
        return Address(reply[0].decode(), int(reply[1]))
    except (ValueError, AttributeError):
        return None


def parse_switch_master(data) -> tuple[str, Address, Address] | None:
    """A `+switch-master` message: '<name> <old ip> <old port> <new ip> <new port>'."""
    try:
        name, old_ip, old_port, new_ip, new_port = data.decode().split()
        return name, Address(old_ip, int(old_port)), Address(new_ip, int(new_port))
    except (ValueError, AttributeError):
        return None


def is_master(role_reply) -> bool:
    return isinstance(role_reply, list) and bool(role_reply) and role_reply[0] == b"master"


def parse_replicas(reply) -> list[Address]:
    """SENTINEL REPLICAS: the healthy replicas' addresses (not down, not disconnected)."""
    found = []
    if not isinstance(reply, list):
        return found
    for entry in reply:
        if isinstance(entry, dict):
            fields = {k: v for k, v in entry.items()}
        elif isinstance(entry, list):
            fields = dict(zip(entry[::2], entry[1::2]))
        else:
            continue
        flags = fields.get(b"flags", b"")
        if any(flag in flags for flag in (b"s_down", b"o_down", b"disconnected")):
            continue
        try:
            found.append(Address(fields[b"ip"].decode(), int(fields[b"port"])))
        except (KeyError, ValueError):
            continue
    return found


def _sentinel_upstream(config, address: Address) -> Upstream:
    return Upstream(address, config.sentinel_username, config.sentinel_password, 0)


async def find_master(config, timeout: float = 1.0) -> Address:
    """Ask the sentinels in turn; the first address confirmed by ROLE. Raises ConnectionError."""
    reasons = []
    for sentinel in config.sentinels:
        try:
            (reply,) = await ask(_sentinel_upstream(config, sentinel),
                                 [("SENTINEL", "GET-MASTER-ADDR-BY-NAME", config.master)], timeout)
        except (TimeoutError, OSError, ConnectionError, PermissionError) as exc:
            reasons.append(f"{sentinel}: {exc}")
            continue
        address = parse_master_addr(reply)
        if address is None:
            reasons.append(f"{sentinel}: does not know master '{config.master}' ({reply!r})")
            continue
        try:
            (role,) = await ask(Upstream(address, config.username, config.password, 0), [("ROLE",)], timeout)
        except (TimeoutError, OSError, ConnectionError, PermissionError) as exc:
            reasons.append(f"{sentinel} names {address}, which does not answer ({exc})")
            continue
        if is_master(role):
            return address
        reasons.append(f"{sentinel} names {address}, which is not a master yet")
    raise ConnectionError(f"no master '{config.master}' confirmed: {'; '.join(reasons)}")


async def find_replicas(config, timeout: float = 1.0) -> list[Address]:
    for sentinel in config.sentinels:
        try:
            (reply,) = await ask(_sentinel_upstream(config, sentinel), [("SENTINEL", "REPLICAS", config.master)],
                                 timeout)
        except (TimeoutError, OSError, ConnectionError, PermissionError):
            continue
        return parse_replicas(reply)
    return []


# -- connections and routes -----------------------------------------------------------------

class SentinelConnection(UpstreamConnection):
    """A shared connection to the master: when it could not connect, nothing it holds was sent,
    so its requests wait for a master instead of failing."""

    __slots__ = ("backend",)

    def __init__(self, loop, address, startup, on_close=None, backend=None):
        super().__init__(loop, address, startup, on_close)
        self.backend = backend

    def fail(self, reason: str, connecting: bool = False, refused: bool = False, reply: bytes | None = None) -> None:
        if self.state is CLOSED:
            return
        if connecting and self.role == SHARED and self.backend is not None:
            entries = [entry for entry in self.pending if not isinstance(entry, StartupPending)]
            data = b"".join(self.out)
            self.pending.clear()
            self.out = []
            super().fail(reason, connecting, refused, reply)
            if entries:
                self.backend.park(self, data, entries)
            return
        super().fail(reason, connecting, refused, reply)


class Parked:
    """Requests never sent, for one shared connection place, waiting for a master."""

    __slots__ = ("blocks", "deadline")

    def __init__(self, deadline: float):
        self.blocks: list[tuple[bytes, list]] = []
        self.deadline = deadline


class ParkingRoute(SharedRoute):
    """A shared route that holds requests while no master is confirmed, in order."""

    __slots__ = ("backend", "key")

    def __init__(self, pool, index: int, backend, key):
        super().__init__(pool, index)
        self.backend = backend
        self.key = key

    def forward(self, session, batch, start: int, stop: int) -> None:
        if not self.backend.parked:
            conn = self.conn
            if (conn is not None and conn.state is not CLOSED) or self.connection() is not None:
                SharedRoute.forward(self, session, batch, start, stop)
                return
        self._park_or_send(session, batch.span(start, stop), stop - start, session)

    def send(self, session, args, data: bytes, count: int, receiver) -> None:
        self._park_or_send(session, data, count, receiver)

    def _park_or_send(self, session, data: bytes, count: int, receiver) -> None:
        backend = self.backend
        if not backend.parked_at(self.key):
            conn = self.connection()
            if conn is not None:
                session.send(conn, data, count, receiver)
                return
            if backend.refusal(self.pool) is not None:
                session.no_connection(self.pool.opener, count)
                return
        pending = Pending(receiver, count, None)
        session.queue.append(pending)
        session.inflight += 1
        backend.park_at(self.key, data, [pending])


class ReplicaReadRoute(ParkingRoute):
    """With `read_from_replicas`: runs of read-only commands go to a replica (spread by client),
    the rest to the master, each run its own entry in the client's reply queue."""

    __slots__ = ()

    def forward(self, session, batch, start: int, stop: int) -> None:
        backend = self.backend
        replica = backend.replica_route(session) if backend.replicas else None
        if replica is None:
            ParkingRoute.forward(self, session, batch, start, stop)
            return
        reads = backend.reads
        commands = batch.commands
        run_start = start
        reading = commands[start][0] in reads
        for index in range(start + 1, stop):
            is_read = commands[index][0] in reads
            if is_read != reading:
                (replica if reading else super()).forward(session, batch, run_start, index)
                run_start, reading = index, is_read
        (replica if reading else super()).forward(session, batch, run_start, stop)


class SentinelBackend(StandaloneBackend):
    kind = "server (Sentinel)"

    def __init__(self, loop, config, table, databases: int = 16):
        super().__init__(loop, config, table, databases)
        self.sentinel = config.upstream_sentinel
        self.label = f"sentinel master '{self.sentinel.master}'"
        self.failover_timeout = config.failover_timeout
        self.parked: dict[tuple, Parked] = {}
        self.checking = None  # the task that asks the sentinels
        self.watcher = None  # the +switch-master subscription
        self.replicas: list[Address] = []
        self.replica_routes: dict[tuple, SharedRoute] = {}
        self.reads = {name for spec in table if "readonly" in spec.flags and "write" not in spec.flags
                      for name in (spec.name.encode(), spec.name.upper().encode())}
        self.switches = 0

    def _opener(self, identity, db: int, protocol: int) -> Opener:
        key = (identity, db, protocol)
        opener = self.openers.get(key)
        if opener is None:
            opener = self.openers[key] = Opener(self.loop, self.upstream_as(identity), db, protocol, self.timeout,
                                                cls=SentinelConnection, backend=self,
                                                on_failure=lambda conn: self.check("connection to the master failed"))
        return opener

    def shared_route(self, session):
        key = self._key(session) + (session.spread,)
        route = self.routes.get(key)
        if route is None:
            cls = ReplicaReadRoute if self.config.read_from_replicas else ParkingRoute
            route = self.routes[key] = cls(self.pool(key[:3]), session.spread, self, key)
        return route

    def replica_route(self, session) -> SharedRoute | None:
        """The shared connection to the replica this client reads from (None: no replica)."""
        if not self.replicas:
            return None
        address = self.replicas[session.spread % len(self.replicas)]
        identity = self.identity(session)
        key = (address, identity, session.db, session.protocol)
        route = self.replica_routes.get(key)
        if route is None:
            opener = Opener(self.loop, Upstream(address, identity[0], identity[1], self.default_db), session.db,
                            session.protocol, self.timeout)
            route = self.replica_routes[key] = SharedRoute(SharedPool(opener, 1), 0)
        return route

    async def start(self) -> None:
        await super().start()
        self.watcher = self.loop.create_task(self._watch())
        if self.config.read_from_replicas:
            await self._refresh_replicas()

    def close(self) -> None:
        for task in (self.watcher, self.checking):
            if task is not None:
                task.cancel()
        super().close()
        for route in self.replica_routes.values():
            route.pool.close()
        for parked in self.parked.values():
            for _data, entries in parked.blocks:
                for entry in entries:
                    entry.fail(errors.shutting_down(), False)
        self.parked.clear()

    # -- parking ----------------------------------------------------------------------------

    def refusal(self, pool: SharedPool):
        return pool.opener.refusal

    def parked_at(self, key) -> bool:
        return key in self.parked

    def park_at(self, key, data: bytes, entries: list) -> None:
        parked = self.parked.get(key)
        if parked is None:
            parked = self.parked[key] = Parked(time.monotonic() + self.failover_timeout)
        parked.blocks.append((data, entries))
        self.check("requests wait for a master")

    def park(self, conn, data: bytes, entries: list) -> None:
        """A shared connection that never connected: its requests wait, at its place."""
        for key, route in self.routes.items():
            if route.conn is conn:
                for entry in entries:
                    entry.conn = None
                self.park_at(key, data, entries)
                return
        for entry in entries:  # not a route's connection: nothing waits for it
            entry.fail(errors.upstream_unavailable(self.label, conn.close_reason), False)

    def _flush_parked(self) -> None:
        parked, self.parked = self.parked, {}
        for key, waiting in parked.items():
            route = self.routes.get(key)
            conn = route.connection() if route is not None else None
            if conn is None:
                self.parked[key] = waiting
                continue
            for data, entries in waiting.blocks:
                for entry in entries:
                    entry.conn = conn
                conn.send_all(data, entries)

    def _expire_parked(self) -> None:
        now = time.monotonic()
        for key, waiting in list(self.parked.items()):
            if now < waiting.deadline:
                continue
            del self.parked[key]
            error = errors.upstream_unavailable(self.label, f"no master confirmed after {self.failover_timeout:g}s")
            for _data, entries in waiting.blocks:
                for entry in entries:
                    entry.fail(error, False)

    # -- following the master ---------------------------------------------------------------

    def check(self, reason: str) -> None:
        """Ask the sentinels where the master is (once at a time)."""
        if self.checking is None or self.checking.done():
            self.checking = self.loop.create_task(self._check(reason))

    async def _check(self, reason: str) -> None:
        log.info("asking the sentinels for master '%s' (%s)", self.sentinel.master, reason)
        while True:
            try:
                address = await find_master(self.sentinel)
            except ConnectionError as exc:
                log.debug("%s", exc)
                address = None
            if address is not None:
                if address != self.address:
                    self.switch(address)
                else:
                    self._reopen()
                self._flush_parked()
            self._expire_parked()
            if not self.parked:
                return
            await asyncio.sleep(RECHECK_EVERY)

    def _reopen(self) -> None:
        """The master is confirmed where it was: forget the failures to connect to it."""
        for opener in self.openers.values():
            opener.failed_at = -1e9
            opener.refusal = None

    def switch(self, address: Address) -> None:
        """A new master: every connection to the old one closes; new ones go to `address`."""
        old = self.address
        log.warning("master '%s' is now %s (was %s)", self.sentinel.master, address, old)
        self.switches += 1
        self.address = address
        for opener in self.openers.values():
            opener.upstream = dataclasses.replace(opener.upstream, address=address)
            opener.failed_at = -1e9
            opener.refusal = None
        for pool in self.pools.values():
            pool.close()
        for spares in self.spares.values():
            spares.close()
        self.control.close()
        for route in self.routes.values():
            route.conn = None
        for spares in self.spares.values():
            spares.refill()
        if self.config.read_from_replicas:
            self.loop.create_task(self._refresh_replicas())

    async def _refresh_replicas(self) -> None:
        replicas = await find_replicas(self.sentinel)
        for key, route in list(self.replica_routes.items()):
            if key[0] not in replicas:
                route.pool.close()
                del self.replica_routes[key]
        self.replicas = [address for address in replicas if address != self.address]

    async def _watch(self) -> None:
        """+switch-master from one sentinel at a time; the next one when it drops."""
        index = 0
        sentinels = self.sentinel.sentinels
        while True:
            sentinel = sentinels[index % len(sentinels)]
            index += 1
            try:
                await self._subscribe(sentinel)
            except asyncio.CancelledError:
                raise
            except (OSError, ConnectionError, asyncio.IncompleteReadError) as exc:
                log.debug("sentinel %s: %s", sentinel, exc)
            await asyncio.sleep(0.5)

    async def _subscribe(self, sentinel: Address) -> None:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(sentinel.host, sentinel.port,
                                                                        **upstream_ssl(sentinel)),
                                                self.timeout)
        try:
            commands = []
            if self.sentinel.sentinel_password is not None:
                user = [self.sentinel.sentinel_username] if self.sentinel.sentinel_username else []
                commands.append(("AUTH", *user, self.sentinel.sentinel_password))
            commands.append(("SUBSCRIBE", "+switch-master"))
            writer.write(b"".join(hiredis.pack_command(cmd) for cmd in commands))
            parser = hiredis.Reader()
            while True:
                data = await reader.read(65536)
                if not data:
                    raise ConnectionError("sentinel closed the connection")
                parser.feed(data)
                while (message := parser.gets()) is not False:
                    if isinstance(message, list) and len(message) == 3 and message[0] == b"message":
                        switched = parse_switch_master(message[2])
                        if switched is not None and switched[0] == self.sentinel.master:
                            self.check(f"+switch-master to {switched[2]}")
        finally:
            writer.close()

    def log_state(self) -> None:
        log.info("sentinel master '%s' at %s; %d switch(es); %d place(s) with requests waiting",
                 self.sentinel.master, self.address, self.switches, len(self.parked))
        super().log_state()

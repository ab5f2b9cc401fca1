"""The cluster router: who owns each slot, the shared connections to every master, and what
happens when the answer changes under a request.

It owns the `SlotMap` (from `CLUSTER SHARDS`, or `CLUSTER SLOTS` on servers without it, asked
of any node it knows, seeds last), one `NodePool` of shared, write-batched connections per
(master, protocol), and the requests in flight between owners:

* `-MOVED slot node`: the map learns the new owner at once (`SlotMap.with_moved`), the command is
  sent there, and a full refresh is scheduled.
* `-ASK slot node`: `ASKING` then the command, on the importing node; the map does not change.
* `-TRYAGAIN` (a multi-key command during a slot's migration): sent again after a back-off.
* `-NOSCRIPT` to EVALSHA, "Function not found" to FCALL, from a node that lacks a script or
  function library loaded through the proxy (`scripts.Known`): loaded there, then the command is
  sent again on the same connection (`reload`).
* `-CLUSTERDOWN` (the cluster refuses everything while a slot has no master, during a
  failover; nothing ran): sent again with a growing pause, at most `failover_timeout`.
* A node that cannot be reached: requests that were never sent wait ("park") until a refresh
  names a new owner (a replica promoted by the failover), at most `failover_timeout`; requests
  that were in flight when a connection broke get an error, as from a standalone server.

Refreshes are rate-limited (`min_refresh_interval`) and run on MOVED, on connection failures and,
while requests are parked, until they can go. A command is redirected at most `max_redirects`
times; then the client gets the last error.
"""

from __future__ import annotations

import asyncio
import logging
import time

import hiredis

from ... import errors
from ...config import Upstream
from ...pending import hidden
from ...tls import upstream_context
from ...upstream.probe import ask
from .connection import NodePool, RoutedPending
from .redirected import command_of, unredirected
from .routing.redirect import ClusterError, classify_error, parse_redirect
from .routing.slotmap import SlotMap, TopologyError
from .routing.slots import SLOT_COUNT
from .scripts import Known

log = logging.getLogger("redis_guard.cluster")

ASKING = hiredis.pack_command(("ASKING",))


class SlotConnections:
    """Per hash slot, the shared connection `ClusterRouter.connection` last gave for it: one
    byte per slot (`owner`), the connection's number in `conns` (0: None, not asked yet or none
    then). The routes read it for every key: 16 KiB stays in the CPU's cache where a list of
    16,384 references (128 KiB) did not (a cache miss per key, a large share of the route's own
    time under perf). Forgotten whenever the slot map changes, in place: routes hold both objects."""

    __slots__ = ("owner", "conns")

    def __init__(self):
        self.owner = bytearray(SLOT_COUNT)
        self.conns = [None]

    def remember(self, slot: int, conn) -> None:
        conns = self.conns
        for number in range(len(conns)):
            if conns[number] is conn:
                break
        else:
            if len(conns) == 256:  # (connections replaced over time) start again
                self.forget()
            number = len(conns)
            conns.append(conn)
        self.owner[slot] = number

    def forget(self) -> None:
        self.owner[:] = bytes(SLOT_COUNT)
        del self.conns[1:]


class ClusterRouter:
    max_redirects = 5
    tryagain_delay = 0.02  # doubled on every TRYAGAIN of the same command

    def __init__(self, loop, seeds, credentials: Upstream | None, shared_connections: int,
                 connect_timeout: float, failover_timeout: float = 10.0, min_refresh_interval: float = 0.2,
                 read_from_replicas: bool = False, leader: ClusterRouter | None = None):
        self.loop = loop
        self.seeds = list(seeds)
        self.username = credentials.username if credentials else None
        self.password = credentials.password if credentials else None
        self.size = shared_connections
        self.connect_timeout = connect_timeout
        self.failover_timeout = failover_timeout
        self.min_refresh_interval = min_refresh_interval
        self.read_from_replicas = read_from_replicas
        self.slotmap = SlotMap.empty()
        self.by_slot: dict[tuple, SlotConnections] = {}  # (protocol, index) -> per hash slot, its connection
        self.pools: dict[tuple, NodePool] = {}
        self.parked: list[tuple[float, RoutedPending, int, int]] = []
        self.refresh_task = None
        self.refresh_wanted = False
        self.last_refresh = -1e9
        self.refreshes = 0
        self._master_slots = (None, [])
        self.listeners = []  # called once the map changed (cluster/sides.py: a monitor's masters)
        # A router for another upstream user (an application's ACL user) follows a leader: one
        # topology, one refresh loop; connections and parked requests of its own.
        self.leader = leader
        self.followers: list[ClusterRouter] = []
        self.known = Known()  # scripts and function libraries loaded through the proxy (`reload`)
        if leader is not None:
            leader.followers.append(self)
            self.slotmap = leader.slotmap
            self.known = leader.known

    # -- topology ----------------------------------------------------------------------------

    def upstream_for(self, node) -> Upstream:
        return Upstream(node, self.username, self.password, 0)

    async def start(self) -> None:
        """The first map; raises ConnectionError when no seed answers with a usable one."""
        if self.leader is not None:
            return
        if not await self.refresh_once():
            seeds = ", ".join(map(str, self.seeds))
            raise ConnectionError(f"no cluster node answered CLUSTER SHARDS/SLOTS among {seeds}")

    def _candidates(self):
        known = list(self.slotmap.masters())
        for node in self.slotmap.nodes:
            known.append(node.address)
        known += self.seeds
        return list(dict.fromkeys(known))

    async def refresh_once(self) -> bool:
        self.last_refresh = time.monotonic()
        for node in self._candidates():
            try:
                new = await self._ask_topology(node)
            except (TimeoutError, OSError, ConnectionError, PermissionError, TopologyError) as exc:
                log.debug("cluster node %s: no topology (%s)", node, exc)
                continue
            if new.covered_slots == 0:
                continue
            self.refreshes += 1
            if new != self.slotmap:
                if self.slotmap.covered_slots:
                    log.info("cluster topology changed: %s", new.describe())
                self._use(new)
            self._redispatch_all()
            return True
        self._redispatch_all()
        return False

    async def _ask_topology(self, node) -> SlotMap:
        upstream = self.upstream_for(node)
        (reply,) = await ask(upstream, [("CLUSTER", "SHARDS")], timeout=1.0)
        if isinstance(reply, hiredis.ReplyError):
            (reply,) = await ask(upstream, [("CLUSTER", "SLOTS")], timeout=1.0)
            if isinstance(reply, hiredis.ReplyError):
                raise TopologyError(str(reply))
            return SlotMap.from_cluster_slots(reply, node)
        # TLS: each node's tls-port (CLUSTER SLOTS gives it to a TLS connection by itself)
        return SlotMap.from_cluster_shards(reply, node, tls=upstream_context(node) is not None)

    def _use(self, slotmap: SlotMap) -> None:
        if self.leader is not None:
            self.leader._use(slotmap)
            return
        for router in (self, *self.followers):
            router.slotmap = slotmap
            for conns in router.by_slot.values():
                conns.forget()
        for listener in list(self.listeners):
            listener()

    def _redispatch_all(self) -> None:
        for router in (self, *self.followers):
            router._redispatch()

    def request_refresh(self) -> None:
        """Look at the topology again soon (at most every min_refresh_interval)."""
        if self.leader is not None:
            self.leader.request_refresh()
            return
        self.refresh_wanted = True
        if self.refresh_task is None:
            self.refresh_task = self.loop.create_task(self._refresh_loop())

    async def _refresh_loop(self) -> None:
        try:
            while self.refresh_wanted or any(router.parked for router in (self, *self.followers)):
                wait = self.last_refresh + self.min_refresh_interval - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                self.refresh_wanted = False
                await self.refresh_once()
                for router in (self, *self.followers):
                    router._expire_parked()
        except Exception:  # the loop must come back on the next request
            log.exception("cluster topology refresh failed")
        finally:
            self.refresh_task = None

    def node_failed(self, node, reason: str) -> None:
        log.info("cluster node %s: %s; refreshing the topology", node, reason)
        self.request_refresh()

    def master_slots(self) -> list[tuple]:
        """(master, one slot it owns) for every master: fan-outs go by slot, so a part for a
        master that just died waits for its successor like any other request."""
        slotmap = self.slotmap
        if self._master_slots[0] is not slotmap:
            first = {}
            for slot_range in slotmap.ranges():
                first.setdefault(slot_range.master, slot_range.start)
            self._master_slots = (slotmap, [(node, first[node]) for node in slotmap.masters()])
        return self._master_slots[1]

    # -- connections -------------------------------------------------------------------------

    def pool(self, node, protocol: int, readonly: bool = False) -> NodePool:
        key = (node, protocol, readonly)
        pool = self.pools.get(key)
        if pool is None:
            pool = self.pools[key] = NodePool(self.loop, self.upstream_for(node), protocol, self.size,
                                              self.connect_timeout, self, readonly)
        return pool

    def slot_connections(self, protocol: int, index: int) -> SlotConnections:
        """Per hash slot, the shared connection `connection` last gave for it, or None (not
        asked yet, or none then): the hot path's lookup is a byte, a list index and a state
        check. Forgotten whenever the slot map changes."""
        conns = self.by_slot.get((protocol, index))
        if conns is None:
            conns = self.by_slot[(protocol, index)] = SlotConnections()
        return conns

    def replica_connection(self, hash_slot: int, protocol: int, index: int):
        """For a read-only command with `read_from_replicas`: a shared connection to one of the
        slot's replicas (spread by client), else to its master."""
        replicas = self.slotmap.replicas_for_slot(hash_slot)
        if replicas:
            conn = self.pool(replicas[index % len(replicas)], protocol, True).get(index % self.size)
            if conn is not None:
                return conn
        return self.connection(hash_slot, protocol, index)

    def connection(self, hash_slot: int | None, protocol: int, index: int):
        """The shared connection for a slot (None: any master), or None when its owner is
        unknown or down for now."""
        slotmap = self.slotmap
        node = slotmap.master_for_slot(hash_slot) if hash_slot is not None else None
        if node is None:
            masters = slotmap.masters()
            if hash_slot is not None or not masters:
                return None
            node = masters[index % len(masters)]
        return self.pool(node, protocol).get(index % self.size)

    # -- requests between owners -------------------------------------------------------------

    def send(self, entry: RoutedPending, protocol: int, index: int) -> None:
        """Send an entry's commands to the owner of its hash slot now, or park it."""
        conn = self.connection(entry.hash_slot, protocol, index)
        if conn is None:
            self.park(entry, protocol, index)
            return
        self._send_on(conn, entry)

    @staticmethod
    def _send_on(conn, entry: RoutedPending) -> None:
        entry.conn = conn
        data = entry.requests()
        if entry.asking:  # once: ASK names the node for this one command
            entry.asking = False
            conn.send(ASKING, hidden(1))
        conn.send(data, entry)

    def park(self, entry: RoutedPending, protocol: int | None = None, index: int | None = None) -> None:
        conn = entry.conn
        if protocol is None:
            protocol, index = (conn.protocol, conn.index) if conn is not None else (2, 0)
        entry.conn = None
        self.parked.append((time.monotonic() + self.failover_timeout, entry, protocol, index))
        self.request_refresh()

    def _redispatch(self) -> None:
        parked, self.parked = self.parked, []
        for deadline, entry, protocol, index in parked:
            if entry.receiver is None:
                continue
            if self.connection(entry.hash_slot, protocol, index) is None:
                self.parked.append((deadline, entry, protocol, index))
            else:
                self.send(entry, protocol, index)

    def _expire_parked(self) -> None:
        now = time.monotonic()
        keep = []
        for parked in self.parked:
            deadline, entry, _protocol, _index = parked
            if now < deadline:
                keep.append(parked)
                continue
            node = self.slotmap.master_for_slot(entry.hash_slot) if entry.hash_slot is not None else None
            entry.fail(errors.upstream_unavailable(str(node or "cluster"),
                                                   f"no reachable owner for slot {entry.hash_slot} "
                                                   f"after {self.failover_timeout:g}s"), False)
        self.parked = keep

    def redirected(self, conn, entry: RoutedPending, error: bytes) -> None:
        """`conn` answered the next command of `entry` with MOVED/ASK/TRYAGAIN/CLUSTERDOWN."""
        retry = _taken_off(conn, entry)
        kind = classify_error(error)
        if kind is ClusterError.CLUSTERDOWN:
            self._cluster_down(conn, retry, error)
            return
        retry.attempts += 1
        if retry.attempts > self.max_redirects:
            retry.conn = None
            if kind is ClusterError.MOVED or kind is ClusterError.ASK:  # (never a node's address: issue 52)
                error = unredirected(error, command_of(retry.request(0)))
            retry.receiver.deliver(retry, error, 1)
            return
        if kind is ClusterError.TRYAGAIN:
            delay = self.tryagain_delay * (1 << (retry.attempts - 1))
            self.loop.call_later(delay, self.send, retry, conn.protocol, conn.index)
            return
        redirect = parse_redirect(error)
        node = redirect.address(conn.address)
        retry.hash_slot = redirect.slot
        if kind is ClusterError.MOVED:
            self.moved(redirect.slot, node)
        else:
            retry.asking = True
        target = self.pool(node, conn.protocol).get(conn.index % self.size)
        if target is None:
            self.park(retry, conn.protocol, conn.index)
            return
        self._send_on(target, retry)

    def reload(self, conn, entry: RoutedPending, error: bytes) -> bool:
        """`conn` answered the next command of `entry` with NOSCRIPT or "Function not found": when
        the proxy knows what is missing, it is loaded there and the command sent again after it on
        `conn` (the client never sees the error). False: the error is the client's."""
        done = entry.count - entry.remaining
        loads = self.known.loads_for(entry.request(done), error)
        if loads is None or entry.attempts >= self.max_redirects:
            return False
        retry = _taken_off(conn, entry)
        retry.attempts += 1
        log.info("cluster node %s lacked a script or function loaded through the proxy: loaded there",
                 conn.address)
        conn.send(loads, hidden(self.known.load_count(error)))
        self._send_on(conn, retry)
        return True

    def moved(self, slot: int, node) -> None:
        """A node answered -MOVED: `slot` is `node`'s now, and the topology is looked at again."""
        self._use(self.slotmap.with_moved(slot, node))
        self.request_refresh()

    def _cluster_down(self, conn, retry: RoutedPending, error: bytes) -> None:
        """The cluster refuses every command while a slot has no master (a failover under way),
        and ran nothing: the command is sent again, with a growing pause, until the cluster
        answers it or `failover_timeout` has passed (then the client gets the error)."""
        now = time.monotonic()
        if retry.down_since is None:
            retry.down_since = now
        elif now - retry.down_since > self.failover_timeout:
            retry.conn = None
            retry.receiver.deliver(retry, error, 1)
            return
        self.request_refresh()
        delay = min(self.tryagain_delay * (1 << min(retry.down_tries, 5)), 0.5)
        retry.down_tries += 1
        retry.conn = None
        self.loop.call_later(delay, self.send, retry, conn.protocol, conn.index)

    def close(self) -> None:
        for follower in self.followers:
            follower.close()
        for pool in self.pools.values():
            pool.close()
        if self.refresh_task is not None:
            self.refresh_task.cancel()


def _taken_off(conn, entry: RoutedPending) -> RoutedPending:
    """The entry to send again for `entry`'s next command, which `conn` answered with an error the
    router follows: the rest of a run split off, or the entry itself taken off `conn`."""
    if entry.count > 1:
        return entry.owner.split_run(conn, entry)
    conn.pending.popleft()
    conn.restamp(entry, None)
    return entry

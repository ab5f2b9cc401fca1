"""A client session in front of a Redis Cluster: every command goes to its slot's owner.

Theory of operation: the session reads batches as in standalone mode and checks the policy the
same way; what changes is where a command goes. Consecutive commands bound for the same shared
connection (the same master) are sent as one slice of the client's bytes with one `RoutedSlot`,
so a pipeline of keys on one master costs what it costs standalone; a stretch of ordinary
commands for several masters leaves as one request per master, with one `Scatter` in the
client's reply queue that puts the replies back in the client's order. A command's target
comes from a table built from the command table: its one key at argument 1 (most commands), no
key (any master, spread by client), or the `Planner` (key specs; multi-key commands split per
slot and merged, CROSSSLOT otherwise). Whole-keyspace commands (SCAN, DBSIZE, RANDOMKEY, FLUSHALL,
FLUSHDB, KEYS, WAIT) go to every master. Connection state that a client believes a single
server holds is kept here (CLIENT SETNAME/GETNAME/ID, READONLY, ASKING) or on a connection of
the client's own: a transaction on the owner of its first key's slot (later keys of another
slot get CROSSSLOT and abort it), a blocking command on its key's owner, a subscription on any
node (SSUBSCRIBE: the shard's owner). Before a command moves to another kind of connection,
everything the client has in flight finishes, so its commands still run in the order it sent
them.
"""

from __future__ import annotations

import hiredis

from .. import errors
from ..connstate import (PASS, Guard, PIN, SELECT, STREAM, TXN_DISCARD, TXN_EXEC, authenticates, both_cases,
                         strict_int)
from ..login import as_upstream, parse_auth, parse_hello
from ..policy.engine import SessionState
from ..routing.multikey import SPLIT_COMMANDS, Forward, Reject, Split
from ..routing.redirect import CROSSSLOT
from ..routing.slots import hash_slot
from ..server import HELD, ClientSession
from ..slots import UNSEEN, Slot
from ..upstream.connection import CLOSED, HiddenSlot, UpstreamConnection, open_connection
from .connection import RoutedSlot, cut_run
from .keyspace import FANOUT, decode_cursor, merge_min, scan_reply
from .scatter import Scatter

# Actions of the cluster session, beside connstate's PASS/STREAM/SUBCOMMAND/HELLO/TXN_*.
LOCAL = 20  # answered from the session's own state
TXN_PIN = 21  # MULTI/WATCH: a connection of the client's own, on the first key's owner
BLOCK = 22  # a blocking command: a connection of the client's own, on its key's owner
EVERY_MASTER = 23  # sent to every master, replies merged
SCAN = 24

MULTI = hiredis.pack_command(("MULTI",))
CLUSTER_MODE = b"$7\r\ncluster\r\n"
STANDALONE_MODE = b"$10\r\nstandalone\r\n"


def cluster_actions(table, shared_actions: dict) -> dict:
    """The standalone session's action table, changed for a cluster: pinning and SELECT become
    plain routing unless named below (connection state is kept here or on the client's own
    connections); blocking commands and whole-keyspace commands get their own actions."""
    actions = {name: PASS if action in (PIN, SELECT) else action for name, action in shared_actions.items()}
    blocking = {spec.name: BLOCK for spec in table if "blocking" in spec.flags and "|" not in spec.name}
    named = {
        "multi": TXN_PIN, "watch": TXN_PIN, "auth": LOCAL, "reset": LOCAL, "readonly": LOCAL,
        "readwrite": LOCAL, "asking": LOCAL, "hello": LOCAL, "client": LOCAL,
        "wait": EVERY_MASTER, "scan": SCAN, **{name.decode(): EVERY_MASTER for name in FANOUT},
    }
    actions.update(both_cases({**blocking, **named}))
    return actions


class RouteTable:
    """Per command name: where its key is (argument 1, none, or ask the Planner), and whether
    it only reads (a replica may answer it)."""

    FIRST_ARG, NO_KEY, PLANNED = 0, 1, 2

    def __init__(self, table, planner):
        self.planner = planner
        kinds: dict[str, int] = {}
        reads: dict[str, bool] = {}
        for spec in table:
            if "|" in spec.name:
                continue
            if spec.name in SPLIT_COMMANDS or "movablekeys" in spec.flags or spec.subcommands:
                kinds[spec.name] = self.PLANNED
            elif not spec.key_specs:
                kinds[spec.name] = self.NO_KEY
            else:
                kinds[spec.name] = self.FIRST_ARG if spec.key_at_first_argument else self.PLANNED
            if "readonly" in spec.flags and "write" not in spec.flags:
                reads[spec.name] = True
        self.kinds = both_cases(kinds)
        self.reads = set(both_cases(reads))

    def decide(self, args, master_for_slot):
        """A hash slot (int), None (no key: any master), or the Planner's Split/Reject."""
        name = args[0]
        kind = self.kinds.get(name)
        if kind is None:
            kind = self.kinds.get(name.lower(), 1)
        if kind == 0:  # FIRST_ARG (the constants are spelt out: this runs for every command)
            return hash_slot(args[1]) if len(args) > 1 else None
        if kind == 1:  # NO_KEY
            return None
        decision = self.planner.plan(args, master_for_slot)
        if type(decision) is Forward:
            return decision.slot
        return decision


class Gather:
    """One client reply made from the complete replies of several parts (a split command, or
    every master): `merge` turns them, in part order, into the reply."""

    __slots__ = ("session", "slot", "replies", "left", "merge")

    def __init__(self, session, slot: Slot, parts: int, merge):
        self.session = session
        self.slot = slot
        self.replies = [[] for _ in range(parts)]
        self.left = parts
        self.merge = merge

    def part_done(self) -> None:
        self.left -= 1
        if self.left == 0:
            replies = [b"".join(chunks) for chunks in self.replies]
            try:
                reply = self.merge(replies)
            except (ValueError, IndexError) as exc:
                reply = errors.resp_error(f"ERR the proxy could not merge the replies of the cluster nodes: {exc}")
            self.session.deliver(self.slot, reply, 1)


class PartSink:
    """Receives one part's reply for a Gather (stands where a session would)."""

    __slots__ = ("gather", "index", "session")

    def __init__(self, gather: Gather, index: int):
        self.gather = gather
        self.index = index
        self.session = gather.session

    def deliver(self, slot, data: bytes, done: int) -> None:
        self.gather.replies[self.index].append(data)
        if done:
            slot.remaining -= done
            if slot.remaining == 0:
                self.gather.part_done()

    def slot_failed(self, slot, error: bytes, partial: bool) -> None:
        if slot.remaining == 0:
            return
        slot.remaining = 0
        self.gather.replies[self.index] = [error]
        self.gather.part_done()


class TransformSink:
    """Collects one whole reply and hands the session `transform(reply)` instead."""

    __slots__ = ("session", "chunks", "transform")

    def __init__(self, session, transform):
        self.session = session
        self.chunks = []
        self.transform = transform

    def deliver(self, slot, data: bytes, done: int) -> None:
        self.chunks.append(data)
        if done:
            self.session.deliver(slot, self.transform(b"".join(self.chunks)), done)

    def slot_failed(self, slot, error: bytes, partial: bool) -> None:
        self.session.slot_failed(slot, error, False)


class CoalescingTransport:
    """The client's transport, with the writes made while one upstream read is handed out sent
    as one (`ReadBatch`): a pipeline's replies come back from several masters, one slot per
    master change, and each slot's reply would otherwise be a system call of its own."""

    __slots__ = ("transport", "batch", "out")

    def __init__(self, transport, batch):
        self.transport = transport
        self.batch = batch
        self.out = None

    def write(self, data: bytes) -> None:
        if self.out is not None:
            self.out.append(data)
        elif self.batch.active:
            self.out = [data]
            self.batch.dirty.append(self)
        else:
            self.transport.write(data)

    def flush(self) -> None:
        out, self.out = self.out, None
        if out and not self.transport.is_closing():
            self.transport.write(out[0] if len(out) == 1 else b"".join(out))

    def close(self) -> None:
        self.flush()
        self.transport.close()

    def __getattr__(self, name):
        return getattr(self.transport, name)


class ClusterSession(ClientSession):
    __slots__ = ("router", "routes", "route_slot", "txn_conn", "txn_slot", "txn_deferred", "own_conns",
                 "client_name", "client_id", "drain_first")

    def __init__(self, proxy):
        self.router = proxy.router
        self.routes = proxy.routes
        super().__init__(proxy)
        self.route_slot = None  # the hash slot of the command being sent by _forward
        self.txn_conn = None  # the client's own connection while a transaction is open
        self.txn_slot = None  # the slot the transaction is pinned to (None until its first key)
        self.txn_deferred = None  # MULTI and keyless commands before the transaction's first key
        self.own_conns = {}  # node -> this client's own connection (transactions, blocking)
        self.client_name = None
        self.client_id = proxy.next_client_id()
        self.drain_first = False  # the next command waits for everything in flight

    def connection_made(self, transport) -> None:
        super().connection_made(CoalescingTransport(transport, self.router.reading))

    def _bind(self) -> None:
        super()._bind()
        if not self.locked and not self.dedicated:
            # With applications, AUTH/HELLO/RESET are the proxy's login (server.ClientSession).
            self._use_actions(self.proxy.cluster_actions[self.proxy.tenants is not None])

    def connection_lost(self, exc) -> None:
        super().connection_lost(exc)
        for conn in self.own_conns.values():
            conn.close()
        self.own_conns.clear()

    # -- requests ---------------------------------------------------------------------------

    def _run(self, batch, index: int) -> None:
        if self.dedicated:  # a subscription (or MONITOR): everything goes to that connection
            return super()._run(batch, index)
        commands = batch.commands
        count = len(commands)
        start = index
        dispatch = self.dispatch
        engine = self.engine
        good_keys = engine.good_keys if engine is not None else None
        key_classes = engine.key_classes if engine is not None else None
        state = self.policy_state
        routes = self.routes
        router = self.router
        replica_reads = router.read_from_replicas
        slot_conns = router.slot_connections(self.protocol, self.pool_index)
        master_for_slot = router.slotmap.master_for_slot  # the map changes on replies, not in here
        run_conn = None
        run_slot = None
        runs = []  # the stretch's earlier runs, for other connections: [(conn, start, stop, hash slot)]
        while index < count:
            args = commands[index]
            name = args[0]
            if self.drain_first:
                if start < index:
                    self._send_stretch(batch, runs, start, index, run_conn, run_slot)
                    runs = []
                    start = index
                    run_conn = None
                if self.inflight:
                    self.held = (batch, index)
                    self._pause_reading("switch")
                    return
                self.drain_first = False
            action = dispatch.get(name)
            if action is None:
                action = dispatch.get(name.lower(), self.unknown)
            if action.__class__ is Guard:
                if not (action.keys_only and len(args) > 1 and (
                        args[1].translate(key_classes) in good_keys or engine.key_ok(args[1]))) and not (
                        action.passed_before(args, state)):
                    verdict = self._decide(action.plan, commands, index)
                    if verdict is not None and (verdict.reject is not None or verdict.commands is not None):
                        if start < index:
                            self._send_stretch(batch, runs, start, index, run_conn, run_slot)
                            runs = []
                        run_conn = None
                        if verdict.reject is None and action.action == SCAN and self.txn_conn is None \
                                and self.txn_deferred is None:  # K7 scoped the SCAN (issue 14)
                            self._scan(verdict.commands[0])
                            start = index = index + 1
                            continue
                        routed = routes.decide(args, router.slotmap.master_for_slot)
                        self.route_slot = routed if type(routed) is int else None
                        if self.txn_deferred is not None and verdict.reject is None:
                            self._pin_deferred(self.route_slot)
                        self.upstream = self.txn_conn
                        start = index = self._apply_verdict(verdict, batch, index, index)
                        continue
                    if verdict is not None:
                        self._apply_verdict(verdict, batch, index, index)  # audit findings only
                action = action.action
            if self.txn_conn is not None or self.txn_deferred is not None:
                if start < index:
                    self._send_stretch(batch, runs, start, index, run_conn, run_slot)
                    runs = []
                run_conn = None
                start = index = self._in_transaction(action, batch, index)
                if start == HELD:
                    return
                continue
            if action == PASS:
                routed = routes.decide(args, master_for_slot)
                if type(routed) is int:
                    if replica_reads and name in routes.reads:
                        conn = router.replica_connection(routed, self.protocol, self.pool_index)
                    else:
                        conn = slot_conns[routed]
                        if conn is None or conn.state is CLOSED:
                            conn = slot_conns[routed] = router.connection(routed, self.protocol, self.pool_index)
                elif routed is None:
                    conn = router.connection(None, self.protocol, self.pool_index)
                else:  # several slots (split and merged) or none possible (CROSSSLOT)
                    if start < index:
                        self._send_stretch(batch, runs, start, index, run_conn, run_slot)
                        runs = []
                    run_conn = None
                    if type(routed) is Reject:
                        self._local(routed.reply)
                    else:
                        self._split(routed)
                    start = index = index + 1
                    continue
                if conn is not None and conn is run_conn:
                    index += 1
                    continue
                if start < index:
                    if conn is not None:  # the stretch goes on, to another connection
                        runs.append((run_conn, start, index, run_slot))
                    else:
                        self._send_stretch(batch, runs, start, index, run_conn, run_slot)
                        runs = []
                start = index
                if conn is None:
                    self._park(batch, index, routed)
                    start = index = index + 1
                    run_conn = None
                    continue
                run_conn, run_slot = conn, routed
                index += 1
                continue
            if start < index:
                self._send_stretch(batch, runs, start, index, run_conn, run_slot)
                runs = []
            run_conn = None
            start = index = self._cluster_special(action, batch, index)
            if start == HELD or self.closing:
                return
            # AUTH, HELLO and RESET may have changed the client's application.
            dispatch = self.dispatch
            engine = self.engine
            good_keys = engine.good_keys if engine is not None else None
            key_classes = engine.key_classes if engine is not None else None
            state = self.policy_state
            slot_conns = router.slot_connections(self.protocol, self.pool_index)  # HELLO may switch
            if self.dedicated:  # subscribed: the rest goes to that connection
                return super()._run(batch, index)
        if start < count:
            self._send_stretch(batch, runs, start, count, run_conn, run_slot)

    def _send_stretch(self, batch, runs: list, start: int, stop: int, conn, hash_slot) -> None:
        """Send a stretch of ordinary commands: the run start..stop for `conn` after `runs`.
        For one connection, one slice of the client's bytes; for several, one request per
        connection and one Scatter that puts the replies back in the client's order."""
        if not runs:
            self._send_run(batch, start, stop, conn, hash_slot)
            return
        runs.append((conn, start, stop, hash_slot))
        scatter, sends = Scatter.of_runs(self, batch, runs)
        self.slots.append(scatter)
        self.inflight += 1
        for conn, runs_there, data in sends:
            conn.send_all(data, runs_there)
            self._wait_if_slow(conn)

    def _send_run(self, batch, start: int, stop: int, conn, hash_slot) -> None:
        slot = RoutedSlot(self, stop - start, conn, batch, start, hash_slot)
        self.slots.append(slot)
        self.inflight += 1
        if conn is None:
            self.router.park(slot, self.protocol, self.pool_index)
            return
        conn.send(batch.raw if start == 0 and stop == len(batch.commands) else batch.span(start, stop), slot)
        self._wait_if_slow(conn)

    def _park(self, batch, index: int, hash_slot) -> None:
        slot = RoutedSlot(self, 1, None, batch, index, hash_slot)
        self.slots.append(slot)
        self.inflight += 1
        self.router.park(slot, self.protocol, self.pool_index)

    def split_run(self, conn, slot: RoutedSlot) -> RoutedSlot:
        """The router is sending the next command of `slot` again elsewhere: cut the run there.
        Returns the slot that now awaits that one command's reply."""
        retry, added = cut_run(conn, slot, self)
        slots = self.slots
        at = next((i for i, queued in enumerate(slots) if queued is slot), None)
        if at is None:  # the client is gone
            return retry
        for offset, queued in enumerate(added):
            slots.insert(at + 1 + offset, queued)
        self.inflight += len(added)
        if retry is not slot:  # slot has its answers
            if at == 0:
                slots.popleft()
                self.inflight -= 1
                self._head_done()
            else:
                self._slot_done()
        return retry

    def _forward(self, data: bytes, count: int, stream: bool = False, replace: bytes | None = None,
                 observe=None) -> None:
        """What the policy sends instead of a command (and EXEC/DISCARD): to the transaction's
        connection, else by `route_slot`."""
        if self.streaming is not None or self.dedicated or self.upstream is not None:
            super()._forward(data, count, stream, replace, observe)
            return
        slot = RoutedSlot(self.receiver(replace, observe), count, None, data, 0, self.route_slot)
        self.slots.append(slot)
        self.inflight += 1
        self.router.send(slot, self.protocol, self.pool_index)

    def _send_hidden(self, commands) -> None:
        if self.upstream is not None:
            super()._send_hidden(commands)
            return
        # Routed like the client's commands, each by its own key: a MOVED or ASK (its slot is
        # migrating) sends it again where the key now is, as it does the command it follows.
        master_for_slot = self.router.slotmap.master_for_slot
        for command in commands:
            args = tuple(command)
            routed = self.routes.decide(args, master_for_slot)
            slot = RoutedSlot(UNSEEN, 1, None, hiredis.pack_command(args), 0,
                              routed if type(routed) is int else self.route_slot)
            self.router.send(slot, self.protocol, self.pool_index)

    def _switch(self, batch, index: int, db=None, protocol=None, dedicated=False) -> int:
        if not dedicated:
            return super()._switch(batch, index, db, protocol, dedicated)
        if self.inflight:
            self.held = (batch, index)
            self._pause_reading("switch")
            return HELD
        # A subscription (or MONITOR): a connection of the client's own, for good. SSUBSCRIBE
        # on its shard channel's owner; the others on any master (the cluster bus carries PUBLISH).
        routed = self.routes.decide(batch.commands[index], self.router.slotmap.master_for_slot)
        node = self.router.slotmap.master_for_slot(routed) if type(routed) is int else None
        if node is None:
            masters = self.router.slotmap.masters()
            node = masters[self.pool_index % len(masters)] if masters else self.proxy.upstream.address
        self.dedicated = True
        self._use_actions(self.proxy.dedicated_actions)
        self.upstream = open_connection(self.loop, self.router.upstream_for(node), 0, self.protocol,
                                        self.proxy.config.connect_timeout, self._dedicated_closed)
        return index

    def _current_upstream(self):
        if self.upstream is not None:
            return self.upstream
        return self.router.connection(None, self.protocol, self.pool_index)

    # -- several parts, one reply -----------------------------------------------------------

    def _gather(self, parts, merge) -> None:
        """parts: [(hash slot, request bytes)]; a master is reached through a slot it owns."""
        slot = Slot(self, 1)
        self.slots.append(slot)
        self.inflight += 1
        gather = Gather(self, slot, len(parts), merge)
        for index, (part_slot, data) in enumerate(parts):
            self.router.send(RoutedSlot(PartSink(gather, index), 1, None, data, 0, part_slot),
                             self.protocol, self.pool_index)

    def _split(self, split: Split) -> None:
        self._gather([(sub.slot, sub.encode()) for sub in split.subcommands], split.merge)

    def _every_master(self, args, merge) -> None:
        masters = self.router.master_slots()
        if not masters:
            self._local(errors.resp_error("CLUSTERDOWN The cluster is down"))
            return
        data = hiredis.pack_command(tuple(args))
        self._gather([(slot, data) for _node, slot in masters], merge)

    def _scan(self, args) -> None:
        masters = self.router.master_slots()
        decoded = decode_cursor(args[1]) if len(args) > 1 else None
        if decoded is None or decoded[0] >= len(masters):
            self._local(errors.resp_error("ERR invalid cursor"))
            return
        position, node_cursor = decoded
        data = hiredis.pack_command((args[0], b"%d" % node_cursor, *args[2:]))
        total = len(masters)
        self._gather([(masters[position][1], data)],
                     lambda replies: scan_reply(replies[0], position, total))

    # -- commands with connection state -----------------------------------------------------

    def _cluster_special(self, action: int, batch, index: int) -> int:
        args = batch.commands[index]
        name = args[0].lower()
        if action == EVERY_MASTER:
            self._every_master(args, merge_min if name == b"wait" else FANOUT[name])
            return index + 1
        if action == SCAN:
            self._scan(args)
            return index + 1
        if action == LOCAL:
            return self._answer_locally(batch, index, name, args)
        if action == TXN_PIN:
            return self._begin_transaction(batch, index, name, args)
        if action == BLOCK:
            return self._blocking(batch, index, args)
        # STREAM (subscriptions, MONITOR): the core pins the client to one connection for good.
        return self._special(action, batch, index, index)

    def _answer_locally(self, batch, index: int, name: bytes, args) -> int:
        if name == b"client":
            sub = args[1].lower() if len(args) > 1 else b""
            if sub == b"setname" and len(args) == 3:
                if any(c <= 32 or c >= 127 for c in args[2]):
                    self._local(errors.resp_error("ERR Client names cannot contain spaces, newlines or special characters."))
                else:
                    self.client_name = args[2] or None
                    self._local(errors.OK)
                return index + 1
            if sub == b"getname" and len(args) == 2:
                name_ = self.client_name
                self._local(b"$%d\r\n%s\r\n" % (len(name_), name_) if name_ else
                            (b"_\r\n" if self.protocol == 3 else b"$-1\r\n"))
                return index + 1
            if sub == b"id" and len(args) == 2:
                self._local(b":%d\r\n" % self.client_id)
                return index + 1
            if sub == b"setinfo" and len(args) == 4:
                self._local(errors.OK)
                return index + 1
            if sub in (b"tracking", b"reply"):
                return self._special(STREAM, batch, index, index)
            self._send_keyless(batch, index)  # CLIENT INFO/LIST/KILL...: a master answers
            return index + 1
        if name in (b"readonly", b"readwrite", b"asking"):
            self._local(errors.OK if len(args) == 1 else errors.resp_error(
                f"ERR wrong number of arguments for '{name.decode()}' command"))
            return index + 1
        if name == b"auth" or (name == b"hello" and authenticates(args)):
            login = parse_auth(args) if name == b"auth" else parse_hello(args)
            if not isinstance(login, bytes):
                router = self.router
                refused = as_upstream(login, name == b"auth" and len(args) == 2, router.username, router.password)
                if refused is None and name == b"hello":
                    return self._hello(batch, index, login.hello)
                login = refused or errors.OK
            self._local(login)
            return index + 1
        if name == b"hello":
            return self._hello(batch, index, args)
        if name == b"reset":
            if self.inflight:
                self.held = (batch, index)
                self._pause_reading("switch")
                return HELD
            self.client_name = None
            self.protocol = 2
            self.policy_state = SessionState()
            self.app = None  # with applications: unauthenticated again
            self._bind()
            self._local(errors.RESET)
            return index + 1
        self._send_keyless(batch, index)
        return index + 1

    def _hello(self, batch, index: int, args) -> int:
        rest = [arg.lower() for arg in args[2:]]
        if b"setname" in rest:
            at = 2 + rest.index(b"setname")
            if at + 1 < len(args):
                self.client_name = args[at + 1]
            args = args[:at] + args[at + 2:]
        version = strict_int(args[1]) if len(args) > 1 else None
        if version in (2, 3) and version != self.protocol:
            if self.inflight:
                self.held = (batch, index)
                self._pause_reading("switch")
                return HELD
            self.protocol = version
            self.policy_state.protocol = version
        slot = RoutedSlot(TransformSink(self, lambda reply: reply.replace(CLUSTER_MODE, STANDALONE_MODE, 1)),
                          1, None, hiredis.pack_command(tuple(args)), 0, None)
        self.slots.append(slot)
        self.inflight += 1
        self.router.send(slot, self.protocol, self.pool_index)
        return index + 1

    def _send_keyless(self, batch, index: int) -> None:
        slot = RoutedSlot(self, 1, None, batch, index, None)
        self.slots.append(slot)
        self.inflight += 1
        self.router.send(slot, self.protocol, self.pool_index)

    def _own_connection(self, node) -> UpstreamConnection:
        conn = self.own_conns.get((node, self.protocol))
        if conn is None or conn.state is CLOSED:
            conn = self.own_conns[(node, self.protocol)] = open_connection(
                self.loop, self.router.upstream_for(node), 0, self.protocol, self.proxy.config.connect_timeout)
        return conn

    def _blocking(self, batch, index: int, args) -> int:
        routed = self.routes.decide(args, self.router.slotmap.master_for_slot)
        if type(routed) is Reject:
            self._local(routed.reply)
            return index + 1
        if type(routed) is Split:
            self._local(CROSSSLOT)
            return index + 1
        node = self.router.slotmap.master_for_slot(routed) if routed is not None else None
        if node is None:
            masters = self.router.slotmap.masters()
            if routed is not None or not masters:
                self._local(errors.resp_error("CLUSTERDOWN Hash slot not served"))
                return index + 1
            node = masters[self.pool_index % len(masters)]
        if self.inflight:  # what the client sent before (an LPUSH its BLPOP waits for) goes first
            self.held = (batch, index)
            self._pause_reading("switch")
            return HELD
        conn = self._own_connection(node)
        self.upstream = conn
        ClientSession._forward(self, batch.span(index, index + 1), 1)
        self.upstream = None
        self.drain_first = True
        return index + 1

    # -- transactions -----------------------------------------------------------------------

    def _first_key_slot(self, commands, index: int):
        """The hash slot of the first command with keys from `index` up to EXEC/DISCARD."""
        master_for_slot = self.router.slotmap.master_for_slot
        for args in commands[index:]:
            name = args[0].lower()
            if name in (b"exec", b"discard"):
                return None
            routed = self.routes.decide(args, master_for_slot)
            if type(routed) is int:
                return routed
        return None

    def _begin_transaction(self, batch, index: int, name: bytes, args) -> int:
        if self.inflight:
            self.held = (batch, index)
            self._pause_reading("switch")
            return HELD
        if name == b"watch":
            routed = self.routes.decide(args, self.router.slotmap.master_for_slot)
            if type(routed) is not int:
                self._local(CROSSSLOT if type(routed) in (Split, Reject) else errors.resp_error(
                    "ERR wrong number of arguments for 'watch' command"))
                return index + 1
            self._pin(routed)
            self.upstream = self.txn_conn
            ClientSession._forward(self, batch.span(index, index + 1), 1)
            return index + 1
        self.policy_state.in_multi = True
        hash_slot = self._first_key_slot(batch.commands, index + 1)
        if hash_slot is None:
            # No key yet: the transaction goes where its first key will send it.
            self.txn_deferred = []
            self._local(errors.OK)
            return index + 1
        self._pin(hash_slot)
        self.upstream = self.txn_conn
        ClientSession._forward(self, batch.span(index, index + 1), 1)
        return index + 1

    def _pin(self, hash_slot) -> None:
        node = self.router.slotmap.master_for_slot(hash_slot) if hash_slot is not None else None
        if node is None:
            masters = self.router.slotmap.masters()
            node = masters[self.pool_index % len(masters)] if masters else self.proxy.upstream.address
        self.txn_conn = self._own_connection(node)
        self.txn_slot = hash_slot

    def _pin_deferred(self, hash_slot) -> None:
        deferred, self.txn_deferred = self.txn_deferred, None
        self._pin(hash_slot)
        self._replay(deferred)

    def _in_transaction(self, action: int, batch, index: int) -> int:
        args = batch.commands[index]
        name = args[0].lower()
        if self.txn_deferred is not None:
            if name in (b"exec", b"discard"):
                if name == b"discard":
                    self.txn_deferred = None
                    self._end_local_transaction()
                    self._local(errors.OK)
                    return index + 1
                self._pin_deferred(None)
                return self._end(action if action in (TXN_EXEC, TXN_DISCARD) else TXN_EXEC, batch, index)
            routed = self.routes.decide(args, self.router.slotmap.master_for_slot)
            if type(routed) is not int:
                if type(routed) in (Split, Reject):
                    self._local(CROSSSLOT)
                    self.txn_dirty = True
                else:
                    self.txn_deferred.append(batch.span(index, index + 1))
                    self._local(b"+QUEUED\r\n")
                return index + 1
            self._pin_deferred(routed)
        if name in (b"exec", b"discard"):
            return self._end(TXN_EXEC if name == b"exec" else TXN_DISCARD, batch, index)
        if self.policy_state.in_multi or name != b"unwatch":
            routed = self.routes.decide(args, self.router.slotmap.master_for_slot)
            if type(routed) in (Split, Reject) or (type(routed) is int and self.txn_slot is not None
                                                  and routed != self.txn_slot):
                self._local(CROSSSLOT)
                if self.policy_state.in_multi:
                    self.txn_dirty = True
                return index + 1
            if type(routed) is int and self.txn_slot is None:
                self.txn_slot = routed
        if name == b"multi" and not self.policy_state.in_multi:
            self.policy_state.in_multi = True
        self.upstream = self.txn_conn
        ClientSession._forward(self, batch.span(index, index + 1), 1)
        if name == b"unwatch" and not self.policy_state.in_multi:
            self._leave_transaction()
        return index + 1

    def _replay(self, deferred) -> None:
        """Send the MULTI and keyless commands already answered with +OK/+QUEUED."""
        self.txn_conn.send(MULTI + b"".join(deferred), HiddenSlot(1 + len(deferred)))

    def _end(self, action: int, batch, index: int) -> int:
        self.upstream = self.txn_conn
        next_index = self._end_transaction(action, batch, index)
        self._leave_transaction()
        return next_index

    def _end_local_transaction(self) -> None:
        self.policy_state.end_transaction()
        self.txn_dirty = False
        self.after_exec = []

    def _leave_transaction(self) -> None:
        self.txn_conn = None
        self.txn_slot = None
        self.upstream = None
        self.drain_first = True

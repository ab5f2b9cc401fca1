"""Where a cluster client's commands go: the routing hook of the dispatch loop, by hash slot.

Theory of operation: `ClusterRoute` is the session's route while it has no connection of its
own. A stretch of ordinary commands is walked once: each command's target comes from a table
built from the command table (`RouteTable`: its one key at argument 1, no key, or the `Planner`
for key specs: multi-key commands split per slot and merged, CROSSSLOT otherwise). Consecutive
commands bound for the same shared connection (the same master) are one slice of the client's
bytes and one `RoutedPending`, so a pipeline of keys on one master costs what it costs
standalone; a stretch for several masters leaves as one request per master with one `Scatter`
in the client's reply queue. The usual pipeline (every key at argument 1, every owner's
connection known and not closed) is dealt out in the pass that finds its keys' slots
(`owners.owner_parts`), without the walk. Split commands and replies merged from several
masters are a `Gather`. A transaction runs on a connection of the client's own to the owner of
its first key (`TxnRoute`: keys of another slot get CROSSSLOT and doom it; `DeferredRoute`
while no key has come yet: MULTI and keyless commands are answered +OK/+QUEUED here and
replayed on the connection once the first key picks it). `ClusterClient` is what the proxy
keeps per cluster client: the connection state a single server would hold (CLIENT
SETNAME/ID) and the entries' place in its reply queue when a redirection cuts a run.
"""

from __future__ import annotations

import hiredis

from ... import compiled, errors
from ...pending import UNSEEN, Pending, Receiver, hidden, queue_append
from ...resp.order import zeroed_order
from ...session.behaviour import both_cases
from ...upstream.connection import CLOSED
from ..base import OwnRoute
from ..route import Route
from .connection import KEYLESS as ROUTED_KEYLESS
from .connection import RoutedPending, cut_run
from .owners import key_owner_of, key_owners, owner_parts
from .redirected import TxnReplies
from .routing.multikey import SPLIT_COMMANDS, Forward, Reject
from .routing.redirect import CROSSSLOT
from .routing.slots import SLOT_COUNT, hash_slot, pattern_slot
from .scatter import scatter_stretch

MULTI = hiredis.pack_command(("MULTI",))
LAST_SLOT = SLOT_COUNT - 1
# The slot of a command without a key (any master answers it): a run's, connection.KEYLESS, taken
# under its own name here, where route.pxd makes it a C number of this module.
KEYLESS = ROUTED_KEYLESS
MAX_PARTS = 256  # connections in one stretch: a part's number is one byte of the stretch's order


class RouteTable:
    """Per command name: where its key is (argument 1, none, or ask the Planner), and whether
    it only reads (a replica may answer it)."""

    FIRST_ARG, NO_KEY, PLANNED, PATTERN = 0, 1, 2, 3

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
        # KEYS has no key, but a pattern whose hash tag names one slot matches only keys of that
        # slot (routing/slots.py): inside a transaction, where it cannot go to every master, it
        # runs on that slot's owner, as a key of that slot would.
        if "keys" in kinds:
            kinds["keys"] = self.PATTERN
        self.kinds = both_cases(kinds)
        self.reads = set(both_cases(reads))
        # The common case, decided by the route without a call: commands whose one key is argument 1.
        self.first_arg = frozenset(name for name, kind in self.kinds.items() if kind == self.FIRST_ARG)

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
        if kind == 3:  # PATTERN
            return pattern_slot(args[1]) if len(args) > 1 else None
        decision = self.planner.plan(args, master_for_slot)
        if type(decision) is Forward:
            return decision.slot
        return decision


class ClusterClient:
    """What the proxy keeps per client of a cluster: the connection state a server would hold
    for it, its transaction's slot and deferred commands, and its runs' places."""

    __slots__ = ("session", "name", "id", "txn_slot", "deferred", "deferred_name", "tainted")

    def __init__(self, session, client_id: int):
        self.session = session
        self.name = None  # CLIENT SETNAME
        self.id = client_id  # CLIENT ID: numbered by the proxy
        self.txn_slot = None  # the hash slot the open transaction is pinned to
        self.deferred = None  # MULTI and keyless commands before the transaction's first key
        self.deferred_name = None  # the name a deferred transaction's connection takes before its replay
        self.tainted = False  # the client's lent connection holds state: closed, not given back

    def split_run(self, conn, entry: RoutedPending) -> RoutedPending:
        """The router is sending the next command of `entry` again elsewhere: cut the run there.
        Returns the entry that now awaits that one command's reply."""
        session = self.session
        retry, added = cut_run(conn, entry)
        queue = session.queue
        at = next((i for i, queued in enumerate(queue) if queued is entry), None)
        if at is None:  # the client is gone
            return retry
        for offset, queued in enumerate(added):
            queue.insert(at + 1 + offset, queued)
        session.inflight += len(added)
        if retry is not entry:  # entry has its answers
            if at == 0:
                queue.popleft()
                session.inflight -= 1
                session.head_answered()
            else:
                session.entry_answered()
        return retry


class Gather:
    """One client reply made from the complete replies of several parts (a split command, or
    every master): `merge` turns them, in part order, into the reply."""

    __slots__ = ("session", "entry", "replies", "left", "merge")

    def __init__(self, session, entry: Pending, parts: int, merge):
        self.session = session
        self.entry = entry
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
            self.entry.receiver.deliver(self.entry, reply, 1)


class PartSink(Receiver):
    """Receives one part's reply for a Gather (stands where a session would). `done` is told
    when the part is complete (a lent connection goes back)."""

    __slots__ = ("gather", "index", "done")

    def __init__(self, gather: Gather, index: int, done=None):
        self.gather = gather
        self.index = index
        self.done = done

    def deliver(self, entry, data: bytes, done: int) -> None:
        self.gather.replies[self.index].append(data)
        if done:
            entry.remaining -= done
            if entry.remaining == 0:
                if self.done is not None:
                    self.done(entry)
                self.gather.part_done()

    def pending_failed(self, entry, error: bytes, partial: bool) -> None:
        if entry.remaining == 0:
            return
        entry.remaining = 0
        self.gather.replies[self.index] = [error]
        self.gather.part_done()


class TransformSink(Receiver):
    """Collects one whole reply and hands the session `transform(reply)` instead."""

    __slots__ = ("session", "chunks", "transform")

    def __init__(self, session, transform):
        self.session = session
        self.chunks = []
        self.transform = transform

    def deliver(self, entry, data: bytes, done: int) -> None:
        self.chunks.append(data)
        if done:
            self.session.deliver(entry, self.transform(b"".join(self.chunks)), done)

    def pending_failed(self, entry, error: bytes, partial: bool) -> None:
        self.session.pending_failed(entry, error, False)


def gather(session, parts, merge) -> None:
    """One reply from `parts` [(hash slot, request bytes)], routed by slot (a master is reached
    through a slot it owns), merged in order."""
    router = session.backend.router_of(session)
    entry = session.reply_later()
    collected = Gather(session, entry, len(parts), merge)
    for index, (part_slot, data) in enumerate(parts):
        router.send(RoutedPending(PartSink(collected, index), 1, None, data, 0, part_slot),
                            session.protocol, session.spread)


def _not_by_slot(session, routed) -> None:
    """A command the route table did not give one slot: split per slot and merged (a `Gather`),
    or rejected (CROSSSLOT) with its reply."""
    if type(routed) is Reject:
        session.answer_locally(routed.reply)
    else:
        gather(session, [(sub.slot, sub.encode()) for sub in routed.subcommands], routed.merge)


def _next_part(conns: list, order, run_from: int, run_to: int, part: int, conn) -> int:
    """A stretch's run (order[run_from:run_to]) for its part `part` ends; the next goes to `conn`:
    its part number, a new one the first time."""
    for at in range(run_from, run_to):
        order[at] = part
    part = 0
    while part < len(conns) and conns[part] is not conn:
        part += 1
    if part == len(conns):
        conns.append(conn)
    return part


class ClusterRoute(Route):
    """Shared connections to every master, by hash slot (one per protocol and spread index)."""

    __slots__ = compiled.declared_fields(__file__, "ClusterRoute")

    def __init__(self, router, routes: RouteTable, protocol: int, index: int):
        self.router = router
        self.replica_reads = router.read_from_replicas  # (set once, with the router)
        self.routes = routes
        self.protocol = protocol
        self.index = index
        self.first_arg = routes.first_arg
        self.slot_table = router.slot_connections(protocol, index)
        self.slot_owner = self.slot_table.owner  # (read per key, as a C byte when compiled)
        self.owner_conns = self.slot_table.conns

    def forward(self, session, batch, start: int, stop: int) -> None:
        """commands[start:stop] by hash slot, the cheapest way that fits: one command alone
        (`_send_one`); the usual pipeline, every key at argument 1 on a live master, dealt out
        by owner in one pass (`_send_by_owner`); anything else walked command by command
        (`_walk`: the route table, split commands, masters not known yet, replica reads)."""
        if not self.replica_reads:
            if stop - start == 1:
                if self._send_one(session, batch, start):
                    return
            elif self._send_by_owner(session, batch, start, stop):
                return
        self._walk(session, batch, start, stop)

    def _send_one(self, session, batch, index: int) -> bool:
        """One command (no pipeline), its one key at argument 1 on a master whose connection is
        live, sent from here (else False, nothing sent)."""
        # its slot and its connection's number, as `_walk` finds them, as one number (slot << 8 | owner)
        found = key_owner_of(batch.commands, index, self.first_arg, self.slot_owner)  # (compiled: a C call)
        conn = self.owner_conns[found & 0xFF]
        if conn is None or conn.state is CLOSED:
            return False
        entry = RoutedPending.of_run(session, 1, conn, batch, index, found >> 8)
        queue_append(session.queue, entry)
        session.inflight += 1
        conn.send(entry.sent, entry)
        if conn.write_paused:
            session.wait_for_upstream(conn)
        return True

    def _walk(self, session, batch, start: int, stop: int) -> None:
        """commands[start:stop] one by one: consecutive commands for one connection are one run,
        a stretch for several connections one Scatter (`_send_stretch`); a command the route
        table splits or rejects ends the stretch (`_not_by_slot`)."""
        commands = batch.commands
        slot_owner = self.slot_owner
        owner_conns = self.owner_conns
        replica_reads = self.replica_reads
        # Per command: its slot, when its one key is argument 1 (else NO_SLOT: the route table
        # decides), and the number of that slot's connection in owner_conns (0: none yet). One
        # C pass when compiled: a name is looked up once for a run of commands that share it.
        owners = key_owners(commands, start, stop, self.first_arg, slot_owner)
        router = self.router
        protocol = self.protocol
        spread = self.index
        run_conn = None
        run_slot = KEYLESS
        # run_conn's number in owner_conns when the run took it by its slot (0: not, or the
        # table changed in this walk): a command with the same owner byte goes on with the run
        # without a look at its arguments.
        run_owner = 0
        remembered = False  # slot_owner changed in this walk: the owner bytes may be stale
        conns = None  # once the stretch has two connections: its parts' connections, numbered as they came
        order = None  # and each command's part number, from the stretch's first command
        part = 0  # run_conn's part number
        first = run_start = index = start
        while index < stop:
            at = 3 * (index - start)
            owner = owners[at + 2]
            if owner == run_owner and owner != 0:
                index += 1  # the run goes on (its connection's state was checked at its start)
                continue
            slot = (owners[at] << 8) | owners[at + 1]  # (compiled: C byte reads, a C integer)
            if slot > LAST_SLOT:  # not argument 1's: the route table decides
                routed = self.routes.decide(commands[index], router.slotmap.master_for_slot)
                if type(routed) is int:
                    slot = routed
                elif routed is None:
                    slot = KEYLESS
                else:  # several slots (split and merged) or none possible (CROSSSLOT)
                    if first < index:
                        self._send_stretch(session, batch, first, index, conns, order, run_start, part, run_conn,
                                           run_slot)
                        conns = order = None
                    run_conn = None
                    run_owner = 0
                    _not_by_slot(session, routed)
                    index += 1
                    first = run_start = index
                    continue
            owner = 0
            if slot == KEYLESS:
                conn = router.connection(None, protocol, spread)
            elif replica_reads and commands[index][0] in self.routes.reads:
                conn = router.replica_connection(slot, protocol, spread)
            else:
                owner = slot_owner[slot]
                conn = owner_conns[owner]
                if conn is run_conn and conn is not None:
                    index += 1  # the run goes on (its connection's state was checked at its start)
                    continue
                if conn is None or conn.state is CLOSED:
                    conn = router.connection(slot, protocol, spread)
                    self.slot_table.remember(slot, conn)
                    remembered = True
            if conn is not None and conn is run_conn:
                index += 1
                continue
            if first < index:  # run_conn's run ends here
                if conn is None or (conns is not None and len(conns) == MAX_PARTS and conn not in conns):
                    self._send_stretch(session, batch, first, index, conns, order, run_start, part, run_conn, run_slot)
                    conns = order = None
                    first = index
                elif conns is None:  # the stretch goes on, to a second connection
                    conns = [run_conn, conn]
                    order = zeroed_order(stop - first)  # (zeros: the commands so far are part 0's)
                    part = 1
                else:  # to another connection: its part, a new one the first time
                    part = _next_part(conns, order, run_start - first, index - first, part, conn)
            run_start = index
            if conn is None:  # the owner is unknown or down for now: wait for the failover
                self._send_run(session, batch, index, index + 1, None, slot)
                index += 1
                first = run_start = index
                run_conn = None
                run_owner = 0
                continue
            run_conn, run_slot = conn, slot
            run_owner = 0 if remembered or replica_reads else owner
            index += 1
        if first < stop:
            self._send_stretch(session, batch, first, stop, conns, order, run_start, part, run_conn, run_slot)

    def _send_by_owner(self, session, batch, start: int, stop: int) -> bool:
        """commands[start:stop] sent as `forward`'s walk would send them, when every one has its
        key at argument 1 and its slot an owner whose connection is not closed (else False,
        nothing sent): one run for one owner, else one request per owner and a Scatter."""
        found = owner_parts(batch.commands, start, stop, self.first_arg, self.slot_owner)
        if found is None:
            return False
        order, owners, counts = found
        if len(owners) > MAX_PARTS:  # (owner numbers are bytes: never, unless the pure route is told less)
            return False
        owner_conns = self.owner_conns
        conns = []
        for owner in owners:
            conn = owner_conns[owner]
            if conn is None or conn.state is CLOSED:
                return False
            conns.append(conn)
        if len(conns) == 1:
            slot = key_owner_of(batch.commands, start, self.first_arg, self.slot_owner) >> 8
            self._send_run(session, batch, start, stop, conns[0], slot)
        else:
            scatter_stretch(session, batch, start, order, conns, counts)
        return True

    def _send_stretch(self, session, batch, first: int, stop: int, conns, order, run_start: int, part: int,
                      conn, hash_slot: int) -> None:
        """The stretch first..stop, whose last run (from run_start) is for `conn`: for one
        connection (no `conns`), one slice of the client's bytes; for several, one request per
        connection and one Scatter (`order`: each command's part, but the last run's)."""
        if conns is None:
            self._send_run(session, batch, first, stop, conn, hash_slot)
            return
        for at in range(run_start - first, stop - first):
            order[at] = part
        if stop - first < len(order):  # (the stretch was cut short: a command that goes no master's way)
            del order[stop - first:]
        scatter_stretch(session, batch, first, order, conns)

    def _send_run(self, session, batch, start: int, stop: int, conn, hash_slot: int) -> None:
        """A run of commands for `conn` (None: its owner is not known yet), all of `hash_slot`
        (KEYLESS: none)."""
        entry = RoutedPending.of_run(session, stop - start, conn, batch, start, hash_slot)
        queue_append(session.queue, entry)
        session.inflight += 1
        if conn is None:
            self.router.park(entry, self.protocol, self.index)
            return
        conn.send(entry.sent, entry)
        if conn.write_paused:
            session.wait_for_upstream(conn)

    def send(self, session, args, data: bytes, count: int, receiver) -> None:
        """What the policy sends instead of a command: to the owner of the command's slot."""
        routed = self.routes.decide(args, self.router.slotmap.master_for_slot)
        entry = RoutedPending(receiver, count, None, data, 0, routed if type(routed) is int else None,
                              session.extra)
        session.queue.append(entry)
        session.inflight += 1
        self.router.send(entry, self.protocol, self.index)

    def hidden(self, session, args, commands) -> None:
        # Routed like the client's commands, each by its own key: a MOVED or ASK (its slot is
        # migrating) sends it again where the key now is, as it does the command it follows.
        master_for_slot = self.router.slotmap.master_for_slot
        routed_args = self.routes.decide(args, master_for_slot)
        for command in commands:
            command = tuple(command)
            routed = self.routes.decide(command, master_for_slot)
            if type(routed) is not int:
                routed = routed_args if type(routed_args) is int else None
            self.router.send(RoutedPending(UNSEEN, 1, None, hiredis.pack_command(command), 0, routed),
                             self.protocol, self.index)


class TxnRoute(OwnRoute):
    """A transaction's connection of the client's own: every key in the transaction's slot (what
    the proxy sends itself goes there as on any connection of the client's own: `OwnRoute`)."""

    __slots__ = ("routes", "router", "safe")

    def __init__(self, conn, routes: RouteTable, router, safe):
        self.conn = conn
        self.routes = routes
        self.router = router
        self.safe = safe  # name -> True for commands that leave no state on the connection

    def forward(self, session, batch, start: int, stop: int) -> None:
        commands = batch.commands
        client = session.extra
        master_for_slot = self.router.slotmap.master_for_slot
        run_start = start
        for index in range(start, stop):
            args = commands[index]
            routed = self.routes.decide(args, master_for_slot)
            if type(routed) is int and client.txn_slot is None:
                client.txn_slot = routed
            elif routed is not None and (type(routed) is not int or routed != client.txn_slot):
                if run_start < index:
                    self._send(session, batch, run_start, index)
                session.answer_locally(CROSSSLOT)
                session.refused_in_transaction()
                run_start = index + 1
                continue
            if not self.safe.get(args[0].lower(), False):
                client.tainted = True
        if run_start < stop:
            self._send(session, batch, run_start, stop)

    def _send(self, session, batch, start: int, stop: int) -> None:
        # A -MOVED/-ASK of the old owner (the slot migrates, the map did not know yet) becomes a
        # retryable error (redirected.py): the transaction cannot follow it elsewhere.
        session.send(self.conn, batch.span(start, stop), stop - start,
                     TxnReplies(session, self.router, batch.commands[start:stop], session.state.in_transaction))


class DeferredRoute(Route):
    """A transaction whose first key has not come yet: keyless commands are queued here and
    answered +QUEUED; the first key (or EXEC) picks the node (`ClusterBackend.pin_deferred`)."""

    __slots__ = ("backend",)

    def __init__(self, backend):
        self.backend = backend

    def forward(self, session, batch, start: int, stop: int) -> None:
        client = session.extra
        master_for_slot = self.backend.router.slotmap.master_for_slot
        table = self.backend.behaviour.table
        for index in range(start, stop):
            args = batch.commands[index]
            routed = self.backend.routes.decide(args, master_for_slot)
            if routed is None and client.deferred is not None:
                # Redis would answer this one at once: an unknown command or a wrong number of
                # arguments is refused, and fails the transaction, rather than queued. (The
                # server's own table only: a snapshot may lack what the server has.)
                refusal = table.refusal(args) if table.from_server else None
                if refusal is not None:
                    session.answer_locally(refusal)
                    session.refused_in_transaction()
                    continue
                client.deferred.append(batch.span(index, index + 1))
                session.answer_locally(b"+QUEUED\r\n")
                continue
            if type(routed) is not int:
                session.answer_locally(CROSSSLOT)
                session.refused_in_transaction()
                continue
            if client.deferred is not None and not self.backend.pin_deferred(session, routed):
                return
            session.route.forward(session, batch, index, stop)
            return

    def send(self, session, args, data: bytes, count: int, receiver) -> None:
        routed = self.backend.routes.decide(args, self.backend.router.slotmap.master_for_slot)
        if self.backend.pin_deferred(session, routed if type(routed) is int else None):
            session.route.send(session, args, data, count, receiver)

    def hidden(self, session, args, commands) -> None:
        session.after_exec.extend(commands)


def replay(conn, deferred: list) -> None:
    """Send the MULTI and keyless commands already answered with +OK/+QUEUED."""
    conn.send(MULTI + b"".join(deferred), hidden(1 + len(deferred)))

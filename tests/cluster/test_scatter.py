"""The Scatter without a network: a session in front of a cluster over three fake masters'
connections (no sockets), fed reply bytes by hand, so that every order of arrival, every way of
cutting the bytes, MOVED/ASK, failures and parking can be checked byte for byte."""

import asyncio
import collections
import gc
import itertools

import hiredis
import pytest

from proxy.backends.cluster import route as route_module
from proxy.backends.cluster.connection import KEYLESS, ClusterConnection, Part, RoutedPending
from proxy.backends.cluster.routing.slotmap import SlotMap
from proxy.backends.cluster.routing.slots import hash_slot
from proxy.backends.cluster.scatter import FLUSH_BYTES, Scatter
from proxy.commands.table import CommandTable
from proxy.config import Address, Config, Upstream
from proxy.monitor import live
from proxy.pending import HIDDEN
from proxy.resp.reader import Batch
from proxy.server import Proxy
from proxy.session.session import Session
from proxy.upstream.connection import READY
from tests.servers import parse_all
from tests.session.fakes import Transport

pytestmark = pytest.mark.compiled_twin  # run again with the pure modules (tests/conftest.py)

NODES = [Address("127.0.0.1", 7000 + i) for i in range(4)]  # the fourth owns nothing at first
RANGES = [(0, 5460, NODES[0], ()), (5461, 10922, NODES[1], ()), (10923, 16383, NODES[2], ())]


class Rig:
    """A session, its client transport, and one fake connection per node."""

    def __init__(self):
        self.loop = asyncio.new_event_loop()
        seeds = tuple(Upstream(node, None, None, 0) for node in NODES[:3])
        proxy = Proxy(self.loop, Config(upstream=seeds[0], upstream_cluster=seeds), CommandTable.from_snapshot(),
                      databases=1)
        self.router = proxy.backend.router
        self.router.request_refresh = lambda: None  # topology refreshes are not tested here
        self.router._use(SlotMap.from_ranges(RANGES, []))
        self.conns = {}
        for node in NODES:
            conn = ClusterConnection(self.loop, node, [], None, router=self.router, place=(2, 0))
            conn.transport = Transport()
            conn.write = conn.transport.write  # what connection_made binds
            conn.state = READY
            self.router.pool(node, 2).connections[0] = conn
            self.conns[node] = conn
        self.session = Session(proxy)
        self.client = Transport()
        self.session.connection_made(self.client)

    def close(self):
        self.loop.close()

    def send(self, commands) -> None:
        self.session.data_received(b"".join(hiredis.pack_command(tuple(c)) for c in commands))

    def sent(self, node) -> list:
        """The commands the node's connection was given since last asked, parsed."""
        conn = self.conns[node]
        data = conn.transport.taken() + b"".join(conn.out)
        conn.out = []
        return parse_all(data)

    def answer(self, node, data: bytes, step: int | None = None) -> None:
        """The node's replies, in one read or `step` bytes at a time."""
        conn = self.conns[node]
        step = step or len(data) or 1
        for at in range(0, len(data), step):
            conn.data_received(data[at:at + step])


@pytest.fixture
def rig():
    rig = Rig()
    yield rig
    rig.close()


def owner(key: bytes):
    return next(node for lo, hi, node, _ in RANGES if lo <= hash_slot(key) <= hi)


def keys_by_node(count_per_node: int) -> dict:
    found = {node: [] for node in NODES[:3]}
    for n in itertools.count():
        key = b"k:%d" % n
        if len(found[owner(key)]) < count_per_node:
            found[owner(key)].append(key)
        if all(len(keys) == count_per_node for keys in found.values()):
            return found


KEYS = keys_by_node(4)
# A pipeline visiting the three masters in runs of 1-3 commands.
PATTERN = [0, 1, 1, 2, 0, 0, 2, 1, 2, 0, 1, 2]


def pipeline():
    taken = {node: iter(KEYS[node]) for node in NODES[:3]}
    return [next(taken[NODES[i]]) for i in PATTERN]


def bulk(value: bytes) -> bytes:
    return b"$%d\r\n%s\r\n" % (len(value), value)


def replies_for(commands) -> bytes:
    return b"".join(bulk(b"value of " + command[1]) for command in commands)


@pytest.mark.parametrize("order", list(itertools.permutations(range(3))), ids=str)
@pytest.mark.parametrize("step", [None, 1, 7], ids=["whole", "byte", "7-bytes"])
def test_replies_come_back_in_client_order(rig, order, step):
    keys = pipeline()
    rig.send([(b"GET", key) for key in keys])
    assert sum(type(slot) is Scatter for slot in rig.session.queue) == 1 and len(rig.session.queue) == 1
    for i in order:
        node = NODES[i]
        commands = rig.sent(node)
        assert [command[1] for command in commands] == [key for key in keys if owner(key) == node]
        rig.answer(node, replies_for(commands), step)
    assert rig.client.taken() == b"".join(bulk(b"value of " + key) for key in keys)
    assert not rig.session.queue and rig.session.inflight == 0


@pytest.mark.parametrize("slot", [None, 0, 300, 16383])
def test_a_run_keeps_its_slot_as_a_number(slot):
    """`hash_slot` (None: keyless) is kept as a C number, `slot` (KEYLESS for None); a
    redirection sets it anew."""
    entry = RoutedPending(HIDDEN, 1, None, hiredis.pack_command((b"GET", b"k")), 0, slot)
    assert entry.hash_slot == slot and entry.slot == (KEYLESS if slot is None else slot)
    entry.hash_slot = 12182
    assert entry.hash_slot == 12182 and entry.slot == 12182
    entry.hash_slot = None
    assert entry.hash_slot is None and entry.slot == KEYLESS


def test_one_master_is_one_run(rig):
    keys = KEYS[NODES[1]]
    rig.send([(b"GET", key) for key in keys])
    assert [type(slot) for slot in rig.session.queue] == [RoutedPending]
    rig.answer(NODES[1], replies_for(rig.sent(NODES[1])))
    assert rig.client.taken() == b"".join(bulk(b"value of " + key) for key in keys)


@pytest.mark.parametrize("commands", [1, 3], ids=["one command", "pipeline"])
def test_a_new_slot_map_sends_the_next_command_to_the_new_owner(rig, commands):
    key = KEYS[NODES[0]][0]
    rig.send([(b"GET", key)] * commands)
    rig.answer(NODES[0], replies_for(rig.sent(NODES[0])))
    rig.client.taken()
    rig.router._use(SlotMap.from_ranges([(lo, hi, NODES[3] if node == NODES[0] else node, ())
                                          for lo, hi, node, _ in RANGES], []))
    rig.send([(b"GET", key)] * commands)
    assert rig.sent(NODES[0]) == []  # not through the slot's connection remembered from before
    assert rig.sent(NODES[3]) == [[b"GET", key]] * commands


def whole_key_owner(key: bytes):
    """The owner of the key's slot if its hash tag were ignored."""
    return owner(key.replace(b"{", b"(").replace(b"}", b")"))


# Keys whose hash tag's slot has another owner than the whole key's would.
TAGGED = [key for key in (b"{user%d}:profile" % i for i in range(100)) if owner(key) is not whole_key_owner(key)][:4]


@pytest.mark.parametrize("commands", [1, 4], ids=["one command", "pipeline"])
def test_a_hash_tag_routes_by_its_tag(rig, commands):
    keys = TAGGED[:commands]
    rig.send([(b"GET", key) for key in keys])
    received = {node: rig.sent(node) for node in NODES}
    for key in keys:
        assert [b"GET", key] in received[owner(key)]
        assert [b"GET", key] not in received[whole_key_owner(key)]


def test_entries_completed_behind_the_head_leave_in_one_write(rig):
    head, behind = KEYS[NODES[0]][0], KEYS[NODES[1]][:3]
    rig.send([(b"GET", head)])
    for key in behind:  # three more pipelines, for another master: three entries behind the head
        rig.send([(b"GET", key)])
    rig.answer(NODES[1], replies_for(rig.sent(NODES[1])))
    assert rig.client.out == []  # held behind the head
    rig.answer(NODES[0], replies_for(rig.sent(NODES[0])))
    replies = [bulk(b"value of " + key) for key in (head, *behind)]
    assert rig.client.out == [replies[0], b"".join(replies[1:])]  # the head's, then the rest at once
    assert not rig.session.queue and rig.session.held_bytes == 0


def test_replies_wait_for_the_ones_before_them(rig):
    keys = pipeline()
    rig.send([(b"GET", key) for key in keys])
    first = owner(keys[0])
    for node in NODES[:3]:
        if node is not first:
            rig.answer(node, replies_for(rig.sent(node)))
    assert rig.client.taken() == b""  # everything waits for the first reply
    rig.answer(first, replies_for(rig.sent(first)))
    assert rig.client.taken() == b"".join(bulk(b"value of " + key) for key in keys)


def test_a_big_front_reply_streams_before_the_stretch_is_complete(rig):
    keys = pipeline()
    rig.send([(b"GET", key) for key in keys])
    first = owner(keys[0])
    big = b"x" * (3 * FLUSH_BYTES)
    commands = rig.sent(first)
    data = bulk(big) + replies_for(commands[1:])
    rig.answer(first, data[:2 * FLUSH_BYTES])
    assert len(rig.client.taken()) == 2 * FLUSH_BYTES  # passed on, though the reply is not whole
    rig.answer(first, data[2 * FLUSH_BYTES:])
    for node in NODES[:3]:
        if node is not first:
            rig.answer(node, replies_for(rig.sent(node)))
    want = b"".join(bulk(big if i == 0 else b"value of " + key) for i, key in enumerate(keys))
    assert rig.client.taken() == want[2 * FLUSH_BYTES:]


@pytest.mark.parametrize("kind", ["MOVED", "ASK"])
@pytest.mark.parametrize("at", [0, 1, 2], ids=["first", "middle", "last"])
@pytest.mark.parametrize("step", [None, 1, 5], ids=["whole", "byte", "5-bytes"])  # an error cut across reads
def test_a_redirected_command_keeps_its_place(rig, kind, at, step):
    keys = pipeline()
    rig.send([(b"GET", key) for key in keys])
    node = NODES[1]
    commands = rig.sent(node)
    moved = commands[at][1]
    target = NODES[3]
    replies = [bulk(b"value of " + c[1]) for c in commands]
    replies[at] = b"-%s %d %s:%d\r\n" % (kind.encode(), hash_slot(moved), target.host.encode(), target.port)
    rig.answer(node, b"".join(replies), step)
    resent = rig.sent(target)
    assert resent == ([[b"ASKING"]] if kind == "ASK" else []) + [[b"GET", moved]]
    rig.answer(target, (b"+OK\r\n" if kind == "ASK" else b"") + bulk(b"value of " + moved))
    for other in (NODES[0], NODES[2]):
        rig.answer(other, replies_for(rig.sent(other)))
    assert rig.client.taken() == b"".join(bulk(b"value of " + key) for key in keys)


@pytest.mark.parametrize("failing", [0, 1], ids=["front", "later"])
@pytest.mark.parametrize("answered", [0, 1, 2])
def test_a_failed_connection_gives_the_replies_before_it_then_closes_the_client(rig, failing, answered):
    """The failed commands may or may not have run: the client gets every reply before the
    first of them, then its connection closes (client libraries reconnect)."""
    keys = pipeline()
    rig.send([(b"GET", key) for key in keys])
    node = owner(keys[0]) if failing == 0 else owner(keys[1])
    commands = rig.sent(node)
    for other in NODES[:3]:
        if other is not node:
            rig.answer(other, replies_for(rig.sent(other)))
    rig.answer(node, replies_for(commands[:answered]))
    rig.conns[node].fail("connection reset")
    replies = parse_all(rig.client.taken())
    own = [key for key in keys if owner(key) == node]
    first_failed = keys.index(own[answered]) if answered < len(own) else len(keys)
    assert replies == [b"value of " + key for key in keys[:first_failed]]
    assert rig.client.closed and not rig.session.queue


def test_a_reply_cut_by_a_failure_behind_the_front_is_dropped(rig):
    keys = pipeline()
    rig.send([(b"GET", key) for key in keys])
    later = owner(keys[1])
    assert later is not owner(keys[0])
    commands = rig.sent(later)
    rig.answer(later, replies_for(commands[:1]) + b"$100\r\npartial")
    rig.conns[later].fail("connection reset")
    for node in NODES[:3]:
        if node is not later:
            rig.answer(node, replies_for(rig.sent(node)))
    out = hiredis.Reader()
    out.feed(rig.client.taken())
    replies = []
    while (reply := out.gets()) is not False:
        replies.append(reply)
    # Every reply before the failed run's second command, nothing of the cut reply.
    second = keys.index([key for key in keys if owner(key) == later][1])
    assert replies == [b"value of " + key for key in keys[:second]]
    assert rig.client.closed


def test_a_part_that_never_connected_waits_for_the_new_owner(rig):
    keys = pipeline()
    rig.send([(b"GET", key) for key in keys])
    dead = owner(keys[0])
    rig.sent(dead)
    rig.conns[dead].fail("connection refused", connecting=True)
    assert rig.router.parked and all(entry[1].conn is None for entry in rig.router.parked)
    for node in NODES[:3]:
        if node is not dead:
            rig.answer(node, replies_for(rig.sent(node)))
    assert rig.client.taken() == b""  # the first reply is awaited
    promoted = NODES[3]  # the failover: the dead master's replica now owns its slots
    rig.router._use(SlotMap.from_ranges([(lo, hi, promoted if node is dead else node, ())
                                          for lo, hi, node, _ in RANGES], []))
    rig.router._redispatch()
    commands = rig.sent(promoted)
    assert [c[1] for c in commands] == [key for key in keys if owner(key) == dead]
    rig.answer(promoted, replies_for(commands))
    assert rig.client.taken() == b"".join(bulk(b"value of " + key) for key in keys)


def test_a_reply_cut_at_the_front_closes_the_client(rig):
    """Its start may already be on its way to the client: nothing sensible can follow (as when a
    standalone server dies mid-reply)."""
    keys = pipeline()
    rig.send([(b"GET", key) for key in keys])
    first = owner(keys[0])
    rig.sent(first)
    rig.answer(first, b"$%d\r\n" % (2 * FLUSH_BYTES) + b"x" * FLUSH_BYTES)
    assert rig.client.taken().startswith(b"$%d\r\nx" % (2 * FLUSH_BYTES))
    rig.conns[first].fail("connection reset")
    assert rig.client.closed


def test_replies_far_ahead_of_the_front_never_pause_a_shared_connection(rig):
    """Other clients share the connection: replies far ahead of the awaited one are taken off it
    and buffered for this client, counted against its output limit."""
    keys = pipeline()
    rig.send([(b"GET", key) for key in keys])
    first, later = owner(keys[0]), owner(keys[1])
    big = b"y" * (rig.session.buffer_limit + 1)
    later_commands = rig.sent(later)
    rig.answer(later, bulk(big))  # the first of its replies, behind the awaited front
    assert not rig.conns[later].read_paused_by
    assert rig.session.held_bytes >= len(big)
    rig.answer(first, replies_for(rig.sent(first)))
    rig.answer(later, replies_for(later_commands[1:]))
    last = next(node for node in NODES[:3] if node not in (first, later))
    rig.answer(last, replies_for(rig.sent(last)))
    want = b"".join(bulk(big if key == later_commands[0][1] else b"value of " + key) for key in keys)
    assert rig.client.taken() == want
    assert rig.session.held_bytes == 0


def test_replies_past_the_output_limit_disconnect_the_client(rig):
    keys = pipeline()
    rig.send([(b"GET", key) for key in keys])
    later = owner(keys[1])
    rig.session.output_limit = 1000
    rig.answer(later, bulk(b"z" * 2000))
    assert rig.client.closed and not rig.conns[later].read_paused_by


def test_clusterdown_is_sent_again_until_the_cluster_answers(rig):
    """During a failover every node refuses with CLUSTERDOWN and runs nothing: the proxy sends
    the command again after a pause instead of passing the refusal on."""
    key = KEYS[NODES[0]][0]
    rig.send([(b"GET", key)])
    conn = rig.conns[NODES[0]]
    assert rig.sent(NODES[0]) == [[b"GET", key]]
    rig.answer(NODES[0], b"-CLUSTERDOWN The cluster is down\r\n")
    assert rig.client.taken() == b"" and rig.sent(NODES[0]) == []
    rig.loop.run_until_complete(asyncio.sleep(0.1))
    assert rig.sent(NODES[0]) == [[b"GET", key]]
    rig.answer(NODES[0], bulk(b"value"))
    assert rig.client.taken() == bulk(b"value") and conn.pending == type(conn.pending)()


def test_each_master_awaits_its_runs_of_a_stretch_as_one_part(rig):
    keys = pipeline()
    rig.send([(b"GET", key) for key in keys])
    for node in NODES[:3]:
        conn = rig.conns[node]
        assert [type(entry) for entry in conn.pending] == [Part]
        assert conn.pending[0].count == sum(owner(key) == node for key in keys)
    received = 0
    for node in NODES[:2]:
        data = replies_for(rig.sent(node))
        rig.answer(node, data)
        received += len(data)
        assert rig.client.out == [] and rig.session.held_bytes == received  # held, counted
    rig.answer(NODES[2], replies_for(rig.sent(NODES[2])))
    assert rig.client.out == [b"".join(bulk(b"value of " + key) for key in keys)]  # in one write
    assert rig.session.held_bytes == 0 and all(not rig.conns[node].pending for node in NODES[:3])
    assert all(not rig.conns[node].stamps for node in NODES[:3])


@pytest.mark.parametrize("commands", [1, 2, 3], ids=["one command", "one master", "every master"])
def test_each_entry_keeps_the_request_it_was_sent_as(rig, commands):
    """`sent` is what went to the connection (a whole read: its own bytes, not a copy), so that
    the monitor reads the first command's name there as on one server; every command of the
    entry is found there as in the client's batch."""
    keys = [KEYS[NODES[1]][0], KEYS[NODES[1]][1], KEYS[NODES[2]][0]][:commands]
    rig.send([(b"GET", key) for key in keys])
    entries = [conn.pending[0] for conn in rig.conns.values() if conn.pending]
    assert len(entries) == (2 if commands == 3 else 1)
    for entry in entries:
        node_keys = [key for key in keys if owner(key) == entry.conn.address]
        assert parse_all(entry.sent) == [[b"GET", key] for key in node_keys] == rig.sent(entry.conn.address)
        assert [live.full_command(entry, k) for k in range(entry.count)] == [[b"GET", key] for key in node_keys]
    if commands < 3:
        assert entries[0].sent is rig.session.queue[0].sent  # (a run: the client's own entry)
    live.reset()
    try:
        for entry in entries:  # (a read of its replies, its write stamped now)
            live.read_from(entry.conn, b"$1\r\nv\r\n" * entry.count, collections.deque([(live.clock(), entry)]),
                           collections.deque([entry]))
        assert list(live.DURATIONS) == [b"GET"]  # timed under its name, read from `sent`
    finally:
        live.reset()


def test_parts_hold_no_reference_to_the_clients_batch(rig):
    """The client's parsed commands are freed with the read that brought them (while still in
    the processor's cache), not when the stretch's replies are in: only the parts' requests are
    kept."""
    keys = pipeline()
    data = b"".join(hiredis.pack_command((b"GET", key)) for key in keys)
    rig.session.data_received(data)
    assert all(type(rig.conns[node].pending[0]) is Part for node in NODES[:3])
    assert not [batch for batch in gc.get_objects() if type(batch) is Batch and batch.raw == data]


@pytest.mark.parametrize("step", [None, 1], ids=["whole", "byte"])
def test_runs_of_an_exploded_part_are_its_commands_read_again(rig, step):
    """When a part turns into run entries, each run's commands are read again from the part's
    request: the same commands, in the client's order, each run its own bytes to send again."""
    keys = pipeline()  # the first master's commands are 0, then 4 and 5 (a run of two), then 9
    rig.send([(b"GET", key) for key in keys])
    node = NODES[0]
    commands = rig.sent(node)
    conn = rig.conns[node]
    wrong = b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
    rig.answer(node, wrong, step)  # an error reply: the part explodes into its runs
    runs = list(conn.pending)
    assert [type(entry) for entry in runs] == [RoutedPending, RoutedPending]
    assert [entry.count for entry in runs] == [2, 1]
    left = [[b"GET", keys[at]] for at in (4, 5, 9)]
    live.setup(CommandTable.from_snapshot(), (RoutedPending, Part))  # (the monitor's namers: a run's commands, from its source)
    assert [list(live.full_command(entry, k)) for entry in runs for k in range(entry.count)] == left
    assert parse_all(b"".join(entry.requests() for entry in runs)) == left
    assert [parse_all(runs[0].request(k)) for k in range(2)] == [left[:1], left[1:2]]
    rig.answer(node, replies_for(commands[1:]))
    for other in (NODES[1], NODES[2]):
        rig.answer(other, replies_for(rig.sent(other)))
    assert rig.client.taken() == wrong + b"".join(bulk(b"value of " + key) for key in keys[1:])


PEM = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


@pytest.mark.parametrize("step", [None, 1, 7], ids=["whole", "byte", "7-bytes"])
def test_values_with_lines_that_start_with_a_dash_come_back_in_order(rig, step):
    """A '-' after a line feed inside a value is no error reply. Read whole, the stretch stays
    one part a master until every master has answered; cut anywhere, the replies still come
    back whole and in order."""
    keys = pipeline()
    rig.send([(b"GET", key) for key in keys])
    values = {key: bulk(PEM + key) for key in keys}
    for answered, node in enumerate(NODES[:3]):
        rig.answer(node, b"".join(values[command[1]] for command in rig.sent(node)), step)
        if step is None and answered < 2:
            assert [type(entry) for n in NODES[answered + 1:3] for entry in rig.conns[n].pending] == [Part] * (2 - answered)
    assert rig.client.taken() == b"".join(values[key] for key in keys)
    assert rig.session.held_bytes == 0 and all(not rig.conns[node].pending for node in NODES[:3])


@pytest.mark.parametrize("step", [None, 1, 7], ids=["whole", "byte", "7-bytes"])
def test_an_error_reply_after_values_with_dashed_lines_is_found(rig, step):
    keys = pipeline()
    rig.send([(b"GET", key) for key in keys])
    node = NODES[1]
    commands = rig.sent(node)
    wrong = b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
    failing = commands[-1][1]
    rig.answer(node, b"".join(bulk(PEM + c[1]) for c in commands[:-1]) + wrong, step)
    for other in (NODES[0], NODES[2]):
        rig.answer(other, b"".join(bulk(PEM + c[1]) for c in rig.sent(other)))
    assert rig.client.taken() == b"".join(wrong if key == failing else bulk(PEM + key) for key in keys)
    assert rig.session.held_bytes == 0 and all(not rig.conns[n].pending for n in NODES[:3])


@pytest.mark.parametrize("at", [0, 1, 2], ids=["first", "middle", "last"])
@pytest.mark.parametrize("step", [None, 1], ids=["whole", "byte"])
def test_an_error_reply_in_a_part_reaches_the_client_in_its_place(rig, at, step):
    keys = pipeline()
    rig.send([(b"GET", key) for key in keys])
    node = NODES[2]
    commands = rig.sent(node)
    wrong = b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
    replies = [bulk(b"value of " + c[1]) for c in commands]
    failing = commands[at][1]
    replies[at] = wrong
    rig.answer(node, b"".join(replies), step)
    assert all(type(entry) is not Part for n in NODES[:3] for entry in rig.conns[n].pending)
    for other in (NODES[0], NODES[1]):
        rig.answer(other, replies_for(rig.sent(other)))
    want = b"".join(wrong if key == failing else bulk(b"value of " + key) for key in keys)
    assert rig.client.taken() == want
    assert rig.session.held_bytes == 0 and not rig.session.queue
    assert all(not rig.conns[n].pending and not rig.conns[n].stamps for n in NODES[:3])


def test_a_redirection_leaves_no_write_stamp_on_the_part_it_replaced(rig):
    keys = pipeline()
    rig.send([(b"GET", key) for key in keys])
    rig.loop.run_until_complete(asyncio.sleep(0))  # the coalesced writes leave, stamped
    node = NODES[1]
    commands = rig.sent(node)
    conn = rig.conns[node]
    assert [type(last) for _, last in conn.stamps] == [Part]
    target = NODES[3]
    moved = commands[1][1]
    rig.answer(node, bulk(b"value of " + commands[0][1]))  # the part has a reply; the rest come later
    rig.answer(node, b"-MOVED %d %s:%d\r\n" % (hash_slot(moved), target.host.encode(), target.port))
    assert [type(last) for _, last in conn.stamps] == [RoutedPending]
    rig.answer(node, replies_for(commands[2:]))
    rig.answer(target, replies_for(rig.sent(target)))
    for other in (NODES[0], NODES[2]):
        rig.answer(other, replies_for(rig.sent(other)))
    assert rig.client.taken() == b"".join(bulk(b"value of " + key) for key in keys)
    assert not conn.pending and not conn.stamps


def test_a_part_whose_client_is_gone_still_counts_its_replies_when_it_explodes(rig):
    """Replies to a client that left are dropped, not kept; its part must still owe the
    connection only what it has not been given, or it would take another client's reply."""
    keys = pipeline()
    rig.send([(b"GET", key) for key in keys])
    node = NODES[1]
    commands = rig.sent(node)
    rig.session.connection_lost(None)
    rig.answer(node, replies_for(commands[:2]))  # dropped: the client is gone
    other = Session(rig.session.proxy)
    other.connection_made(Transport())
    other.data_received(hiredis.pack_command((b"GET", KEYS[node][0])))
    assert rig.sent(node) == [[b"GET", KEYS[node][0]]]
    wrong = b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
    rig.answer(node, replies_for(commands[2:3]) + wrong + bulk(b"for the other client"))
    assert other.transport.taken() == bulk(b"for the other client")
    assert not rig.conns[node].pending


def test_a_stretch_over_more_connections_than_its_part_numbers_hold_is_cut_in_two(rig, monkeypatch):
    """A part's number is one byte of its stretch's order: a stretch that would reach a 257th
    connection ends where it would, and the next begins there (shown with two parts a stretch,
    which only the pure route can be told)."""
    if not route_module.__file__.endswith(".py"):
        pytest.skip("MAX_PARTS is a C constant in the compiled route")
    monkeypatch.setattr(route_module, "MAX_PARTS", 2)
    keys = pipeline()  # the three masters, in runs
    rig.send([(b"GET", key) for key in keys])
    # PATTERN's masters 0 1 1 | 2 0 0 2 | 1 2 | 0 1 | 2: four stretches of two, then one run
    assert [type(slot) for slot in rig.session.queue] == [Scatter] * 4 + [RoutedPending]
    for node in NODES[:3]:
        commands = rig.sent(node)
        assert [command[1] for command in commands] == [key for key in keys if owner(key) == node]
        rig.answer(node, replies_for(commands))
    assert rig.client.taken() == b"".join(bulk(b"value of " + key) for key in keys)
    assert not rig.session.queue and rig.session.inflight == 0


@pytest.mark.parametrize("pipelined", [False, True], ids=["first", "after-another"])
@pytest.mark.parametrize("case", ["one-closed-connection", "table-starts-again"])
def test_connections_replaced_mid_walk_leave_each_command_to_its_own_master(rig, case, pipelined):
    """The route reads every command's connection number for a whole read at once, then walks
    the read. Once it replaces a closed connection during the walk, the numbers it read may be
    stale: both key_a's and key_b's slots had a connection that closed (their masters changed
    since), or the table, full, started again and key_b's old number is the replacement's new
    one. key_b must still go to its own master, not join key_a's run."""
    from proxy.upstream.connection import CLOSED

    key_a, key_b = KEYS[NODES[1]][0], KEYS[NODES[2]][0]
    table = rig.session.route.slot_table
    table.forget()
    gone = ClusterConnection(rig.loop, NODES[0], [], None, router=rig.router, place=(2, 0))
    gone.state = CLOSED
    if case == "one-closed-connection":
        table.remember(hash_slot(key_a), gone)
        table.remember(hash_slot(key_b), gone)
    else:
        table.remember(hash_slot(key_b), rig.conns[NODES[2]])  # number 1, right for key_b
        unused = (slot for slot in range(16384) if slot not in (hash_slot(key_a), hash_slot(key_b)))
        for _ in range(253):  # numbers 2-254: connections of other slots, since replaced
            table.remember(next(unused), object())
        table.remember(hash_slot(key_a), gone)  # number 255: the list is full
        assert len(table.conns) == 256
    first = [(b"GET", KEYS[NODES[0]][0])] if pipelined else []
    rig.send(first + [(b"GET", key_a), (b"GET", key_b)])
    assert table.conns[table.owner[hash_slot(key_a)]] is rig.conns[NODES[1]]  # asked again
    assert rig.sent(NODES[1]) == [[b"GET", key_a]]
    assert rig.sent(NODES[2]) == [[b"GET", key_b]]

"""SlotMap: built from real CLUSTER SHARDS / CLUSTER SLOTS replies (captured byte for byte in
captured.py, and live from a running cluster), lookups, MOVED updates, equality, describe."""

from __future__ import annotations

import random

import hiredis
import pytest

from proxy.backends.cluster.routing.slotmap import Node, SlotMap, SlotRange, TopologyError
from proxy.backends.cluster.routing.slots import SLOT_COUNT, hash_slot
from proxy.config import Address

from .captured import REPLICA_OF, REPLIES
from .raw_client import Conn, call

LOCAL = "127.0.0.1"
N1, N2, N3, R4, R5, R6 = (Address(LOCAL, p) for p in range(31001, 31007))
assert REPLICA_OF == {31004: 31002, 31005: 31003, 31006: 31001}  # the layout the tables assume


def parsed(name: str):
    reader = hiredis.Reader()
    reader.feed(REPLIES[name])
    value = reader.gets()
    assert value is not False and reader.gets() is False
    return value


def layout(*ranges) -> list[SlotRange]:
    return [SlotRange(s, e, m, tuple(r)) for s, e, m, r in ranges]


def with_host(host_of, ranges: list[SlotRange]) -> list[SlotRange]:
    def move(a: Address) -> Address:
        return Address(host_of(a), a.port)

    return [SlotRange(r.start, r.end, move(r.master), tuple(map(move, r.replicas))) for r in ranges]


BASE = layout((0, 5460, N1, [R6]), (5461, 10922, N2, [R4]), (10923, 16383, N3, [R5]))
RANGES = layout((0, 99, N1, [R6]), (100, 199, N3, [R5]), (200, 5460, N1, [R6]),
                (5461, 6999, N2, [R4]), (7000, 7000, N3, [R5]), (7001, 10922, N2, [R4]),
                (10923, 16383, N3, [R5]))
HOSTNAMES = {31001: "node-31001.example", 31002: "node-31002.example"}
LB = Address("lb.example", 31001)  # where we reached the node, behind a load balancer

# (case, CLUSTER SHARDS capture, CLUSTER SLOTS capture of the same moment or None, source,
# expected ranges, covered slots).
CASES = [
    ("online", "online_shards", "online_slots", None, BASE, SLOT_COUNT),
    ("online-resp3", "online_shards_resp3", "online_slots_resp3", None, BASE, SLOT_COUNT),
    ("loading", "loading_shards", None, None, [SlotRange(r.start, r.end, r.master) for r in BASE], SLOT_COUNT),
    ("ranges", "ranges_shards", "ranges_slots", None, RANGES, SLOT_COUNT),
    # preferred endpoint 'hostname': masters with a hostname by name, '?' (none announced) by ip
    ("hostname", "hostname_shards", "hostname_slots", None,
     with_host(lambda a: HOSTNAMES.get(a.port, LOCAL), RANGES), SLOT_COUNT),
    # preferred endpoint 'unknown-endpoint': every node on the host we reached
    ("unknown-endpoint", "unknown_shards", "unknown_slots", LB, with_host(lambda a: LB.host, RANGES), SLOT_COUNT),
    ("replica-fail", "replica_fail_shards", "replica_fail_slots", None,
     [SlotRange(r.start, r.end, r.master, () if r.master == N3 else r.replicas) for r in RANGES], SLOT_COUNT),
    ("failover", "failover_shards", "failover_slots", None,
     [SlotRange(r.start, r.end, R4 if r.master == N2 else r.master, () if r.master in (N2, N3) else r.replicas)
      for r in RANGES], SLOT_COUNT),
    # 31003 failed with no replica left: its slots have no owner. CLUSTER SLOTS has no health
    # and still lists it (test_cluster_slots_has_no_health).
    ("master-fail", "master_fail_shards", None, None,
     [SlotRange(r.start, r.end, R4 if r.master == N2 else r.master, () if r.master == N2 else r.replicas)
      for r in RANGES if r.master != N3], SLOT_COUNT - 100 - 1 - 5461),
    # a lone node that has not met another one does not know its ip: '' endpoint
    ("lone", "lone_shards", "lone_slots", Address(LOCAL, 31000),
     layout((0, 16383, Address(LOCAL, 31000), [])), SLOT_COUNT),
]


@pytest.mark.parametrize(("shards", "slots", "source", "expected", "covered"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_from_captured_replies(shards, slots, source, expected, covered) -> None:
    slotmap = SlotMap.from_cluster_shards(parsed(shards), source)
    assert slotmap.ranges() == expected
    assert slotmap.covered_slots == covered
    assert slotmap.coverage_complete() == (covered == SLOT_COUNT)
    for r in expected:
        for slot in {r.start, r.end, (r.start + r.end) // 2}:
            assert slotmap.master_for_slot(slot) == r.master
            assert slotmap.replicas_for_slot(slot) == r.replicas
    if slots is not None:
        from_slots = SlotMap.from_cluster_slots(parsed(slots), source)
        assert from_slots.ranges() == expected
        assert from_slots == slotmap


def test_cluster_slots_has_no_health() -> None:
    from_slots = SlotMap.from_cluster_slots(parsed("master_fail_slots"))
    assert from_slots.coverage_complete() and from_slots.master_for_slot(12000) == N3
    assert not SlotMap.from_cluster_shards(parsed("master_fail_shards")).coverage_complete()


@pytest.mark.parametrize("name", ["online_slots", "online_slots_resp3"])
def test_shards_parser_refuses_a_slots_reply(name: str) -> None:
    with pytest.raises(TopologyError):
        SlotMap.from_cluster_shards(parsed(name))


def test_unhealthy_nodes_are_kept_for_logs() -> None:
    slotmap = SlotMap.from_cluster_shards(parsed("failover_shards"))
    by_port = {n.address.port: n for n in slotmap.nodes}
    assert by_port[31002] == Node(N2, "4e23d17a7d85453f3c083b08c420f837011c9b45", "master", "fail")
    assert by_port[31005].health == "fail" and by_port[31005].role == "replica"
    assert by_port[31004].role == "master" and by_port[31004].routable
    text = slotmap.describe()
    assert text == ("3 masters, 16384/16384 slots covered: "
                    "127.0.0.1:31001 [0-99,200-5460] replicas 127.0.0.1:31006; "
                    "127.0.0.1:31003 [100-199,7000,10923-16383]; 127.0.0.1:31004 [5461-6999,7001-10922]; "
                    "not routed: 127.0.0.1:31005 (replica fail) 127.0.0.1:31002 (master fail)")
    loading = SlotMap.from_cluster_shards(parsed("loading_shards"))
    assert sorted(n.address.port for n in loading.nodes if n.health == "loading") == [31004, 31005, 31006]


def test_unknown_endpoint_needs_a_source() -> None:
    with pytest.raises(TopologyError, match="no source address"):
        SlotMap.from_cluster_shards(parsed("unknown_shards"))
    with pytest.raises(TopologyError, match="no source address"):
        SlotMap.from_cluster_slots(parsed("unknown_slots"))
    with pytest.raises(TopologyError, match="no source address"):
        SlotMap.from_cluster_shards(parsed("lone_shards"))


def test_tls_port() -> None:
    shard = [b"slots", [0, 16383], b"nodes", [[b"id", b"x" * 40, b"port", 7000, b"tls-port", 7443,
                                               b"ip", b"10.0.0.1", b"endpoint", b"10.0.0.1",
                                               b"role", b"master", b"replication-offset", 0,
                                               b"health", b"online"]]]
    assert SlotMap.from_cluster_shards([shard]).masters() == (Address("10.0.0.1", 7000),)
    assert SlotMap.from_cluster_shards([shard], tls=True).masters() == (Address("10.0.0.1", 7443),)
    tls_only = [shard[0], shard[1], shard[2], [shard[3][0][:2] + shard[3][0][4:]]]
    with pytest.raises(TopologyError, match="has no 'port'"):
        SlotMap.from_cluster_shards([tls_only])


@pytest.mark.parametrize(("reply", "message"), [
    (hiredis.ReplyError("ERR This instance has cluster support disabled"), "is an error"),
    (b"OK", "is not a list"),
    ([[b"slots", [0, 100, 200], b"nodes", []]], "odd number of slot bounds"),
    ([[b"slots", [0, 16384], b"nodes", [[b"port", 1, b"endpoint", b"h", b"role", b"master"]]]], "not within"),
    ([[b"slots", [5, 4], b"nodes", [[b"port", 1, b"endpoint", b"h", b"role", b"master"]]]], "not within"),
    ([[b"slots", [b"x", 4], b"nodes", []]], "not an integer"),
    ([[b"slots", [0, 1], b"nodes", [[b"port", 0, b"endpoint", b"h", b"role", b"master"]]]], "out of range"),
    ([[b"slots", [0, 1], b"nodes", [[b"port"]]]], "key/value pairs"),
])
def test_bad_shards_replies(reply, message) -> None:
    with pytest.raises(TopologyError, match=message):
        SlotMap.from_cluster_shards(reply)


@pytest.mark.parametrize(("reply", "message"), [
    (hiredis.ReplyError("ERR This instance has cluster support disabled"), "is an error"),
    ([[0, 16383]], "without a master"),
    ([[0, 16383, [b"h"]]], "without endpoint and port"),
    ([[0, 16384, [b"h", 1, b"id"]]], "not within"),
])
def test_bad_slots_replies(reply, message) -> None:
    with pytest.raises(TopologyError, match=message):
        SlotMap.from_cluster_slots(reply)


def test_old_cluster_slots_format() -> None:
    # Redis 3.0: [host, port] only; 4.0-6.2: [host, port, id]
    reply = [[0, 8191, [b"10.0.0.1", 7000], [b"10.0.0.2", 7001]], [8192, 16383, [b"10.0.0.3", 7002, b"id3"]]]
    slotmap = SlotMap.from_cluster_slots(reply)
    assert slotmap.ranges() == layout((0, 8191, Address("10.0.0.1", 7000), [Address("10.0.0.2", 7001)]),
                                      (8192, 16383, Address("10.0.0.3", 7002), []))


# -- the map itself ---------------------------------------------------------------------

A, B, C, D = (Address("10.0.0.%d" % i, 6379) for i in range(1, 5))
RA = Address("10.0.1.1", 6379)


def three() -> SlotMap:
    return SlotMap.from_ranges([(0, 5460, A, [RA]), (5461, 10922, B, []), (10923, 16383, C, [])])


def test_lookups() -> None:
    m = three()
    assert [m.master_for_slot(s) for s in (0, 5460, 5461, 10922, 10923, 16383)] == [A, A, B, B, C, C]
    assert m.replicas_for_slot(100) == (RA,) and m.replicas_for_slot(6000) == ()
    assert m.master_for_key(b"foo") == m.master_for_slot(hash_slot(b"foo")) == C  # slot 12182
    assert m.masters() == (A, B, C)
    assert m.coverage_complete() and m.covered_slots == SLOT_COUNT
    with pytest.raises(IndexError):
        m.master_for_slot(SLOT_COUNT)


def test_masters_in_order_of_first_slot() -> None:
    m = SlotMap.from_ranges([(10000, 16383, A, []), (0, 99, B, []), (100, 9999, A, [])])
    assert m.masters() == (B, A)


def test_gaps_and_empty() -> None:
    m = SlotMap.from_ranges([(0, 99, A, []), (200, 299, B, [])])
    assert m.master_for_slot(150) is None and m.replicas_for_slot(150) == ()
    assert m.covered_slots == 200 and not m.coverage_complete()
    empty = SlotMap.empty()
    assert empty.masters() == () and empty.covered_slots == 0 and empty.master_for_slot(0) is None
    assert empty.describe() == "0 masters, 0/16384 slots covered"


@pytest.mark.parametrize(("slot", "target", "covered"), [
    (100, B, SLOT_COUNT),  # to a known master: it keeps its replicas
    (100, D, SLOT_COUNT),  # to a new node: no replicas known
    (5460, C, SLOT_COUNT),
])
def test_with_moved(slot: int, target: Address, covered: int) -> None:
    before = three()
    after = before.with_moved(slot, target)
    assert after.master_for_slot(slot) == target
    assert before.master_for_slot(slot) == A  # the old map is unchanged
    assert after.covered_slots == covered
    assert after.replicas_for_slot(slot) == (before.replicas_for_slot(6000) if target == B else ())
    assert all(after.master_for_slot(s) == before.master_for_slot(s) for s in range(SLOT_COUNT) if s != slot)
    expected = [(0, slot - 1, A, [RA])] if slot else []
    assert after == SlotMap.from_ranges(
        expected + [(slot, slot, target, ())] + ([(slot + 1, 5460, A, [RA])] if slot < 5460 else [])
        + [(5461, 10922, B, []), (10923, 16383, C, [])])


def test_with_moved_details() -> None:
    m = three()
    assert m.with_moved(0, A) is m  # already there
    gap = SlotMap.from_ranges([(0, 99, A, [])])
    moved = gap.with_moved(500, B)
    assert moved.covered_slots == 101 and moved.masters() == (A, B)
    # every slot of A moved away: A is no longer a master of the map
    single = SlotMap.from_ranges([(7, 7, A, []), (8, 16383, B, [])]).with_moved(7, B)
    assert single.masters() == (B,) and single.ranges() == [SlotRange(7, 16383, B)]
    with pytest.raises(ValueError):
        m.with_moved(SLOT_COUNT, A)


def test_equality_is_about_routing() -> None:
    one = SlotMap.from_ranges([(0, 8191, A, []), (8192, 16383, B, [])])
    two = SlotMap.from_ranges([(8192, 16383, B, []), (0, 8191, A, [])], nodes=[Node(A, "id")])
    assert one == two and hash(one) == hash(two)
    assert one != SlotMap.from_ranges([(0, 8191, A, [RA]), (8192, 16383, B, [])])
    assert one != SlotMap.from_ranges([(0, 8190, A, []), (8191, 16383, B, [])])
    # the same map reached through MOVED equals the one built directly
    assert one.with_moved(8191, B).with_moved(8191, A) == one
    assert one.with_moved(8191, B) == SlotMap.from_ranges([(0, 8190, A, []), (8191, 16383, B, [])])


def test_describe() -> None:
    m = SlotMap.from_ranges([(0, 99, A, [RA]), (100, 100, B, []), (101, 16000, A, [RA])])
    assert m.describe() == ("2 masters, 16001/16384 slots covered: "
                            "10.0.0.1:6379 [0-99,101-16000] replicas 10.0.1.1:6379; 10.0.0.2:6379 [100]")
    assert repr(m) == "<SlotMap 2 masters, 16001/16384 slots>"
    many = SlotMap.from_ranges([(s, s, A if s % 2 else B, []) for s in range(40)])
    assert "...(20 ranges)" in many.describe()
    v6 = SlotMap.from_ranges([(0, 16383, Address("::1", 7000), [])])
    assert v6.describe().endswith("[::1]:7000 [0-16383]")


# -- against a running cluster ----------------------------------------------------------


def test_live_every_node_agrees(cluster) -> None:
    maps = []
    for address in cluster.addresses:
        maps.append(SlotMap.from_cluster_shards(call(address, "CLUSTER", "SHARDS"), address))
        maps.append(SlotMap.from_cluster_slots(call(address, "CLUSTER", "SLOTS"), address))
        with Conn(address) as conn:
            conn.raw(("HELLO", "3"))
            reader = hiredis.Reader()
            reader.feed(conn.raw(("CLUSTER", "SHARDS"))[0])
            maps.append(SlotMap.from_cluster_shards(reader.gets(), address))
    first = maps[0]
    assert all(m == first for m in maps)
    assert first.coverage_complete() and len(first.masters()) == 3
    assert all(len(first.replicas_for_slot(first.ranges()[i].start)) == 1 for i in range(3))
    assert set(first.masters()) | {r for x in first.ranges() for r in x.replicas} == set(cluster.addresses)


def test_live_routing_matches_the_cluster(cluster) -> None:
    """For random keys: the master we pick runs the command, every other master redirects
    there with MOVED, and our replica answers a READONLY read without redirecting."""
    from proxy.backends.cluster.routing.redirect import parse_redirect

    first = cluster.addresses[0]
    slotmap = SlotMap.from_cluster_shards(call(first, "CLUSTER", "SHARDS"), first)
    rng = random.Random(7)
    keys = [rng.randbytes(rng.randrange(1, 20)) for _ in range(300)]
    conns = {a: Conn(a) for a in cluster.addresses}
    try:
        for conn in conns.values():
            conn.raw(("READONLY",))
        for key in keys:
            owner = slotmap.master_for_key(key)
            assert conns[owner].raw(("EXISTS", key))[0] == b":0\r\n"
            for other in slotmap.masters():
                if other != owner:
                    redirect = parse_redirect(conns[other].raw(("EXISTS", key))[0])
                    assert redirect is not None and not redirect.ask
                    assert redirect.slot == hash_slot(key)
                    assert redirect.address(other) == owner
            for replica in slotmap.replicas_for_slot(hash_slot(key)):
                assert conns[replica].raw(("EXISTS", key))[0] == b":0\r\n"
    finally:
        for conn in conns.values():
            conn.close()

"""A topology that changes under a real cluster of its own (3 masters, no replicas): a slot
reassigned (MOVED, with_moved), a slot migrating (ASK, ASKING, TRYAGAIN), a master lost
(health 'fail', uncovered slots, CLUSTERDOWN). The last test stops a master: it runs last."""

from __future__ import annotations

import hiredis
import pytest

from proxy.backends.cluster.routing.multikey import Forward, Planner, Reject
from proxy.backends.cluster.routing.redirect import (
    ASKING,
    CLUSTERDOWN_SLOT_NOT_SERVED,
    ClusterError,
    classify_error,
    parse_redirect,
)
from proxy.backends.cluster.routing.slotmap import SlotMap
from proxy.backends.cluster.routing.slots import SLOT_COUNT, hash_slot
from proxy.config import Address
from tests.cluster.start import start_cluster
from tests.servers import wait_for

from .raw_client import Conn, call


@pytest.fixture(scope="module")
def own_cluster():
    c = start_cluster(masters=3, replicas=0)
    yield c
    c.close()


def current(cluster) -> SlotMap:
    first = cluster.addresses[0]
    return SlotMap.from_cluster_shards(call(first, "CLUSTER", "SHARDS"), first)


def node_ids(cluster) -> dict[Address, str]:
    return {address: cluster.node_by_port(address.port).node_id for address in cluster.addresses}


def key_in(slot: int, prefix: bytes = b"key:") -> bytes:
    return next(prefix + b"%d" % i for i in range(1_000_000) if hash_slot(prefix + b"%d" % i) == slot)


def test_moved_updates_the_map(own_cluster) -> None:
    before = current(own_cluster)
    slot = 42
    old_owner = before.master_for_slot(slot)
    new_owner = next(m for m in before.masters() if m != old_owner)
    ids = node_ids(own_cluster)
    for node in [new_owner, old_owner, *(m for m in before.masters() if m not in (old_owner, new_owner))]:
        assert call(node, "CLUSTER", "SETSLOT", slot, "NODE", ids[new_owner]) == b"OK"
    wait_for(lambda: all(SlotMap.from_cluster_shards(call(a, "CLUSTER", "SHARDS"), a).master_for_slot(slot)
                         == new_owner for a in own_cluster.addresses), 20, "slot 42 reassigned everywhere")

    with Conn(old_owner) as conn:
        reply = conn.raw(("GET", key_in(slot)))[0]
    redirect = parse_redirect(reply)
    assert redirect is not None and not redirect.ask and redirect.slot == slot
    after = before.with_moved(redirect.slot, redirect.address(old_owner))
    assert after == current(own_cluster) != before
    assert after.master_for_slot(slot) == new_owner
    assert after.describe().count(f"{new_owner} [") == 1


def test_ask_and_tryagain_while_a_slot_migrates(own_cluster) -> None:
    slotmap = current(own_cluster)
    slot = 5000
    source = slotmap.master_for_slot(slot)
    target = next(m for m in slotmap.masters() if m != source)
    ids = node_ids(own_cluster)
    present, absent = key_in(slot, b"present:"), key_in(slot, b"absent:")
    call(source, "SET", present, "v")
    try:
        assert call(target, "CLUSTER", "SETSLOT", slot, "IMPORTING", ids[source]) == b"OK"
        assert call(source, "CLUSTER", "SETSLOT", slot, "MIGRATING", ids[target]) == b"OK"
        with Conn(source) as conn:
            ask, tryagain, found = conn.raw(("GET", absent), ("MGET", present, absent), ("GET", present))
        assert classify_error(ask) is ClusterError.ASK
        redirect = parse_redirect(ask)
        assert redirect.ask and redirect.slot == slot and redirect.address(source) == target
        assert tryagain == b"-TRYAGAIN Multiple keys request during rehashing of slot\r\n"
        assert classify_error(tryagain) is ClusterError.TRYAGAIN
        assert found == b"$1\r\nv\r\n"  # keys still at the source are served there
        # The map does not change on ASK; the target answers only after ASKING.
        assert current(own_cluster).master_for_slot(slot) == source
        with Conn(target) as conn:
            moved_back = conn.raw(("GET", absent))[0]
            assert parse_redirect(moved_back).address(target) == source
            # ASKING (these bytes) then the command, on one connection; it holds for one command.
            assert hiredis.pack_command(("ASKING",)) == ASKING
            ok, value, again = conn.raw(("ASKING",), ("GET", absent), ("GET", absent))
            assert (ok, value) == (b"+OK\r\n", b"$-1\r\n")
            assert classify_error(again) is ClusterError.MOVED
    finally:
        for node in (source, target):
            call(node, "CLUSTER", "SETSLOT", slot, "STABLE")
        call(source, "DEL", present)


def test_lost_master_leaves_slots_uncovered(own_cluster, table) -> None:
    slotmap = current(own_cluster)
    first = own_cluster.addresses[0]
    victim = next(m for m in slotmap.masters() if m != first)
    lost = sum(r.end - r.start + 1 for r in slotmap.ranges() if r.master == victim)
    key = next(b"k%d" % i for i in range(10000) if slotmap.master_for_key(b"k%d" % i) == victim)
    survivor_key = next(b"k%d" % i for i in range(10000) if slotmap.master_for_key(b"k%d" % i) == first)
    own_cluster.kill(own_cluster.node_by_port(victim.port))

    def failed():
        m = SlotMap.from_cluster_shards(call(first, "CLUSTER", "SHARDS"), first)
        return m if not m.coverage_complete() else None

    after = wait_for(failed, 30, "the lost master marked fail")
    assert after.covered_slots == SLOT_COUNT - lost
    assert victim not in after.masters() and after.master_for_key(key) is None
    assert any(n.address == victim and n.health == "fail" for n in after.nodes)
    assert f"not routed: {victim} (master fail)" in after.describe()

    planner = Planner(table)
    assert planner.plan([b"GET", key], after.master_for_slot) == Reject(CLUSTERDOWN_SLOT_NOT_SERVED)
    assert planner.plan([b"GET", survivor_key], after.master_for_slot) == Forward(hash_slot(survivor_key), first)
    wait_for(lambda: b"cluster_state:fail" in call(first, "CLUSTER", "INFO"), 30, "cluster state fail")
    with Conn(first) as conn:
        reply = conn.raw(("GET", survivor_key))[0]
    assert reply == b"-CLUSTERDOWN The cluster is down\r\n"
    assert classify_error(reply) is ClusterError.CLUSTERDOWN

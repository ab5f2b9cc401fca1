"""parse_redirect and classify_error: tables of error lines, the exact replies a real cluster
sent (captured.py), and live redirections, IPv6 included."""

from __future__ import annotations

import socket

import hiredis
import pytest

from proxy.backends.cluster.routing.redirect import (
    ASKING,
    CLUSTERDOWN_SLOT_NOT_SERVED,
    CROSSSLOT,
    ClusterError,
    Redirect,
    classify_error,
    parse_redirect,
)
from proxy.backends.cluster.routing.slotmap import SlotMap
from proxy.backends.cluster.routing.slots import hash_slot
from proxy.config import Address
from tests.cluster.start import start_cluster
from tests.servers import wait_for

from .captured import REPLIES
from .raw_client import Conn, call

MOVED, ASK = False, True

PARSE_CASES: list[tuple[bytes, Redirect | None]] = [
    (b"-MOVED 3999 127.0.0.1:6381\r\n", Redirect(MOVED, 3999, "127.0.0.1", 6381)),
    (b"-ASK 3999 127.0.0.1:6381\r\n", Redirect(ASK, 3999, "127.0.0.1", 6381)),
    (b"-MOVED 3999 127.0.0.1:6381", Redirect(MOVED, 3999, "127.0.0.1", 6381)),
    (b"-MOVED 0 10.1.2.3:1\r\n", Redirect(MOVED, 0, "10.1.2.3", 1)),
    (b"-ASK 16383 10.1.2.3:65535\r\n", Redirect(ASK, 16383, "10.1.2.3", 65535)),
    (b"-MOVED 6000 node-31002.example:31002\r\n", Redirect(MOVED, 6000, "node-31002.example", 31002)),
    (b"-MOVED 12182 ::1:30012\r\n", Redirect(MOVED, 12182, "::1", 30012)),  # as Redis 7.0 writes it
    (b"-MOVED 3999 [::1]:6381\r\n", Redirect(MOVED, 3999, "::1", 6381)),
    (b"-ASK 5 2001:db8::7:6379\r\n", Redirect(ASK, 5, "2001:db8::7", 6379)),
    (b"-ASK 5 [2001:db8::7]:6379\r\n", Redirect(ASK, 5, "2001:db8::7", 6379)),
    (b"-MOVED 12000 :31003\r\n", Redirect(MOVED, 12000, None, 31003)),  # unknown endpoint
    (b"-MOVED 12000 ?:31003\r\n", Redirect(MOVED, 12000, None, 31003)),  # hostname not announced
    (b"-ASK 12000 :31003\r\n", Redirect(ASK, 12000, None, 31003)),
    # not redirections
    (b"-MOVED 16384 h:1\r\n", None),
    (b"-MOVED -1 h:1\r\n", None),
    (b"-MOVED 1 h\r\n", None),
    (b"-MOVED 1 h:\r\n", None),
    (b"-MOVED 1 h:0\r\n", None),
    (b"-MOVED 1 h:65536\r\n", None),
    (b"-MOVED 1 h:x\r\n", None),
    (b"-MOVED  1 h:1\r\n", None),
    (b"-MOVED 1 h:1 extra\r\n", None),
    (b"-MOVED 1\r\n", None),
    (b"-MOVED\r\n", None),
    (b"-MOVEDX 1 h:1\r\n", None),
    (b"-moved 1 h:1\r\n", None),
    (b"-ASKING 1 h:1\r\n", None),
    (b"-ERR MOVED 1 h:1\r\n", None),
    (b"+MOVED 1 h:1\r\n", None),
    (b"$17\r\nMOVED 1 h:1\r\n", None),
    (b"-MOVED 1 h\xff:1\r\n", None),
    (b"-TRYAGAIN Multiple keys request during rehashing of slot\r\n", None),
    (b"", None),
]


@pytest.mark.parametrize(("line", "expected"), PARSE_CASES, ids=[repr(c[0]) for c in PARSE_CASES])
def test_parse_redirect(line: bytes, expected: Redirect | None) -> None:
    assert parse_redirect(line) == expected


def test_redirect_address() -> None:
    answered_by = Address("10.0.0.5", 7000)
    assert parse_redirect(b"-MOVED 1 10.0.0.9:7001\r\n").address(answered_by) == Address("10.0.0.9", 7001)
    assert parse_redirect(b"-MOVED 1 :7001\r\n").address(answered_by) == Address("10.0.0.5", 7001)
    assert parse_redirect(b"-ASK 1 ?:7001\r\n").address(answered_by) == Address("10.0.0.5", 7001)
    assert parse_redirect(b"-ASK 1 ::1:7001\r\n").address(answered_by) == Address("::1", 7001)
    assert parse_redirect(b"-ASK 1 h:1\r\n").kind is ClusterError.ASK
    assert parse_redirect(b"-MOVED 1 h:1\r\n").kind is ClusterError.MOVED


CLASSIFY_CASES: list[tuple[bytes, ClusterError | None]] = [
    (b"-MOVED 3999 127.0.0.1:6381\r\n", ClusterError.MOVED),
    (b"-ASK 3999 127.0.0.1:6381\r\n", ClusterError.ASK),
    (b"-TRYAGAIN Multiple keys request during rehashing of slot\r\n", ClusterError.TRYAGAIN),
    (b"-CLUSTERDOWN Hash slot not served\r\n", ClusterError.CLUSTERDOWN),
    (b"-CLUSTERDOWN The cluster is down\r\n", ClusterError.CLUSTERDOWN),
    (b"-CLUSTERDOWN The cluster is down and only accepts read commands\r\n", ClusterError.CLUSTERDOWN),
    (b"-CROSSSLOT Keys in request don't hash to the same slot\r\n", ClusterError.CROSSSLOT),
    (b"-CLUSTERDOWN\r\n", ClusterError.CLUSTERDOWN),
    (b"-TRYAGAIN", ClusterError.TRYAGAIN),
    (b"-ERR unknown command 'X'\r\n", None),
    (b"-MOVEDX 1 h:1\r\n", None),
    (b"-clusterdown x\r\n", None),
    (b"-\r\n", None),
    (b"+MOVED\r\n", None),
    (b"$5\r\nMOVED\r\n", None),
    (b":1\r\n", None),
    (b"", None),
]


@pytest.mark.parametrize(("reply", "kind"), CLASSIFY_CASES, ids=[repr(c[0]) for c in CLASSIFY_CASES])
def test_classify_error(reply: bytes, kind: ClusterError | None) -> None:
    assert classify_error(reply) is kind


# (capture, kind, redirect): what a real 7.0.15 cluster sent (captured.py).
CAPTURED = [
    ("moved", ClusterError.MOVED, Redirect(MOVED, 12000, "127.0.0.1", 31003)),
    ("ranges_moved", ClusterError.MOVED, Redirect(MOVED, 150, "127.0.0.1", 31003)),
    ("hostname_moved", ClusterError.MOVED, Redirect(MOVED, 6000, "node-31002.example", 31002)),
    ("hostname_moved_unknown", ClusterError.MOVED, Redirect(MOVED, 12000, None, 31003)),
    ("unknown_moved", ClusterError.MOVED, Redirect(MOVED, 12000, None, 31003)),
    ("ask", ClusterError.ASK, Redirect(ASK, 5000, "127.0.0.1", 31002)),
    ("tryagain", ClusterError.TRYAGAIN, None),
    ("crossslot", ClusterError.CROSSSLOT, None),
    ("master_fail_get", ClusterError.CLUSTERDOWN, None),
    ("lone_no_slots_get", ClusterError.CLUSTERDOWN, None),
]


@pytest.mark.parametrize(("name", "kind", "redirect"), CAPTURED, ids=[c[0] for c in CAPTURED])
def test_captured_errors(name: str, kind: ClusterError, redirect: Redirect | None) -> None:
    reply = REPLIES[name]
    assert classify_error(reply) is kind
    assert parse_redirect(reply) == redirect


def test_texts_are_redis_own() -> None:
    assert CROSSSLOT == REPLIES["crossslot"] == b"-CROSSSLOT Keys in request don't hash to the same slot\r\n"
    assert CLUSTERDOWN_SLOT_NOT_SERVED == REPLIES["lone_no_slots_get"]
    assert ASKING == hiredis.pack_command(("ASKING",))


def test_live_moved_and_crossslot(cluster) -> None:
    first = cluster.addresses[0]
    slotmap = SlotMap.from_cluster_shards(call(first, "CLUSTER", "SHARDS"), first)
    key = next(b"k%d" % i for i in range(1000) if slotmap.master_for_key(b"k%d" % i) != first)
    with Conn(first) as conn:
        moved, crossslot = conn.raw(("GET", key), ("MGET", b"a", b"b"))  # a: 15495, b: 3300
    assert classify_error(moved) is ClusterError.MOVED
    assert parse_redirect(moved) == Redirect(MOVED, hash_slot(key), "127.0.0.1", slotmap.master_for_key(key).port)
    assert crossslot == CROSSSLOT


def _ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as sock:
            sock.bind(("::1", 0))
        return True
    except OSError:
        return False


@pytest.mark.skipif(not _ipv6_loopback(), reason="no IPv6 loopback")
def test_live_ipv6_moved() -> None:
    """Two nodes on ::1: Redis writes the address in MOVED without brackets."""
    pair = start_cluster(masters=2, replicas=0, join=False, bind="::1 127.0.0.1")
    a, b = pair.nodes
    try:
        call(a.port, "CLUSTER", "MEET", "::1", b.port, b.bus_port)
        call(a.port, "CLUSTER", "ADDSLOTSRANGE", 0, 8191)
        call(b.port, "CLUSTER", "ADDSLOTSRANGE", 8192, 16383)
        wait_for(lambda: all(len(call(n.port, "CLUSTER", "SLOTS")) == 2 and
                             b"cluster_state:ok" in call(n.port, "CLUSTER", "INFO") for n in (a, b)),
                 20, "both nodes ok")
        with Conn(Address("::1", a.port)) as conn:
            reply = conn.raw(("GET", "foo"))[0]  # slot 12182, on b
        assert reply == b"-MOVED 12182 ::1:%d\r\n" % b.port
        assert parse_redirect(reply).address(Address("::1", a.port)) == Address("::1", b.port)
        shards = SlotMap.from_cluster_shards(call(a.port, "CLUSTER", "SHARDS"))
        assert shards.master_for_key(b"foo") == Address("::1", b.port)
        assert shards.describe().endswith(f"[::1]:{b.port} [8192-16383]")
    finally:
        pair.close()

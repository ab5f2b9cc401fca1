"""One face (issue 52), for the errors the proxy composes itself when an upstream fails: in front
of a real 3-master cluster (no replicas: a stopped or killed master is not failed over), a request
timing out (a master SIGSTOPped), a connection lost with requests in flight (the master killed, by
its pid) and a node that refuses connections (the killed master, later) each give the client its
error (`-ERR upstream ...`, first words kept), in both faces, and no reply names any node's port;
the proxy's log keeps the address for the operator."""

from __future__ import annotations

import socket
import time

import hiredis
import pytest

from tests.cluster.start import start_cluster
from tests.cluster.test_face_leaks import _named, _node_ports
from tests.servers import ProxyProcess, wait_for

FACES = ("standalone", "cluster")


@pytest.fixture
def lone_masters():
    cluster = start_cluster(masters=3, replicas=0)
    yield cluster
    for node in cluster.nodes:
        if node.paused and node.running:
            cluster.resume(node)
    cluster.close()


def _proxies(cluster, tmp_path, options: str) -> dict:
    config = tmp_path / "config.yaml"
    config.write_text("policy: none\nupstream_options:\n" + options)
    return {face: ProxyProcess(None, str(config), "--upstream-cluster", cluster.seeds,
                               *(("--face", "cluster") if face == "cluster" else ()))
            for face in FACES}


def _keys(cluster, victim) -> tuple[bytes, bytes]:
    """A key `victim` owns and one another master owns."""
    mine = next(b"{e%d}k" % n for n in range(1000) if cluster.master_for_key(b"{e%d}k" % n) is victim)
    other = next(b"{e%d}k" % n for n in range(1000) if cluster.master_for_key(b"{e%d}k" % n) is not victim)
    return mine, other


def _requests(mine: bytes, other: bytes) -> list[tuple]:
    """Commands that reach the victim: alone, split over two masters, on every master."""
    return [("GET", mine), ("MGET", mine, other), ("DEL", mine + b"x", other + b"x"), ("DBSIZE",), ("KEYS", "{e*"),
            ("SCRIPT", "EXISTS", "a" * 40), ("SET", mine, "v")]


class Asked:
    """One raw connection per command (a failure may close the client's connection): its bytes."""

    def __init__(self, port: int, command: tuple):
        self.command = command
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.sock.sendall(hiredis.pack_command(command))
        self.data = b""

    def read(self, timeout: float) -> bytes:
        """Until one whole reply or the connection's end (or `timeout`)."""
        deadline = time.monotonic() + timeout
        reader = hiredis.Reader()
        reader.feed(self.data)
        try:
            while reader.gets() is False and time.monotonic() < deadline:
                self.sock.settimeout(max(0.05, deadline - time.monotonic()))
                chunk = self.sock.recv(65536)
                if not chunk:
                    break
                self.data += chunk
                reader.feed(chunk)
        except (TimeoutError, ConnectionError):
            pass
        self.sock.close()
        return self.data


def _ask_all(proxies: dict, requests: list) -> list[Asked]:
    return [Asked(proxy.port, command) for proxy in proxies.values() for command in requests]


def _check(cluster, asked: list[Asked], timeout: float, kind: bytes) -> list[bytes]:
    """Every reply read; none names a node's port; the error `kind` was given at least once per proxy."""
    ports = _node_ports(cluster)
    replies = [one.read(timeout) for one in asked]
    for one, reply in zip(asked, replies):
        leaked = _named(ports, reply)
        assert not leaked, f"{one.command} names node ports {leaked}: {reply[:300]!r}"
        assert b"MOVED" not in reply and b"ASK " not in reply, (one.command, reply)
    per_proxy = len(asked) // len(FACES)
    for at in range(len(FACES)):
        mine = replies[at * per_proxy:(at + 1) * per_proxy]
        assert any(reply.startswith(kind) for reply in mine), (kind, mine)
    return replies


def test_request_timeout_names_no_node(lone_masters, tmp_path):
    cluster = lone_masters
    proxies = _proxies(cluster, tmp_path, "  request_timeout: 1\n")
    try:
        victim = cluster.masters()[0]
        mine, other = _keys(cluster, victim)
        cluster.client(victim).set(mine, "v")
        cluster.pause(victim)
        replies = _check(cluster, _ask_all(proxies, _requests(mine, other)), 20,
                         b"-ERR upstream did not answer within request_timeout 1s")
        assert all(reply.startswith(b"-ERR upstream") or not reply for reply in replies), replies
        for proxy in proxies.values():
            wait_for(lambda proxy=proxy: f"upstream {victim.address} is down" in proxy.log, 10, "the log line")
    finally:
        for proxy in proxies.values():
            proxy.stop()


def test_connection_lost_and_refused_name_no_node(lone_masters, tmp_path):
    cluster = lone_masters
    proxies = _proxies(cluster, tmp_path, "  request_timeout: 60\n  failover_timeout: 2\n")
    try:
        victim = cluster.masters()[1]
        mine, other = _keys(cluster, victim)
        cluster.client(victim).set(mine, "v")
        address = victim.address
        for proxy in proxies.values():  # (the proxies' connections to the victim are open)
            for command in _requests(mine, other):
                Asked(proxy.port, command).read(10)
        cluster.pause(victim)  # (requests sent now are in flight, unanswered, when it dies)
        asked = _ask_all(proxies, _requests(mine, other))
        time.sleep(1.0)
        cluster.kill(victim)
        _check(cluster, asked, 20, b"-ERR upstream connection lost before the reply")
        for proxy in proxies.values():
            wait_for(lambda proxy=proxy: f"upstream {address}: " in proxy.log, 10, "the lost line")

        # The victim is gone for good: connecting is refused, requests wait failover_timeout (2 s)
        time.sleep(0.5)
        _check(cluster, _ask_all(proxies, _requests(mine, other)), 30, b"-ERR upstream unavailable: ")
    finally:
        for proxy in proxies.values():
            proxy.stop()

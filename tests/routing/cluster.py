"""Real Redis Cluster nodes for the routing tests: started on free loopback ports, joined with
``redis-cli --cluster create``, ended by pid. Every wait is bounded."""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Sequence

import hiredis

from proxy.config import Address
from proxy.resp.replies import ReplySplitter
from tests.servers import free_port

CLUSTER_ARGS = ("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                "--cluster-node-timeout", "2000", "--repl-ping-replica-period", "1",
                "--repl-diskless-sync-delay", "0")


def have_redis() -> bool:
    return shutil.which("redis-server") is not None and shutil.which("redis-cli") is not None


class Conn:
    """A blocking connection that returns each reply's exact bytes (and parses them on demand)."""

    def __init__(self, address: Address | int, timeout: float = 10.0) -> None:
        if isinstance(address, int):
            address = Address("127.0.0.1", address)
        self.address = address
        self.sock = socket.create_connection((address.host, address.port), timeout=timeout)
        self.buffer = b""
        self.splitter = ReplySplitter()

    def raw(self, *commands: Sequence[bytes | str | int]) -> list[bytes]:
        """Send the commands pipelined; the exact bytes of each reply."""
        self.sock.sendall(b"".join(hiredis.pack_command(tuple(c)) for c in commands))
        replies: list[bytes] = []
        start = 0
        while len(replies) < len(commands):
            end, done, _ = self.splitter.scan(self.buffer, start, 1)
            if done:
                replies.append(self.buffer[:end])
                self.buffer = self.buffer[end:]
                start = 0
                continue
            start = end
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise ConnectionError(f"{self.address} closed the connection")
            self.buffer += chunk
        return replies

    def call(self, *args: bytes | str | int):
        """One command, its reply parsed by hiredis (an error reply is returned, not raised)."""
        reader = hiredis.Reader()
        reader.feed(self.raw(args)[0])
        return reader.gets()

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> "Conn":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def call(address: Address | int, *args: bytes | str | int):
    with Conn(address) as conn:
        return conn.call(*args)


def wait_for(predicate, timeout: float, what: str, interval: float = 0.05):
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = predicate()
        except (OSError, ValueError):
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not after {timeout}s")
        time.sleep(interval)


class ClusterNode:
    """One ``redis-server --cluster-enabled yes``; its bus on a second free port (``cluster-port``),
    not port + 10000, which may not exist."""

    def __init__(self, *extra: str, timeout: float = 10.0) -> None:
        self.port = free_port()
        self.bus_port = free_port()
        self.dir = tempfile.mkdtemp(prefix="rg-test-cluster-")
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--cluster-port", str(self.bus_port),
             "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", self.dir,
             *CLUSTER_ARGS, *extra],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        try:
            wait_for(self._up, timeout, f"redis-server on port {self.port}")
        except BaseException:
            self.close()
            raise

    def _up(self) -> bool:
        if self.process.poll() is not None:
            raise RuntimeError(f"redis-server on port {self.port} exited with {self.process.returncode}")
        socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
        return True

    @property
    def address(self) -> Address:
        return Address("127.0.0.1", self.port)

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


class Cluster:
    """``masters`` masters with ``replicas`` replicas each, all slots assigned, all nodes online."""

    def __init__(self, masters: int = 3, replicas: int = 0, timeout: float = 60.0) -> None:
        self.nodes: list[ClusterNode] = []
        try:
            for _ in range(masters * (1 + replicas)):
                self.nodes.append(ClusterNode())
            subprocess.run(
                ["redis-cli", "--cluster", "create", *(str(n.address) for n in self.nodes),
                 "--cluster-replicas", str(replicas), "--cluster-yes"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, timeout=timeout,
            )
            wait_for(self._settled, timeout, "cluster settled (state ok, every node online, slots agreed)")
        except BaseException:
            self.close()
            raise

    def _settled(self) -> bool:
        views = []
        for node in self.nodes:
            info = call(node.address, "CLUSTER", "INFO")
            if b"cluster_state:ok" not in info:
                return False
            shards = call(node.address, "CLUSTER", "SHARDS")
            healths = [n[n.index(b"health") + 1] for s in shards for n in s[s.index(b"nodes") + 1]]
            if len(healths) != len(self.nodes) or set(healths) != {b"online"}:
                return False
            views.append(sorted((r[0], r[1], r[2][1]) for r in call(node.address, "CLUSTER", "SLOTS")))
        return all(v == views[0] for v in views)

    @property
    def addresses(self) -> list[Address]:
        return [n.address for n in self.nodes]

    def node_ids(self) -> dict[Address, bytes]:
        return {n.address: call(n.address, "CLUSTER", "MYID") for n in self.nodes}

    def close(self) -> None:
        for node in self.nodes:
            node.close()

"""A raw-bytes client for the routing tests: each reply's exact bytes, as a proxy would relay
them. The clusters themselves are tests/cluster/nodes.py's RedisCluster (see conftest.py)."""

from __future__ import annotations

import socket
from collections.abc import Sequence

import hiredis

from proxy.config import Address
from proxy.resp.replies import ReplySplitter


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

    def __enter__(self) -> Conn:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def call(address: Address | int, *args: bytes | str | int):
    with Conn(address) as conn:
        return conn.call(*args)

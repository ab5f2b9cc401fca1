"""One pipelined connection to a Redis server for the audit: requests written at once, replies
parsed with hiredis and handed back in the order the requests were written.

`request(payload, count)` writes a request of `count` commands (already encoded) and returns a
future of their `count` parsed replies (error replies are `hiredis.ReplyError` values, not
raised). Many requests may be in flight; the server answers in order, so the oldest waiting
request owns the next replies. When the connection is lost every waiting future fails with
ConnectionError. The connection authenticates and selects the database as the proxy's own
upstream connections do (`startup_commands`).
"""

from __future__ import annotations

import asyncio
import collections

import hiredis

from ..tls import upstream_ssl
from ..upstream.connection import startup_commands


class Pipe(asyncio.Protocol):
    def __init__(self, loop, address):
        self.loop = loop
        self.address = address
        self.reader = hiredis.Reader()
        self.waiting: collections.deque = collections.deque()  # [count, replies, future]
        self.transport = None
        self.lost: Exception | None = None

    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        reader = self.reader
        reader.feed(data)
        waiting = self.waiting
        while waiting:
            head = waiting[0]
            count, replies = head[0], head[1]
            while len(replies) < count:
                reply = reader.gets()
                if reply is False:
                    return
                replies.append(reply)
            waiting.popleft()
            if not head[2].done():
                head[2].set_result(replies)

    def connection_lost(self, exc) -> None:
        self.lost = ConnectionError(f"connection to {self.address} lost" + (f": {exc}" if exc else ""))
        while self.waiting:
            future = self.waiting.popleft()[2]
            if not future.done():
                future.set_exception(self.lost)

    def request(self, payload: bytes, count: int) -> asyncio.Future:
        future = self.loop.create_future()
        if self.lost is not None:
            future.set_exception(self.lost)
        elif count == 0:
            future.set_result([])
        else:
            self.waiting.append([count, [], future])
            self.transport.write(payload)
        return future

    async def call(self, *args) -> object:
        """One command, one reply."""
        return (await self.request(hiredis.pack_command(args), 1))[0]

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


async def connect(upstream, address=None, timeout: float = 5.0) -> Pipe:
    """A Pipe to `address` (default: the upstream's own) with the upstream's credentials and
    database. Raises OSError / TimeoutError when unreachable, PermissionError when refused."""
    loop = asyncio.get_running_loop()
    address = address or upstream.address
    _, pipe = await asyncio.wait_for(
        loop.create_connection(lambda: Pipe(loop, address), address.host, address.port, **upstream_ssl(address)),
        timeout)
    setup = startup_commands(upstream, upstream.db, 2)
    if setup:
        replies = await asyncio.wait_for(
            pipe.request(b"".join(hiredis.pack_command(cmd) for cmd in setup), len(setup)), timeout)
        for reply in replies:
            if isinstance(reply, hiredis.ReplyError):
                pipe.close()
                raise PermissionError(f"{address} refused the audit's credentials: {reply}")
    return pipe

"""Start-up questions to the upstream over a short-lived connection: is it there, and what does it
say about itself (command table, number of databases)."""

from __future__ import annotations

import asyncio

import hiredis

from ..tls import upstream_ssl
from .connection import startup_commands


async def ask(upstream, commands: list[tuple], timeout: float = 5.0) -> list:
    """Run commands (after the proxy's own AUTH) and return their parsed replies; error replies
    come back as hiredis.ReplyError values. Raises OSError/TimeoutError when unreachable."""
    setup = startup_commands(upstream, 0, 2)
    payload = b"".join(hiredis.pack_command(cmd) for cmd in setup + list(commands))
    reader_out, writer = await asyncio.wait_for(
        asyncio.open_connection(upstream.address.host, upstream.address.port, **upstream_ssl(upstream.address)),
        timeout
    )
    try:
        writer.write(payload)
        parser = hiredis.Reader()
        replies = []
        wanted = len(setup) + len(commands)
        while len(replies) < wanted:
            data = await asyncio.wait_for(reader_out.read(1 << 20), timeout)
            if not data:
                raise ConnectionError("upstream closed the connection")
            parser.feed(data)
            while (reply := parser.gets()) is not False:
                replies.append(reply)
        for reply in replies[: len(setup)]:
            if isinstance(reply, hiredis.ReplyError):
                raise PermissionError(f"upstream refused the proxy's credentials: {reply}")
        return replies[len(setup):]
    finally:
        writer.close()


async def answers(upstream, timeout: float = 1.0) -> bool:
    try:
        (reply,) = await ask(upstream, [("PING",)], timeout)
    except (TimeoutError, OSError, ConnectionError):
        return False
    return not isinstance(reply, hiredis.ReplyError) or b"NOAUTH" in str(reply).encode()

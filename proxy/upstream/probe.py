"""Start-up questions to the upstream over a short-lived connection: is it there, and what does it
say about itself (command table, number of databases)."""

from __future__ import annotations

import asyncio
import socket

import hiredis

from ..tls import upstream_ssl, wrap_socket
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


def ask_blocking(upstream, commands: list[tuple], timeout: float, db: int = 0) -> tuple[list, list]:
    """`ask` for a thread without an event loop (the readiness probe): (the replies to the proxy's
    own start-up commands, those to `commands`), errors as hiredis.ReplyError values. Raises
    OSError (ConnectionError when the server closes the connection first)."""
    setup = startup_commands(upstream, db, 2)
    payload = b"".join(hiredis.pack_command(cmd) for cmd in [*setup, *commands])
    wanted = len(setup) + len(commands)
    address = upstream.address
    with wrap_socket(socket.create_connection((address.host, address.port), timeout=timeout), address) as conn:
        conn.sendall(payload)
        reader = hiredis.Reader()
        replies = []
        while len(replies) < wanted:
            data = conn.recv(65536)
            if not data:
                raise ConnectionError("the connection was closed")
            reader.feed(data)
            while (reply := reader.gets()) is not False:
                replies.append(reply)
    return replies[:len(setup)], replies[len(setup):]


async def answers(upstream, timeout: float = 1.0) -> bool:
    try:
        (reply,) = await ask(upstream, [("PING",)], timeout)
    except (TimeoutError, OSError, ConnectionError):
        return False
    return not isinstance(reply, hiredis.ReplyError) or b"NOAUTH" in str(reply).encode()

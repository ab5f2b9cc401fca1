"""Start-up questions to the upstream over a short-lived connection: is it there, and what does it
say about itself (command table, number of databases)."""

from __future__ import annotations

import asyncio
import socket

import hiredis

from ..tls import upstream_ssl, wrap_socket
from .connection import startup_commands


async def ask(upstream, commands: list[tuple], timeout: float = 5.0, one_by_one: bool = False) -> list:
    """Run commands (after the proxy's own AUTH) and return their parsed replies; error replies
    come back as hiredis.ReplyError values. Raises OSError/TimeoutError when unreachable.
    `one_by_one`: as for `ask_blocking` (logins that may fail)."""
    setup = startup_commands(upstream, 0, 2)
    rounds = [setup + list(commands)] if not one_by_one else [setup, *([command] for command in commands)]
    reader_out, writer = await asyncio.wait_for(
        asyncio.open_connection(upstream.address.host, upstream.address.port, **upstream_ssl(upstream.address)),
        timeout
    )
    try:
        parser = hiredis.Reader()
        replies = []
        for batch in rounds:
            if not batch:
                continue
            writer.write(b"".join(hiredis.pack_command(cmd) for cmd in batch))
            wanted = len(replies) + len(batch)
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


def ask_blocking(upstream, commands: list[tuple], timeout: float, db: int = 0,
                 one_by_one: bool = False) -> tuple[list, list]:
    """`ask` for a thread without an event loop (the readiness probe): (the replies to the proxy's
    own start-up commands, those to `commands`), errors as hiredis.ReplyError values. Raises
    OSError (ConnectionError when the server closes the connection first). `one_by_one`: each of
    `commands` sent once the replies before it have arrived: Redis 7.2 to 8.x drop the reply of
    a failed AUTH that has replies pending before it (redis/redis#15640)."""
    setup = startup_commands(upstream, db, 2)
    rounds = [[*setup, *commands]] if not one_by_one else [setup, *([command] for command in commands)]
    address = upstream.address
    replies = []
    with wrap_socket(socket.create_connection((address.host, address.port), timeout=timeout), address) as conn:
        reader = hiredis.Reader()
        for batch in rounds:
            if not batch:
                continue
            conn.sendall(b"".join(hiredis.pack_command(cmd) for cmd in batch))
            wanted = len(replies) + len(batch)
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

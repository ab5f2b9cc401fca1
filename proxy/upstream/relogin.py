"""The proxy's login on a connection that may have replies in flight: a client's own connection
logged in again as another identity (AUTH as another application, a policy reload) or after the
client's RESET, which logs Redis's connection out.

Redis 7.2 to 8.x send no reply at all for an AUTH (or HELLO ... AUTH) that fails while replies to
earlier commands still wait in the connection's output buffer (redis/redis#15640): an AUTH counted
for one hidden reply would take the next command's reply, and every reply after it would go to the
command before. So the AUTH goes with a marker behind it, `PING` with an argument, each its own
entry. The login's entry judges the first reply it gets: `+OK` is AUTH's success; anything else is
a refusal, AUTH's own or, when Redis withheld it, the marker's reply standing in its place. A
refused login closes the connection, its requests queued behind answered with the refusal as for
a refused start-up: it would go on as the wrong user (after RESET, Redis's default user), and it
can no longer tell which reply is whose. Sans-IO: a receiver and the commands to send.
"""

from __future__ import annotations

import logging

import hiredis

from .. import errors
from ..pending import Pending, Receiver, hidden
from .connection import CLOSED

log = logging.getLogger("redis_guard.upstream")

MARKER = ("PING", "redis-guard:after-login")


def send_logged(conn, commands) -> None:
    """`commands` on `conn`, their replies nobody sees (the proxy's start-up commands on a
    client's behalf); a login among them checked (`LoginReply`), the marker behind it."""
    if not commands or conn.state is CLOSED:
        return
    for command in commands:
        data = hiredis.pack_command(tuple(command))
        user = login_user(command)
        if user is not None:
            conn.send(data, Pending(LoginReply(conn, user), 1))
            conn.send(hiredis.pack_command(MARKER), hidden(1))
        else:
            conn.send(data, hidden(1))


def login_user(command) -> str | None:
    """The user `command` logs in as ("default" for AUTH <password>), None for no login."""
    name = str(command[0]).lower()
    if name == "auth" and len(command) in (2, 3):
        return str(command[1]) if len(command) == 3 else "default"
    if name == "hello" and len(command) >= 5 and str(command[2]).lower() == "auth":
        return str(command[3])
    return None


class LoginReply(Receiver):
    """AUTH's reply on a connection the proxy logs in again, or the marker's in its place."""

    __slots__ = ("conn", "user", "head")

    def __init__(self, conn, user):
        self.conn = conn
        self.user = user
        self.head = b""  # (a reply cut across reads: what came of it so far)

    def deliver(self, pending, data: bytes, done: int) -> None:
        self.head += data
        if not done:
            return
        pending.remaining -= done
        reply, self.head = self.head, b""
        if reply[:1] not in (b"-", b"$"):  # (AUTH's +OK, HELLO's map; the marker's is a bulk string)
            return
        withheld = not reply.startswith((b"-WRONGPASS", b"-ERR"))
        refusal = errors.WRONGPASS if withheld else reply
        conn = self.conn
        log.warning("upstream %s: the proxy's login as %s on a connection in use was refused%s: closed",
                    conn.label, self.user, " (Redis sent no reply for it)" if withheld else
                    f": {reply.strip()[:200]!r}")
        conn.fail(f"login refused: {refusal.strip().decode('utf-8', 'replace')}", refused=True, reply=refusal)

    def pending_failed(self, pending, error: bytes, partial: bool) -> None:
        pending.remaining = 0

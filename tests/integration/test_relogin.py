"""The proxy's login on a connection with replies in flight (a client's own connection logged in
again, or after its RESET: proxy/upstream/relogin.py), against a real server: a refused login
closes the connection and answers the requests behind it with the refusal, and no reply ever
goes to another request, also on Redis 7.2+, which sends no reply for an AUTH that fails behind
unwritten replies (the Redis 8.x leg runs this file again against Redis 8.2)."""

from __future__ import annotations

import asyncio

import hiredis
import pytest

from proxy import errors
from proxy.config import parse_upstream
from proxy.pending import Pending, Receiver
from proxy.upstream.connection import CLOSED, open_connection
from proxy.upstream.relogin import send_logged
from tests.servers import RedisServer


class Recorder(Receiver):
    def __init__(self):
        self.replies = []

    def deliver(self, pending, data, done):
        self.replies.append(data)
        pending.remaining -= done

    def pending_failed(self, pending, error, partial):
        self.replies.append(error)
        pending.remaining = 0


@pytest.fixture(scope="module")
def server():
    server = RedisServer()
    import redis

    admin = redis.Redis(port=server.port)
    admin.acl_setuser("guard-app", enabled=True, passwords=["+app-secret"], commands=["+@all"], keys=["*"])
    yield server
    server.close()


def run(server, login: tuple) -> tuple[list[list[bytes]], bool]:
    """PING, then `login` behind it in the same write, then ECHO a, ECHO b: each request's replies,
    and whether the connection is still open."""

    async def go():
        loop = asyncio.get_running_loop()
        conn = open_connection(loop, parse_upstream(server.url), 0, 2, 5.0)
        for _ in range(200):
            if conn.state is not CLOSED and conn.transport is not None and not conn.pending:
                break
            await asyncio.sleep(0.01)
        recorders = [Recorder() for _ in range(3)]
        conn.send(hiredis.pack_command(("PING",)), Pending(recorders[0], 1, conn))
        send_logged(conn, [login])
        conn.send(hiredis.pack_command(("ECHO", "a")), Pending(recorders[1], 1, conn))
        conn.send(hiredis.pack_command(("ECHO", "b")), Pending(recorders[2], 1, conn))
        for _ in range(300):
            if all(r.replies for r in recorders):
                break
            await asyncio.sleep(0.01)
        still_open = conn.state is not CLOSED
        conn.close()
        return [r.replies for r in recorders], still_open

    return asyncio.run(go())


def test_a_login_that_passes_leaves_every_reply_in_its_place(server):
    replies, still_open = run(server, ("AUTH", "guard-app", "app-secret"))
    assert replies == [[b"+PONG\r\n"], [b"$1\r\na\r\n"], [b"$1\r\nb\r\n"]] and still_open


@pytest.mark.parametrize("login", [("AUTH", "nobody", "x"), ("AUTH", "guard-app", "wrong"),
                                   ("HELLO", "2", "AUTH", "nobody", "x")], ids=["no-user", "wrong-password", "hello"])
def test_a_refused_login_closes_the_connection_and_answers_the_rest_with_the_refusal(server, login):
    replies, still_open = run(server, login)
    assert replies[0] == [b"+PONG\r\n"]  # (answered before the login)
    assert not still_open
    for later in replies[1:]:  # never ECHO's reply of another request, never a wrong one
        assert later == [errors.WRONGPASS], replies

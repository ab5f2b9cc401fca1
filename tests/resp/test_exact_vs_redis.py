"""Check proxy.resp.exact against a real redis-server, row by row.

Runs only where `redis-server` is on PATH.  Each malformed row is sent after a
PING, so the test also shows that what came before the bad bytes was answered
before Redis replied with the protocol error and closed the connection."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator

import hiredis
import pytest

from proxy.resp.exact import ProtocolError
from tests.resp.test_exact import CASES, NEED, TOO_BIG_CASES, Case, Err

pytestmark = pytest.mark.skipif(shutil.which("redis-server") is None, reason="redis-server not on PATH")

TIMEOUT = 5.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def redis_port() -> Iterator[int]:
    port = _free_port()
    assert port != 6379
    proc = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + TIMEOUT
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(16) == b"+PONG\r\n":
                        break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise
                time.sleep(0.05)
        yield port
    finally:
        proc.kill()  # the Popen object signals exactly this pid
        proc.wait(timeout=TIMEOUT)


def read_until_closed(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes, bounded by TIMEOUT."""
    sock.settimeout(TIMEOUT)
    deadline = time.monotonic() + TIMEOUT
    out = bytearray()
    while time.monotonic() < deadline:
        chunk = sock.recv(65536)
        if not chunk:
            return bytes(out)
        out += chunk
    raise AssertionError(f"server did not close; got {bytes(out)!r}")


def read_replies(sock: socket.socket, count: int) -> list[object]:
    sock.settimeout(TIMEOUT)
    reader = hiredis.Reader()
    replies: list[object] = []
    while len(replies) < count:
        chunk = sock.recv(65536)
        assert chunk, f"server closed after {replies!r}"
        reader.feed(chunk)
        while (r := reader.gets()) is not False:
            replies.append(r)
    assert len(replies) == count and reader.gets() is False
    return replies


def _connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)


def _ids(cases: list[Case]) -> list[str]:
    return [c.id for c in cases]


ERRORS = [c for c in CASES if c.redis and isinstance(c.expect, Err)]
SKIPS = [c for c in CASES if c.redis and c.expect == []]
NEEDS = [c for c in CASES if c.redis and c.expect is NEED]
INLINE_OK = [c for c in CASES if c.redis and c.complete and c.expect and c.data[:1] != b"*"]
MULTIBULK_OK = [c for c in CASES if c.redis and c.complete and c.expect and c.data[:1] == b"*"]


@pytest.mark.parametrize("case", ERRORS, ids=_ids(ERRORS))
def test_error_reply_matches(redis_port: int, case: Case) -> None:
    with _connect(redis_port) as s:
        s.sendall(b"PING\r\n" + case.data)
        assert read_until_closed(s) == b"+PONG\r\n" + ProtocolError(case.expect.message).reply


@pytest.mark.parametrize("data,message", [c[1:] for c in TOO_BIG_CASES], ids=[c[0] for c in TOO_BIG_CASES])
def test_too_big_reply_matches(redis_port: int, data: bytes, message: str) -> None:
    with _connect(redis_port) as s:
        s.sendall(b"PING\r\n" + data)
        assert read_until_closed(s) == b"+PONG\r\n" + ProtocolError(message).reply


@pytest.mark.parametrize("case", SKIPS, ids=_ids(SKIPS))
def test_skipped_request(redis_port: int, case: Case) -> None:
    with _connect(redis_port) as s:
        s.sendall(case.data + b"PING\r\n")
        assert read_replies(s, 1) == [b"PONG"]


@pytest.mark.parametrize("case", NEEDS, ids=_ids(NEEDS))
def test_need_more_gets_no_reply(redis_port: int, case: Case) -> None:
    with _connect(redis_port) as s:
        s.sendall(case.data)
        s.settimeout(0.2)
        with pytest.raises(socket.timeout):
            s.recv(1)


@pytest.mark.parametrize("case", INLINE_OK, ids=_ids(INLINE_OK))
def test_inline_args_match(redis_port: int, case: Case) -> None:
    # Tokens are split independently, so prefixing "RPUSH key " makes every
    # parsed argument a list element that LRANGE then shows exactly.
    key = f"exact:{case.id}".encode()
    with _connect(redis_port) as s:
        s.sendall(b"DEL " + key + b"\r\nRPUSH " + key + b" " + case.data
                  + b"*4\r\n$6\r\nLRANGE\r\n$%d\r\n%s\r\n$1\r\n0\r\n$2\r\n-1\r\n" % (len(key), key))
        _, pushed, listed = read_replies(s, 3)
        assert pushed == len(case.expect)
        assert listed == case.expect


@pytest.mark.parametrize("case", MULTIBULK_OK, ids=_ids(MULTIBULK_OK))
def test_multibulk_accepted(redis_port: int, case: Case) -> None:
    with _connect(redis_port) as s:
        s.sendall(case.data + b"PING\r\n")
        reply, pong = read_replies(s, 2)
        assert pong == b"PONG"
        assert not (isinstance(reply, hiredis.ReplyError) and "Protocol error" in str(reply))
        args = case.expect
        if args == [b"PING"]:
            assert reply == b"PONG"
        elif args[0] == b"ECHO" and len(args) == 2:
            assert reply == args[1]

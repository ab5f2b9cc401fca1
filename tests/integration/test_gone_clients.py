"""A client that goes away (closes, or half-closes: shutdown of its write side) with a command that
waits in flight: as with Redis, which frees such a client at once, nothing is popped, moved or
added to a group's pending list for it afterwards (the proxy half-closes the upstream connection
that carries the command: `proxy/session/gone.py`). Each case: the command sent through the proxy,
the server seen blocking it, the client gone, the server seen freeing it, then another client's
write, and the data checked on the server directly, in database 0 (a lent connection) and after
SELECT 1 (the client's pinned connection)."""

import signal
import socket
import time

import hiredis
import pytest
import redis

from tests.servers import BUSY_SCRIPT, ProxyProcess, RedisServer, wait_for


@pytest.fixture(scope="module")
def upstream():
    server = RedisServer()
    yield server
    server.close()


@pytest.fixture(scope="module")
def gone_proxy(upstream):
    process = ProxyProcess(upstream.url)
    yield process
    process.stop()


def blocked_clients(server) -> int:
    client = redis.Redis(port=server.port)
    try:
        return client.info("clients")["blocked_clients"]
    finally:
        client.close()


def replies(sock, count: int, timeout: float = 5.0) -> list:
    """`count` replies read off `sock` (errors as values)."""
    reader = hiredis.Reader()
    out = []
    sock.settimeout(timeout)
    while len(out) < count:
        reply = reader.gets()
        if reply is not False:
            out.append(reply)
            continue
        data = sock.recv(65536)
        if not data:
            raise ConnectionError(f"closed after {out!r}")
        reader.feed(data)
    return out


def read_to_eof(sock, timeout: float = 5.0) -> bytes:
    sock.settimeout(timeout)
    data = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return data
        data += chunk


def send(sock, *commands) -> None:
    sock.sendall(b"".join(hiredis.pack_command(tuple(cmd)) for cmd in commands))


# (name, set-up on the server, the command that waits, another client's write, check on the server)
CASES = {
    "blpop": ([], ("BLPOP", "q", "0"), ("LPUSH", "q", "x"), lambda r: r.llen("q") == 1),
    "brpop": ([], ("BRPOP", "q", "0"), ("LPUSH", "q", "x"), lambda r: r.llen("q") == 1),
    "blmpop": ([], ("BLMPOP", "0", "1", "q", "LEFT"), ("LPUSH", "q", "x"), lambda r: r.llen("q") == 1),
    "blmove": ([], ("BLMOVE", "q", "dst", "LEFT", "RIGHT", "0"), ("LPUSH", "q", "x"),
               lambda r: r.llen("q") == 1 and r.llen("dst") == 0),
    "brpoplpush": ([], ("BRPOPLPUSH", "q", "dst", "0"), ("LPUSH", "q", "x"),
                   lambda r: r.llen("q") == 1 and r.llen("dst") == 0),
    "bzpopmin": ([], ("BZPOPMIN", "z", "0"), ("ZADD", "z", "1", "a"), lambda r: r.zcard("z") == 1),
    "bzpopmax": ([], ("BZPOPMAX", "z", "0"), ("ZADD", "z", "1", "a"), lambda r: r.zcard("z") == 1),
    "bzmpop": ([], ("BZMPOP", "0", "1", "z", "MIN"), ("ZADD", "z", "1", "a"), lambda r: r.zcard("z") == 1),
    "xread": ([("XADD", "s", "1-1", "f", "v")], ("XREAD", "BLOCK", "0", "STREAMS", "s", "$"),
              ("XADD", "s", "*", "f", "v"), lambda r: r.xlen("s") == 2),
    "xreadgroup": ([("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM")],
                   ("XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", "s", ">"),
                   ("XADD", "s", "*", "f", "v"),
                   lambda r: r.xpending("s", "g")["pending"] == 0 and r.xlen("s") == 1),
    # WAIT for a replica that does not exist waits forever; no data, but the client is freed.
    "wait": ([("SET", "w", "1")], ("WAIT", "1", "0"), ("SET", "w", "2"), lambda r: r.get("w") == b"2"),
}


@pytest.mark.parametrize("db", [0, 1])
@pytest.mark.parametrize("how", ["half-close", "close"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_nothing_is_taken_for_a_client_gone_while_it_waits(upstream, gone_proxy, case, how, db):
    setup, command, write, check = CASES[case]
    direct = redis.Redis(port=upstream.port, db=db)
    direct.flushdb()
    for args in setup:
        direct.execute_command(*args)
    assert blocked_clients(upstream) == 0
    sock = socket.create_connection(("127.0.0.1", gone_proxy.port))
    try:
        if db:
            send(sock, ("SELECT", str(db)))
            assert replies(sock, 1) == [b"OK"]
        send(sock, command)
        wait_for(lambda: blocked_clients(upstream) == 1, 10, f"{case} blocked on the server")
        if how == "half-close":
            sock.shutdown(socket.SHUT_WR)
        else:
            sock.close()
        wait_for(lambda: blocked_clients(upstream) == 0, 10, f"the server freeing the {case} of a gone client")
        direct.execute_command(*write)
        time.sleep(0.1)  # (a pop for nobody would be done by now)
        assert check(direct), f"{case}: data taken for a client that is gone"
        if how == "half-close":
            assert read_to_eof(sock) == b""  # no reply: the proxy closes, as Redis does
    finally:
        sock.close()
        direct.close()


def test_an_inline_blpop_sent_by_nc_is_cut_too(upstream, gone_proxy):
    """`printf 'BLPOP q 0\\r\\n' | nc HOST PORT`: an inline command, then EOF."""
    direct = redis.Redis(port=upstream.port)
    direct.delete("q")
    sock = socket.create_connection(("127.0.0.1", gone_proxy.port))
    try:
        sock.sendall(b"BLPOP q 0\r\n")
        wait_for(lambda: blocked_clients(upstream) == 1, 10, "the BLPOP blocked on the server")
        sock.shutdown(socket.SHUT_WR)
        wait_for(lambda: blocked_clients(upstream) == 0, 10, "the server freeing the gone client's BLPOP")
        direct.lpush("q", "x")
        time.sleep(0.1)
        assert direct.llen("q") == 1
    finally:
        sock.close()
        direct.close()


def test_what_was_popped_before_the_half_close_still_arrives(upstream, gone_proxy):
    """LPUSH then BLPOP pipelined, then EOF: the BLPOP is sent after the LPUSH has answered (a
    lent connection), after the EOF; Redis pops at once, then frees its client: the element reaches
    the client, which can still read."""
    direct = redis.Redis(port=upstream.port)
    direct.delete("q")
    sock = socket.create_connection(("127.0.0.1", gone_proxy.port))
    try:
        send(sock, ("LPUSH", "q", "x"), ("BLPOP", "q", "0"))
        sock.shutdown(socket.SHUT_WR)
        assert replies(sock, 2) == [1, [b"q", b"x"]]
        assert read_to_eof(sock) == b""
        assert direct.llen("q") == 0
        assert blocked_clients(upstream) == 0
    finally:
        sock.close()
        direct.close()


def test_a_blpop_in_a_transaction_does_not_wait_and_is_answered(upstream, gone_proxy):
    direct = redis.Redis(port=upstream.port)
    direct.delete("q")
    direct.lpush("q", "x")
    sock = socket.create_connection(("127.0.0.1", gone_proxy.port))
    try:
        send(sock, ("MULTI",), ("BLPOP", "q", "0"), ("BLPOP", "q", "0"), ("EXEC",))
        sock.shutdown(socket.SHUT_WR)
        assert replies(sock, 4) == [b"OK", b"QUEUED", b"QUEUED", [[b"q", b"x"], None]]
        assert read_to_eof(sock) == b""
    finally:
        sock.close()
        direct.close()


def test_ordinary_replies_still_reach_a_half_closed_client(upstream, gone_proxy):
    sock = socket.create_connection(("127.0.0.1", gone_proxy.port))
    try:
        send(sock, ("SET", "k", "v"), ("GET", "k"), ("CLIENT", "SETNAME", "pinned"), ("GET", "k"))
        sock.shutdown(socket.SHUT_WR)
        assert replies(sock, 4) == [b"OK", b"v", b"OK", b"v"]
        assert read_to_eof(sock) == b""
    finally:
        sock.close()


def test_a_script_is_not_cut(upstream, gone_proxy):
    """Redis runs a script to its end whoever waits: the half-closed client gets its reply."""
    sock = socket.create_connection(("127.0.0.1", gone_proxy.port))
    try:
        send(sock, ("EVAL", BUSY_SCRIPT, "0", "300"))
        sock.shutdown(socket.SHUT_WR)
        assert replies(sock, 1) == [1]
    finally:
        sock.close()


def test_sigterm_does_not_wait_for_a_blpop(own_redis):
    process = ProxyProcess(own_redis.url)  # shutdown_timeout: 10 (configs/passthrough.yaml)
    sock = socket.create_connection(("127.0.0.1", process.port))
    try:
        send(sock, ("BLPOP", "sigterm:q", "0"))
        wait_for(lambda: blocked_clients(own_redis) == 1, 10, "the BLPOP blocked on the server")
        started = time.monotonic()
        process.process.send_signal(signal.SIGTERM)
        assert process.process.wait(10) == 0
        took = time.monotonic() - started
        assert took < 2.5, f"SIGTERM waited {took:.1f}s for a BLPOP 0"
        assert read_to_eof(sock) == b""  # closed, not answered
        wait_for(lambda: "1 client(s) waiting in a blocking command closed at once" in process.log, 5,
                 "the shutdown's line about the BLPOP cut")
        direct = redis.Redis(port=own_redis.port)
        assert blocked_clients(own_redis) == 0
        direct.lpush("sigterm:q", "x")
        assert direct.llen("sigterm:q") == 1
        direct.close()
    finally:
        sock.close()
        process.stop()

"""Inline and malformed requests: the proxy answers exactly what the same redis-server answers."""

import socket
import time

import pytest

from tests.servers import exchange, read_until_quiet

# (name, bytes). Each is sent on a fresh connection directly and through the proxy; the replies
# and whether the server closed the connection must be the same.
CASES = [
    ("inline ping", b"PING\r\n"),
    ("inline without CR", b"PING\n"),
    ("inline quoted", b'SET "inline:k" "a b\\x41\\n"\r\nGET inline:k\r\n'),
    ("inline single quoted", b"ECHO 'it''s'\r\nECHO 'a\\'b'\r\n"),
    ("inline blank lines", b"\r\n\r\n   \r\nPING\r\n"),
    ("inline unbalanced quotes", b'PING\r\nECHO "abc\r\nPING\r\n'),
    ("inline quote not followed by space", b'ECHO "a"b\r\n'),
    ("inline then resp", b"PING\r\n*2\r\n$4\r\nECHO\r\n$2\r\nhi\r\nECHO x\r\n"),
    ("empty multibulk", b"*0\r\n*-1\r\nPING\r\n"),
    ("negative multibulk", b"*-5\r\nPING\r\n"),
    ("multibulk count not a number", b"PING\r\n*x\r\n"),
    ("multibulk count with plus", b"*+1\r\n$4\r\nPING\r\n"),
    ("multibulk count leading zero", b"*01\r\n$4\r\nPING\r\n"),
    ("multibulk count too big", b"*3000000000\r\n"),
    ("bulk length negative", b"*1\r\n$-1\r\n"),
    ("bulk length not a number", b"*2\r\n$4\r\nECHO\r\n$abc\r\n"),
    ("bulk length over the limit", b"*2\r\n$4\r\nECHO\r\n$2000000000\r\n"),
    ("argument without dollar", b"*2\r\n$4\r\nECHO\r\n+hi\r\n"),
    ("integer argument", b"*2\r\n$4\r\nECHO\r\n:1\r\n"),
    ("nested array argument", b"*1\r\n*1\r\n$4\r\nPING\r\n"),
    ("resp3 set as request", b"~1\r\n$4\r\nPING\r\n"),
    ("resp3 map keyed by an array", b"*1\r\n%1\r\n*0\r\n$0\r\n\r\n"),
    ("good then bad in one read", b"*1\r\n$4\r\nPING\r\n*1\r\n+PING\r\n"),
    ("bulk body not followed by crlf", b"*2\r\n$4\r\nECHO\r\n$2\r\nhiXY*1\r\n$4\r\nPING\r\n"),
    ("unknown command", b"*1\r\n$7\r\nNOSUCHC\r\n"),
    ("wrong arity", b"*1\r\n$3\r\nGET\r\n"),
    ("reset with an argument", b"SELECT 1\r\nRESET x\r\nPING\r\n"),
    ("too big inline", b"A" * (70 * 1024)),
    ("too big mbulk count string", b"*" + b"1" * (70 * 1024)),
    ("too big bulk count string", b"*1\r\n$" + b"1" * (70 * 1024)),
    ("count of millions, then not an argument", b"*9999994\r\n$4\r\nHSET\r\n$1\r\nh\r\n*3\r\n"),
    # Once replies are unpaired (streamorder.py), what the proxy answers itself comes after them.
    ("subscribe then quit", b"SUBSCRIBE proto:ch\r\nQUIT\r\n"),
    ("subscribe, ping, quit", b"SUBSCRIBE proto:ch\r\nPING\r\nQUIT\r\n"),
    ("subscribe then malformed", b"SUBSCRIBE proto:ch\r\n*1\r\n$x\r\n"),
    ("unsubscribe then malformed", b"*1\r\n$11\r\nUNSUBSCRIBE\r\n*1\r\n$x\r\n"),
    ("reset on a stream, then quit", b"SUBSCRIBE proto:ch\r\nRESET\r\nPING\r\nQUIT\r\n"),
    ("replies off, then quit", b"CLIENT REPLY OFF\r\nSET proto:k 1\r\nQUIT\r\n"),
    ("replies off, then malformed", b"CLIENT REPLY OFF\r\nSET proto:k 1\r\n*1\r\n$x\r\n"),
    ("reply skipped, then quit", b"CLIENT REPLY SKIP\r\nSET proto:k 1\r\nGET proto:k\r\nQUIT\r\n"),
    ("reply skipped, then malformed", b"CLIENT REPLY SKIP\r\n*1\r\n$x\r\n"),
]


@pytest.mark.parametrize("name,payload", CASES, ids=[c[0] for c in CASES])
def test_same_answer_as_redis(redis_server, proxy, name, payload):
    direct = exchange(redis_server.port, payload)
    through = exchange(proxy.port, payload)
    assert through == direct


@pytest.mark.parametrize("name,payload", CASES, ids=[c[0] for c in CASES])
def test_same_answer_one_byte_at_a_time(redis_server, proxy, name, payload):
    if len(payload) > 200:
        pytest.skip("long payloads are covered whole")

    def trickle(port):
        sock = socket.create_connection(("127.0.0.1", port), timeout=3)
        try:
            for i in range(len(payload)):
                try:
                    sock.sendall(payload[i:i + 1])
                except (BrokenPipeError, ConnectionResetError):
                    break
                time.sleep(0.001)
            return read_until_quiet(sock)
        finally:
            sock.close()

    assert trickle(proxy.port) == trickle(redis_server.port)


def test_claimed_size_is_not_allocated(proxy):
    """A client claiming a 500 MB argument and sending 10 bytes costs nothing and gets no reply
    until it sends the rest; the proxy keeps serving everyone else."""
    sock = socket.create_connection(("127.0.0.1", proxy.port), timeout=3)
    sock.sendall(b"*2\r\n$4\r\nECHO\r\n$500000000\r\n0123456789")
    other = exchange(proxy.port, b"PING\r\n")
    assert other == (b"+PONG\r\n", False)
    sock.settimeout(0.3)
    with pytest.raises(socket.timeout):
        sock.recv(10)
    sock.close()


def test_protocol_error_does_not_touch_shared_connection(proxy):
    """A client sending garbage is answered and dropped; others on the same shared upstream
    connection are not affected."""
    import redis

    client = redis.Redis(port=proxy.port)
    client.set("shared:ok", "1")
    for payload in (b"*1\r\n+PING\r\n", b"*2\r\n$4\r\nECHO\r\n:1\r\n", b"*1\r\n*1\r\n$4\r\nPING\r\n"):
        reply, closed = exchange(proxy.port, payload)
        assert closed and reply.startswith(b"-ERR Protocol error")
        assert client.get("shared:ok") == b"1"

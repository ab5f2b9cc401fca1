"""Upstream faults, slow clients, shutdown and workers: the proxy stays up and bounded."""

import os
import signal
import socket
import threading
import time

import pytest
import redis

from proxy import errors
from tests.servers import BUSY_SCRIPT, ProxyProcess, RedisServer, exchange, rss_mb


def test_upstream_down_closes_the_client_promptly_then_recovers(own_redis, own_proxy):
    """While Redis is down a client's command ends its connection at once, as Redis going away
    would: client libraries see a connection error (not a command's error reply) and reconnect."""
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    client = redis.Redis(port=own_proxy.port, socket_timeout=5, retry=Retry(NoBackoff(), 0))
    client.set("fault:k", "before")
    own_redis.stop()
    for _ in range(3):
        started = time.monotonic()
        with pytest.raises(redis.ConnectionError):
            client.get("fault:k")
        assert time.monotonic() - started < 3
    own_redis.start()  # same port, empty dataset (no persistence)
    deadline = time.monotonic() + 10
    while True:
        try:
            assert client.set("fault:k", "after") is True
            break
        except redis.ConnectionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    assert client.get("fault:k") == b"after"
    assert "unavailable" in own_proxy.log


@pytest.mark.parametrize("protocol", [2, 3])
def test_redis_py_retry_rides_out_an_upstream_restart(own_redis, own_proxy, protocol):
    """redis-py's own retry on connection errors is all a client needs across a restart."""
    from redis.backoff import ExponentialBackoff
    from redis.retry import Retry

    client = redis.Redis(port=own_proxy.port, protocol=protocol, socket_timeout=5,
                         retry=Retry(ExponentialBackoff(cap=0.5, base=0.05), 40),
                         retry_on_error=[redis.ConnectionError])
    assert client.set("retry:k", "1") is True
    own_redis.stop()
    restarted = threading.Timer(1.0, own_redis.start)
    restarted.start()
    try:
        assert client.set("retry:k", "2") is True  # retried until Redis is back
        assert client.get("retry:k") == b"2"
    finally:
        restarted.join()


def test_in_flight_requests_get_errors_when_upstream_dies(own_redis, own_proxy):
    """A blocked request in flight when Redis dies is answered with an error, never left hanging,
    and is not retried."""
    client = redis.Redis(port=own_proxy.port, socket_timeout=10)
    result = {}

    def blocked():
        try:
            result["value"] = client.blpop(["fault:never"], timeout=30)
        except Exception as exc:  # the error is the expected outcome
            result["error"] = exc

    thread = threading.Thread(target=blocked)
    thread.start()
    time.sleep(0.3)
    started = time.monotonic()
    own_redis.stop(signal.SIGKILL)
    thread.join(10)
    assert not thread.is_alive()
    assert "error" in result and time.monotonic() - started < 5


def test_shared_connection_drop_errors_in_flight_only(own_redis, own_proxy):
    client = redis.Redis(port=own_proxy.port)
    client.set("drop:k", "v")
    killer = redis.Redis(port=own_redis.port)
    # Kill the proxy's shared upstream connection from the server side.
    for entry in killer.client_list():
        if entry["cmd"] in ("get", "set"):
            killer.client_kill_filter(_id=entry["id"])
    # The next command either fails once (lost with the connection) or succeeds on a new one.
    try:
        client.get("drop:k")
    except redis.ConnectionError:
        pass
    assert client.get("drop:k") == b"v"


def _read_exactly(sock: socket.socket, size: int, timeout: float = 10) -> int:
    """Read `size` bytes or fail: how many came."""
    sock.settimeout(timeout)
    received = 0
    while received < size:
        chunk = sock.recv(1 << 20)
        assert chunk, f"closed after {received} of {size} bytes"
        received += len(chunk)
    return received


BIG_REPLY = b"$1048576\r\n" + b"x" * (1024 * 1024) + b"\r\n"


def _limited_proxy(tmp_path, upstream_url: str, limit: int) -> ProxyProcess:
    config = tmp_path / "limits.yaml"
    config.write_text(f"limits: {{client_output_buffer: {limit}}}\n")
    return ProxyProcess(upstream_url, str(config))


def test_a_reader_that_stops_holds_up_nobody(own_redis, own_proxy):
    """A client pipelines 60 MB of replies and never reads them: they are taken off the shared
    connection at once and buffered for it alone (under the default client_output_buffer), and a
    client on the same shared connection is answered meanwhile, the stalled one still connected.
    (Before, the shared connection stopped for as long as the stalled client stayed.)"""
    direct = redis.Redis(port=own_redis.port)
    direct.set("big:v", b"x" * (1024 * 1024))
    sock = socket.create_connection(("127.0.0.1", own_proxy.port))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    sock.sendall(b"*2\r\n$3\r\nGET\r\n$5\r\nbig:v\r\n" * 60)
    time.sleep(0.5)
    other = redis.Redis(port=own_proxy.port, socket_timeout=10)
    for n in range(50):
        assert other.set(f"other:{n}", n) is True and other.get(f"other:{n}") == str(n).encode()
    sock.settimeout(0.5)
    assert sock.recv(16) == b"$1048576\r\n" + b"x" * 6  # still connected, its replies waiting for it
    sock.close()


def test_a_reader_far_behind_stays_under_its_output_limit_and_is_not_disconnected(own_redis, tmp_path):
    """The same with 200 MB against a 64 MB client_output_buffer: the reply window sends its
    requests upstream only as it reads, so it never nears the limit (its window, 1 MB, plus at
    most 32 replies not yet sized): not disconnected, the proxy's memory bounded, all 200 replies
    intact once it reads. (Before, it was disconnected.)"""
    direct = redis.Redis(port=own_redis.port)
    direct.set("big:v", b"x" * (1024 * 1024))
    process = _limited_proxy(tmp_path, own_redis.url, 64 * 1024 * 1024)
    try:
        before = rss_mb(process.process.pid)
        sock = socket.create_connection(("127.0.0.1", process.port))
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        sock.sendall(b"*2\r\n$3\r\nGET\r\n$5\r\nbig:v\r\n" * 200)
        time.sleep(2)
        grown = rss_mb(process.process.pid) - before
        assert grown < 64, f"proxy grew by {grown:.0f} MB holding replies for a slow reader"
        assert _read_exactly(sock, 200 * len(BIG_REPLY), 60) == 200 * len(BIG_REPLY)
        assert "client_output_buffer" not in process.log
        sock.close()
    finally:
        process.stop()


def test_a_slow_reader_under_the_limit_gets_every_reply(own_redis, tmp_path):
    """Replies are buffered for a client that reads late, up to the limit: all 40 MB arrive intact."""
    direct = redis.Redis(port=own_redis.port)
    direct.set("big:v", b"x" * (1024 * 1024))
    process = _limited_proxy(tmp_path, own_redis.url, 64 * 1024 * 1024)
    try:
        sock = socket.create_connection(("127.0.0.1", process.port))
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        sock.sendall(b"*2\r\n$3\r\nGET\r\n$5\r\nbig:v\r\n" * 40)
        time.sleep(1)
        assert _read_exactly(sock, len(BIG_REPLY) * 40) == len(BIG_REPLY) * 40
        sock.close()
    finally:
        process.stop()


def test_a_slow_reader_on_its_own_connection_is_paused_not_disconnected(own_redis, tmp_path):
    """On a connection of the client's own (here: after CLIENT SETNAME) nobody else waits, so
    the proxy stops reading from Redis for it instead of buffering: 200 MB arrive intact with a
    16 MB limit."""
    direct = redis.Redis(port=own_redis.port)
    direct.set("big:v", b"x" * (1024 * 1024))
    process = _limited_proxy(tmp_path, own_redis.url, 16 * 1024 * 1024)
    try:
        before = rss_mb(process.process.pid)
        sock = socket.create_connection(("127.0.0.1", process.port))
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        sock.sendall(b"CLIENT SETNAME mine\r\n")
        sock.settimeout(5)
        assert sock.recv(5) == b"+OK\r\n"
        sock.sendall(b"*2\r\n$3\r\nGET\r\n$5\r\nbig:v\r\n" * 200)
        time.sleep(2)
        grown = rss_mb(process.process.pid) - before
        assert grown < 60, f"proxy grew by {grown:.0f} MB holding replies for a slow reader"
        assert _read_exactly(sock, len(BIG_REPLY) * 200) == len(BIG_REPLY) * 200
        sock.close()
    finally:
        process.stop()


def test_sigterm_finishes_in_flight_then_exits_zero(own_redis):
    process = ProxyProcess(own_redis.url)
    client = redis.Redis(port=process.port, socket_timeout=10)
    result = {}

    def slow():
        client.rpush("sigterm:later", "x")
        # A script busy for 0.6 s is a reply in flight: finished (a command that waits is not
        # waited for: test_gone_clients.py).
        result["value"] = client.execute_command("EVAL", BUSY_SCRIPT, "0", "600")
        result["done"] = True

    thread = threading.Thread(target=slow)
    thread.start()
    time.sleep(0.2)
    process.process.send_signal(signal.SIGTERM)
    thread.join(10)
    assert result.get("done") and result["value"] == 1  # the script's reply, not an error
    assert process.process.wait(10) == 0
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", process.port), timeout=1).close()


def test_workers_share_one_port(own_redis):
    from tests.servers import PASSTHROUGH

    process = ProxyProcess(own_redis.url, PASSTHROUGH, "--workers", "2")
    try:
        assert "2 workers" in process.log
        for i in range(20):
            client = redis.Redis(port=process.port)
            client.set(f"worker:{i}", i)
            assert client.get(f"worker:{i}") == str(i).encode()
            client.close()
        children = [int(p) for p in os.popen(f"pgrep -P {process.process.pid}").read().split()]
        assert len(children) == 2
    finally:
        assert process.stop() == 0


def test_no_upstream_configured_starts_a_local_redis(tmp_path):
    """The quick start: no upstream in the config and nothing on 6379 → a local redis-server."""
    probe = socket.socket()
    if probe.connect_ex(("127.0.0.1", 6379)) == 0:
        probe.close()
        pytest.skip("something answers on 127.0.0.1:6379; the proxy would use it")
    probe.close()
    process = ProxyProcess(None)
    try:
        assert "started redis-server on 127.0.0.1:" in process.log
        client = redis.Redis(port=process.port)
        assert client.ping() is True
    finally:
        assert process.stop() == 0


@pytest.mark.parametrize("protocol", [2, 3])
def test_auth_after_requirepass_is_set(own_redis, own_proxy, protocol):
    """A client's AUTH is the proxy's to answer, against its URL's credentials (none here: Redis's
    reply for that), and never reaches Redis (issue 49); the proxy's connections, authenticated
    before the password was set, go on. (Set on the server: through the proxy CONFIG SET
    requirepass is refused, test_config_requirepass.py.)"""
    client = redis.Redis(port=own_proxy.port, protocol=protocol, db=2, single_connection_client=True)
    admin = redis.Redis(port=own_redis.port, single_connection_client=True)  # (logged in before the password)
    client.set("auth:k", "v")
    admin.config_set("requirepass", "pw")
    try:
        with pytest.raises(redis.exceptions.AuthenticationError, match="without any password configured"):
            client.auth("pw")
        assert client.get("auth:k") == b"v"  # still in database 2
    finally:
        admin.config_set("requirepass", "")
        admin.close()


def test_server_refusal_at_start_up_reaches_the_client(tmp_path):
    """With a password on the server and none given to the proxy, clients see Redis's own
    NOAUTH replies, as they would directly; their AUTH cannot log the proxy in (it is answered
    against the proxy's URL, which has no password)."""
    server = RedisServer(None, "--requirepass", "pw")
    process = ProxyProcess(server.url)
    try:
        noauth = exchange(server.port, b"GET k\r\n")[0]
        reply, _ = exchange(process.port, b"GET k\r\nAUTH pw\r\nGET k\r\n")
        assert reply == noauth + errors.AUTH_NOPASS + noauth
    finally:
        process.stop()
        server.close()


@pytest.mark.parametrize("protocol", [2, 3])
def test_upstream_credentials_and_database_from_the_url(protocol):
    """The proxy authenticates its own connections (shared and dedicated) with the URL's user,
    password and database; clients need no credentials of their own."""
    server = RedisServer(None, "--requirepass", "s3cret")
    process = ProxyProcess(f"redis://:s3cret@127.0.0.1:{server.port}/2")
    try:
        client = redis.Redis(port=process.port, protocol=protocol)
        assert client.set("creds:k", "v") is True
        pipe = client.pipeline(transaction=True)  # a dedicated connection, authenticated too
        pipe.get("creds:k").incr("creds:n")
        assert pipe.execute() == [b"v", 1]
        direct = redis.Redis(port=server.port, password="s3cret", db=2)
        assert direct.get("creds:k") == b"v"
        assert redis.Redis(port=server.port, password="s3cret", db=0).get("creds:k") is None
        assert "s3cret" not in process.log  # the ready line shows the URL with the password hidden
    finally:
        process.stop()
        server.close()

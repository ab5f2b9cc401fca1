"""The reply window, limits.max_memory, max_clients and client_idle_timeout, with real processes:
a client that does not read costs about its window, delays nobody and loses nothing; one that
reads slowly is never disconnected; the proxy's buffers stay under max_memory."""

import socket
import threading
import time
import urllib.request

import pytest
import redis

from tests.servers import ProxyProcess, free_port, rss_mb, wait_for

VALUE = b"x" * (1024 * 1024)
BIG_REPLY = b"$1048576\r\n" + VALUE + b"\r\n"
GET_BIG = b"*2\r\n$3\r\nGET\r\n$5\r\nbig:v\r\n"


def _proxy(tmp_path, upstream_url: str, limits: str, *extra: str) -> ProxyProcess:
    config = tmp_path / "limits.yaml"
    config.write_text(f"policy: none\nlimits: {{{limits}}}\n")
    return ProxyProcess(upstream_url, str(config), *extra)


def _metric(port: int, name: str) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        for line in response.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
    return 0.0


def test_a_reading_client_gets_a_pipeline_of_600_one_megabyte_replies(own_redis, own_proxy):
    """redis-py's pipeline of 600 GETs of a 1 MB value (600 MB of replies, far past the 256 MB
    client_output_buffer) completes through the proxy, as it does directly."""
    redis.Redis(port=own_redis.port).set("big:v", VALUE)
    client = redis.Redis(port=own_proxy.port, socket_timeout=60)
    pipe = client.pipeline(transaction=False)
    for _ in range(600):
        pipe.get("big:v")
    replies = pipe.execute()
    assert len(replies) == 600 and all(reply == VALUE for reply in replies)
    assert client.ping() is True


@pytest.mark.serial  # compares times
def test_a_reading_clients_pipeline_of_large_replies_is_not_much_slower_than_direct(own_redis, own_proxy):
    """The window slides (a reply completed lets the next command go): 600 GETs of 1 MB through
    the proxy take under 2.5 times what they take directly, measured in the same test (the best
    of two runs each, the machine being shared)."""
    redis.Redis(port=own_redis.port).set("big:v", VALUE)

    def pipeline_time(port: int) -> float:
        client = redis.Redis(port=port, socket_timeout=60)
        client.ping()
        pipe = client.pipeline(transaction=False)
        for _ in range(600):
            pipe.get("big:v")
        started = time.monotonic()
        replies = pipe.execute()
        elapsed = time.monotonic() - started
        assert len(replies) == 600 and all(reply == VALUE for reply in replies)
        client.close()
        return elapsed

    direct = min(pipeline_time(own_redis.port) for _ in range(2))
    proxied = min(pipeline_time(own_proxy.port) for _ in range(2))
    print(f"600 x 1 MB GET pipeline: direct {direct:.2f} s, through the proxy {proxied:.2f} s")
    assert proxied < 2.5 * direct + 0.5, f"through the proxy {proxied:.2f} s, directly {direct:.2f} s"


MGET_KEYS = 2000
MGET_VALUE = 10 * 1024


def _mget_reply() -> bytes:
    return b"*%d\r\n" % MGET_KEYS + b"".join(
        b"$%d\r\n%s\r\n" % (MGET_VALUE, (b"%05d" % n) * (MGET_VALUE // 5)) for n in range(MGET_KEYS))


def test_small_replies_then_huge_ones_cost_the_window_plus_one_reply(own_redis, own_proxy):
    """A client that gets a small reply first (PING), then pipelines 30 MGETs of 2,000 values of
    10 KB (20 MB each, 600 MB in all) and does not read: the proxy grows by about its window plus
    one reply, Redis holds no more for the proxy, a second client is answered within 50 ms
    meanwhile, and every reply arrives intact once the first one reads."""
    direct = redis.Redis(port=own_redis.port)
    direct.mset({f"mv:{n}": (b"%05d" % n) * (MGET_VALUE // 5) for n in range(MGET_KEYS)})
    mget = b"*%d\r\n$4\r\nMGET\r\n" % (MGET_KEYS + 1) + b"".join(
        b"$%d\r\n%s\r\n" % (len(key), key) for key in (b"mv:%d" % n for n in range(MGET_KEYS)))
    pid = own_proxy.process.pid
    other = redis.Redis(port=own_proxy.port, socket_timeout=10)
    other.ping()
    before = rss_mb(pid)
    sock = socket.create_connection(("127.0.0.1", own_proxy.port))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    sock.sendall(b"*1\r\n$4\r\nPING\r\n")
    assert sock.recv(7) == b"+PONG\r\n"
    sender = threading.Thread(target=sock.sendall, args=(mget * 30,), daemon=True)
    sender.start()  # the proxy stops reading it: sendall blocks until the client reads
    latencies = []
    peak = before
    omem = 0
    deadline = time.monotonic() + 4
    n = 0
    while time.monotonic() < deadline:
        started = time.monotonic()
        assert other.set(f"other:{n}", n) is True and other.get(f"other:{n}") == str(n).encode()
        latencies.append((time.monotonic() - started) / 2)
        peak = max(peak, rss_mb(pid))
        if n % 10 == 0:
            omem = max([omem] + [int(entry["omem"]) for entry in direct.client_list()])
        n += 1
        time.sleep(0.01)
    print(f"PING then 30 MGETs unread: proxy +{peak - before:.0f} MB, Redis omem {omem >> 20} MB, "
          f"other client {latencies[len(latencies) * 9 // 10] * 1000:.1f} ms (90th)")
    # The window (1 MB) plus one 20 MB reply, with copies on their way: not 600 MB.
    assert peak - before < 100, f"the proxy grew by {peak - before:.0f} MB for a client that does not read"
    assert omem < 64 * 1024 * 1024, f"Redis held {omem} bytes of output for a client"
    latencies.sort()
    typical, worst = latencies[len(latencies) * 9 // 10], latencies[-1]
    assert typical < 0.05 and worst < 0.5, f"another client's commands: {typical * 1000:.0f} ms (90th), " \
        f"{worst * 1000:.0f} ms (worst)"
    expected = _mget_reply()
    sock.settimeout(60)
    for index in range(30):
        received = bytearray()
        while len(received) < len(expected):
            chunk = sock.recv(min(1 << 20, len(expected) - len(received)))
            assert chunk, f"closed in reply {index}, after {len(received)} bytes"
            received += chunk
        assert bytes(received) == expected, f"reply {index} differs"
    sender.join(30)
    sock.sendall(b"*1\r\n$4\r\nPING\r\n")
    assert sock.recv(7) == b"+PONG\r\n"
    sock.close()


def test_a_slow_reader_is_never_disconnected(own_redis, own_proxy):
    """A raw client that pipelines 300 GETs of 1 MB and reads them slowly (256 KB every few
    ms, with a small receive buffer) gets every byte, in order, and stays connected."""
    redis.Redis(port=own_redis.port).set("big:v", VALUE)
    sock = socket.create_connection(("127.0.0.1", own_proxy.port))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    sock.sendall(GET_BIG * 300)
    sock.settimeout(30)
    expected = BIG_REPLY * 300
    received = bytearray()
    deadline = time.monotonic() + 120
    while len(received) < len(expected) and time.monotonic() < deadline:
        chunk = sock.recv(256 * 1024)
        assert chunk, f"closed after {len(received)} of {len(expected)} bytes"
        received += chunk
        time.sleep(0.002)
    assert bytes(received) == expected
    sock.sendall(b"PING\r\n")
    assert sock.recv(7) == b"+PONG\r\n"
    sock.close()


def test_a_client_that_does_not_read_costs_its_window_and_delays_nobody(own_redis, own_proxy):
    """500 pipelined GETs of 1 MB, not read: the proxy grows by less than 64 MB (its window plus
    about one reply, not 500 MB), a second client on the same shared connection is answered
    within 50 ms meanwhile, and every reply arrives intact once the first one reads."""
    redis.Redis(port=own_redis.port).set("big:v", VALUE)
    pid = own_proxy.process.pid
    other = redis.Redis(port=own_proxy.port, socket_timeout=10)
    other.ping()
    before = rss_mb(pid)
    sock = socket.create_connection(("127.0.0.1", own_proxy.port))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    sock.sendall(b"*1\r\n$4\r\nPING\r\n" + GET_BIG * 500)  # a small reply first: no wider window for it
    latencies = []
    peak = before
    deadline = time.monotonic() + 3
    n = 0
    while time.monotonic() < deadline:
        started = time.monotonic()
        assert other.set(f"other:{n}", n) is True and other.get(f"other:{n}") == str(n).encode()
        latencies.append((time.monotonic() - started) / 2)
        peak = max(peak, rss_mb(pid))
        n += 1
        time.sleep(0.01)
    assert peak - before < 64, f"the proxy grew by {peak - before:.0f} MB for a client that does not read"
    latencies.sort()
    typical, worst = latencies[len(latencies) * 9 // 10], latencies[-1]
    # Under 50 ms, nine commands in ten; the worst with a margin for a machine shared by many.
    assert typical < 0.05 and worst < 0.5, f"another client's commands: {typical * 1000:.0f} ms (90th), " \
        f"{worst * 1000:.0f} ms (worst)"
    info = redis.Redis(port=own_redis.port).client_list()
    assert max(int(entry["omem"]) for entry in info) < 64 * 1024 * 1024  # nor does Redis hold them
    sock.settimeout(30)
    expected = b"+PONG\r\n" + BIG_REPLY * 500
    received = bytearray()
    while len(received) < len(expected):
        chunk = sock.recv(1 << 20)
        assert chunk, f"closed after {len(received)} of {len(expected)} bytes"
        received += chunk
    assert bytes(received) == expected
    sock.close()


def test_max_clients_answers_like_redis_then_closes(own_redis, tmp_path):
    process = _proxy(tmp_path, own_redis.url, "max_clients: 3", "--metrics", f"127.0.0.1:{free_port()}")
    try:
        kept = [socket.create_connection(("127.0.0.1", process.port)) for _ in range(3)]
        for sock in kept:
            sock.sendall(b"PING\r\n")
            sock.settimeout(5)
            assert sock.recv(7) == b"+PONG\r\n"
        extra = socket.create_connection(("127.0.0.1", process.port))
        extra.settimeout(5)
        data = b""
        while chunk := extra.recv(1024):
            data += chunk
        assert data == b"-ERR max number of clients reached\r\n"
        extra.close()
        kept.pop().close()
        wait_for(lambda: _accepts(process.port), 5, "a place freed by a client that left")
        assert "max_clients" in process.log
    finally:
        process.stop()


def _accepts(port: int) -> bool:
    try:
        return redis.Redis(port=port, socket_timeout=2).ping() is True
    except redis.ResponseError:
        return False


def test_an_idle_client_is_closed_but_not_a_blocked_or_subscribed_one(own_redis, tmp_path):
    process = _proxy(tmp_path, own_redis.url, "client_idle_timeout: 1")
    try:
        idle = socket.create_connection(("127.0.0.1", process.port))
        idle.sendall(b"PING\r\n")
        idle.settimeout(10)
        assert idle.recv(7) == b"+PONG\r\n"
        busy = redis.Redis(port=process.port, socket_timeout=10)
        subscriber = redis.Redis(port=process.port, socket_timeout=10).pubsub()
        subscriber.subscribe("idle:ch")
        assert subscriber.get_message(timeout=5)["type"] == "subscribe"
        result = {}
        blocked = threading.Thread(target=lambda: result.update(v=busy.blpop(["idle:q"], timeout=4)))
        blocked.start()
        started = time.monotonic()
        assert idle.recv(16) == b""  # closed by the proxy, after about a second
        assert time.monotonic() - started < 5
        blocked.join(10)
        assert result == {"v": None}  # answered by Redis after its 4 s, not cut off at 1 s
        redis.Redis(port=own_redis.port).publish("idle:ch", "still here")
        message = subscriber.get_message(timeout=5)
        assert message is not None and message["data"] == b"still here"
        subscriber.close()
        assert "client_idle_timeout" in process.log
    finally:
        process.stop()


def test_max_memory_pauses_then_disconnects_the_largest_unfinished_request(own_redis, tmp_path):
    """Three clients send parts of 500 MB arguments they never finish, against a 48 MB
    max_memory: the proxy stops reading them and disconnects the largest, logged and counted;
    its memory stays bounded, and other clients are served."""
    metrics_port = free_port()
    process = _proxy(tmp_path, own_redis.url, f"max_memory: {48 * 1024 * 1024}",
                     "--metrics", f"127.0.0.1:{metrics_port}")
    try:
        pid = process.process.pid
        before = rss_mb(pid)
        senders = []
        results = {}
        chunk = b"y" * (256 * 1024)

        def send(name: str, share: int):
            sock = socket.create_connection(("127.0.0.1", process.port))
            sock.settimeout(0.5)
            sent = 0
            try:
                sock.sendall(b"*3\r\n$3\r\nSET\r\n$5\r\nbig:%s\r\n$524288000\r\n" % name.encode())
                deadline = time.monotonic() + 8
                while sent < share and time.monotonic() < deadline:
                    try:
                        sent += sock.send(chunk)
                    except TimeoutError:
                        continue
            except OSError:
                pass
            results[name] = sent
            senders.append(sock)

        threads = [threading.Thread(target=send, args=(name, share))
                   for name, share in (("a", 200 * 1024 * 1024), ("b", 30 * 1024 * 1024), ("c", 30 * 1024 * 1024))]
        for thread in threads:
            thread.start()
        peak = before
        deadline = time.monotonic() + 15
        dropped = "redis_guard_clients_disconnected_max_memory_total"
        while time.monotonic() < deadline and _metric(metrics_port, dropped) < 1:
            peak = max(peak, rss_mb(pid))
            time.sleep(0.05)
        for thread in threads:
            thread.join(15)
        peak = max(peak, rss_mb(pid))
        assert _metric(metrics_port, dropped) >= 1
        assert "max_memory" in process.log
        # (unbounded, the 260 MB sent would be held twice over: the reader's and hiredis's copies;
        # the margin over the bound is the second before the largest is disconnected, on a loaded CI)
        assert peak - before < 48 + 112, f"the proxy grew by {peak - before:.0f} MB under a 48 MB max_memory"
        assert results["a"] < 200 * 1024 * 1024  # it was stopped, not read to the end
        assert redis.Redis(port=process.port, socket_timeout=5).ping() is True
        for sock in senders:
            sock.close()
    finally:
        process.stop()

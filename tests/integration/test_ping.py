"""PING goes to Redis like any read, and is answered as Redis answers it: byte for byte (with and
without its argument, RESP2 and RESP3, inside MULTI, on a subscribed RESP2 connection), BUSY
while a script runs too long, and counted in SLOWLOG and INFO commandstats."""

import socket
import threading
import time

import pytest
import redis

from tests.servers import exchange, exchange_batches, read_until_quiet

PINGS = (b"*1\r\n$4\r\nPING\r\n",
         b"*2\r\n$4\r\nping\r\n$5\r\nhello\r\n",
         b"*2\r\n$4\r\nPING\r\n$0\r\n\r\n",
         b"PING\r\n")  # inline, as redis-cli and nc send it

# Runs until its argument's seconds have passed (redis.call('TIME') is allowed in a script).
BUSY_SCRIPT = ("local start = tonumber(redis.call('TIME')[1]) "
               "while tonumber(redis.call('TIME')[1]) - start < tonumber(ARGV[1]) do end return 1")


def pings_at(port: int) -> int:
    """The PINGs a redis-server has run (INFO commandstats)."""
    client = redis.Redis(port=port)
    try:
        return client.info("commandstats").get("cmdstat_ping", {}).get("calls", 0)
    finally:
        client.close()


def test_ping_reaches_redis_and_is_answered_byte_for_byte(redis_server, proxy):
    through = redis.Redis(port=proxy.port, protocol=2)
    resp3 = redis.Redis(port=proxy.port, protocol=3)
    assert through.get("ping:warm") is None and resp3.get("ping:warm") is None
    before = pings_at(redis_server.port)
    for _ in range(10):
        assert through.ping() is True and resp3.ping() is True
    assert pings_at(redis_server.port) == before + 20
    for ping in PINGS:  # one read each, on one connection
        before = pings_at(redis_server.port)
        assert exchange_batches(proxy.port, [ping])[0][0] == exchange(redis_server.port, ping)[0]
        assert pings_at(redis_server.port) == before + 2  # the proxy's and the direct one
    hello3 = b"*2\r\n$5\r\nHELLO\r\n$1\r\n3\r\n"
    for ping in PINGS[:2]:  # RESP3: the same replies
        via, direct = (exchange_batches(port, [hello3, ping])[1] for port in (proxy.port, redis_server.port))
        assert via == direct
    through.close()
    resp3.close()


@pytest.mark.parametrize("batches", [
    [b"*3\r\n$4\r\nPING\r\n$1\r\na\r\n$1\r\nb\r\n"],  # Redis's arity error
    [b"*1\r\n$5\r\nMULTI\r\n", b"*1\r\n$4\r\nPING\r\n", b"*1\r\n$4\r\nEXEC\r\n"],  # EXEC's reply holds PONG
    [b"*1\r\n$4\r\nPING\r\n*2\r\n$3\r\nGET\r\n$10\r\nabsent:key\r\n"],  # a pipeline: with its run
    # A subscribed RESP2 connection: Redis answers *2 pong <argument>.
    [b"*2\r\n$9\r\nSUBSCRIBE\r\n$6\r\nping:c\r\n", b"*1\r\n$4\r\nPING\r\n", b"*2\r\n$4\r\nPING\r\n$2\r\nhi\r\n"],
])
def test_ping_in_any_state_is_answered_as_redis_answers_it(redis_server, proxy, batches):
    before = pings_at(redis_server.port)
    through = exchange_batches(proxy.port, batches)
    pinged = sum(batch.count(b"PING") for batch in batches)
    assert pings_at(redis_server.port) == before + pinged
    assert through == exchange_batches(redis_server.port, batches)


def test_ping_during_a_busy_script_answers_busy_as_redis_does(own_redis, own_proxy):
    """Redis answers BUSY to every command but a few while a script runs past busy-reply-threshold:
    a pool's PING through the proxy learns it as a direct one does (from a script run directly or
    through the proxy)."""
    admin = redis.Redis(port=own_redis.port)
    admin.config_set("lua-time-limit", 100)  # (busy-reply-threshold's older name: 7.0 knows both)
    through = redis.Redis(port=own_proxy.port)
    assert through.ping() is True
    for runner_port in (own_redis.port, own_proxy.port):
        ran = []
        runner = threading.Thread(target=lambda port=runner_port, ran=ran: ran.append(
            redis.Redis(port=port, socket_timeout=20).eval(BUSY_SCRIPT, 0, 3)))
        runner.start()
        deadline = time.monotonic() + 10
        direct = b""
        while time.monotonic() < deadline and not direct.startswith(b"-BUSY"):
            time.sleep(0.05)
            direct = exchange(own_redis.port, PINGS[0])[0]
        assert direct.startswith(b"-BUSY"), direct
        assert exchange_batches(own_proxy.port, [PINGS[0]])[0][0] == direct
        assert exchange_batches(own_proxy.port, [PINGS[1]])[0][0] == direct
        runner.join(20)
        assert ran == [1]
        assert through.ping() is True  # once the script is over
    through.close()
    admin.close()


def test_ping_shows_in_slowlog_and_commandstats(own_redis, own_proxy):
    admin = redis.Redis(port=own_redis.port)
    admin.config_set("slowlog-log-slower-than", 0)
    admin.slowlog_reset()
    through = redis.Redis(port=own_proxy.port)
    assert through.ping() is True
    assert exchange(own_proxy.port, b"PING slow\r\n")[0] == b"$4\r\nslow\r\n"
    logged = [entry["command"] for entry in admin.slowlog_get(128)]
    assert b"PING" in logged and b"PING slow" in logged
    assert admin.info("commandstats")["cmdstat_ping"]["calls"] >= 2
    through.close()
    admin.close()


def test_ping_shows_in_monitor(redis_server, proxy):
    other = redis.Redis(port=proxy.port)
    assert other.ping() is True
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=5) as watcher:
        watcher.sendall(b"MONITOR\r\n")
        assert read_until_quiet(watcher, 3, 0.2)[0].startswith(b"+OK\r\n")
        assert exchange(proxy.port, b"PING seen-by-monitor\r\n")[0] == b"$15\r\nseen-by-monitor\r\n"
        seen = b""
        deadline = time.monotonic() + 5
        while b'"seen-by-monitor"' not in seen and time.monotonic() < deadline:
            seen += read_until_quiet(watcher, 1, 0.2)[0]
        assert b'"PING" "seen-by-monitor"' in seen
    other.close()


def test_ping_gets_no_pong_while_redis_is_down(own_redis, own_proxy):
    """A client that checks its connection with PING learns what any command would tell it."""
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    from tests.servers import wait_for

    client = redis.Redis(port=own_proxy.port, socket_timeout=5, retry=Retry(NoBackoff(), 0))
    assert client.ping() is True
    own_redis.stop()
    for _ in range(3):
        started = time.monotonic()
        with pytest.raises(redis.ConnectionError):
            client.ping()
        assert time.monotonic() - started < 3
    own_redis.start()
    wait_for(lambda: client.ping(), 10, "PING through the proxy once Redis is back",
             errors=(redis.ConnectionError,))
    client.close()

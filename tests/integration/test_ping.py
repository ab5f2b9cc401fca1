"""PING alone in its read on the shared connections: answered by the proxy while its upstream
connection is up, byte for byte as Redis answers it; Redis answers it otherwise (in a pipeline,
while a client monitors...)."""

import socket
import time

import pytest
import redis

from tests.servers import exchange, exchange_batches, read_until_quiet, wait_for

PINGS = (b"*1\r\n$4\r\nPING\r\n",
         b"*2\r\n$4\r\nping\r\n$5\r\nhello\r\n",
         b"*2\r\n$4\r\nPING\r\n$0\r\n\r\n",
         b"PING\r\n")  # inline, as redis-cli and nc send it


def pings_at(port: int) -> int:
    """The PINGs a redis-server has run (INFO commandstats)."""
    client = redis.Redis(port=port)
    try:
        return client.info("commandstats").get("cmdstat_ping", {}).get("calls", 0)
    finally:
        client.close()


def test_ping_is_answered_by_the_proxy_as_redis_answers_it(redis_server, proxy):
    through = redis.Redis(port=proxy.port, protocol=2)
    resp3 = redis.Redis(port=proxy.port, protocol=3)
    # The shared connections of both protocols are up (before, a PING goes to Redis: the next test).
    assert through.get("ping:warm") is None and resp3.get("ping:warm") is None
    before = pings_at(redis_server.port)
    for _ in range(20):
        assert through.ping() is True and resp3.ping() is True
    for ping in PINGS:  # one read each, on one connection
        assert exchange_batches(proxy.port, [ping])[0][0] == exchange(redis_server.port, ping)[0]
    assert pings_at(redis_server.port) == before + len(PINGS)  # the direct exchanges' only
    through.close()
    resp3.close()


@pytest.mark.parametrize("batches", [
    [b"*3\r\n$4\r\nPING\r\n$1\r\na\r\n$1\r\nb\r\n"],  # Redis's arity error
    [b"*1\r\n$5\r\nMULTI\r\n", b"*1\r\n$4\r\nPING\r\n", b"*1\r\n$4\r\nEXEC\r\n"],  # EXEC's reply holds PONG
    [b"*1\r\n$4\r\nPING\r\n*2\r\n$3\r\nGET\r\n$10\r\nabsent:key\r\n"],  # a pipeline: with its run
])
def test_ping_that_redis_must_answer_reaches_it(redis_server, proxy, batches):
    redis.Redis(port=proxy.port, protocol=2).ping()  # (the shared connection is up: not why it reaches Redis)
    before = pings_at(redis_server.port)
    through = exchange_batches(proxy.port, batches)
    assert pings_at(redis_server.port) == before + 1
    assert through == exchange_batches(redis_server.port, batches)


def test_a_ping_before_its_shared_connection_is_up_reaches_redis(own_redis, own_proxy):
    before = pings_at(own_redis.port)
    assert exchange(own_proxy.port, b"*1\r\n$4\r\nPING\r\n")[0] == b"+PONG\r\n"  # (the first: it opens the connection)
    assert pings_at(own_redis.port) == before + 1
    assert exchange(own_proxy.port, b"*1\r\n$4\r\nPING\r\n")[0] == b"+PONG\r\n"
    assert pings_at(own_redis.port) == before + 1


def test_while_a_client_monitors_ping_reaches_redis_and_shows(redis_server, proxy):
    other = redis.Redis(port=proxy.port)
    assert other.ping() is True
    watcher = redis.Redis(port=proxy.port)
    with watcher.monitor() as monitor:
        before = pings_at(redis_server.port)
        assert other.ping() is True
        seen = []  # (the proxy's own commands and INFO show too)
        while "PING" not in seen and len(seen) < 20:
            seen.append(monitor.next_command()["command"])
        assert "PING" in seen
        assert pings_at(redis_server.port) == before + 1
    watcher.close()

    def answered_here_again() -> bool:  # once the proxy has seen the monitor's connection close
        before = pings_at(redis_server.port)
        other.ping()
        return pings_at(redis_server.port) == before

    wait_for(answered_here_again, 10, "PING answered by the proxy after the monitor left")
    other.close()


def test_a_monitor_that_reset_ended_no_longer_sends_ping_to_redis(redis_server, proxy):
    other = redis.Redis(port=proxy.port, protocol=2)
    assert other.ping() is True

    def reaches_redis() -> bool:
        before = pings_at(redis_server.port)
        other.ping()
        return pings_at(redis_server.port) == before + 1

    with socket.create_connection(("127.0.0.1", proxy.port), timeout=5) as watcher:
        watcher.sendall(b"MONITOR\r\n")
        assert read_until_quiet(watcher, 3, 0.2)[0].startswith(b"+OK\r\n")
        assert reaches_redis()
        watcher.sendall(b"RESET\r\n")
        assert read_until_quiet(watcher, 3, 0.3)[0].endswith(b"+RESET\r\n")
        wait_for(lambda: not reaches_redis(), 10, "PING answered by the proxy once the monitor's RESET is done")
        watcher.sendall(b"PING\r\n")  # (the connection is an ordinary one again)
        assert read_until_quiet(watcher, 3, 0.2)[0] == b"+PONG\r\n"
    other.close()


def test_ping_gets_no_pong_while_redis_is_down(own_redis, own_proxy):
    """A client that checks its connection with PING learns what any command would tell it."""
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    client = redis.Redis(port=own_proxy.port, socket_timeout=5, retry=Retry(NoBackoff(), 0))
    assert client.ping() is True
    own_redis.stop()
    with pytest.raises(redis.ConnectionError):
        client.get("ping:k")  # (the proxy has seen its connection go)
    for _ in range(3):
        started = time.monotonic()
        with pytest.raises(redis.ConnectionError):
            client.ping()
        assert time.monotonic() - started < 3
    own_redis.start()
    wait_for(lambda: client.ping(), 10, "PING through the proxy once Redis is back",
             errors=(redis.ConnectionError,))
    client.close()

"""A connection used for pub/sub or MONITOR, then for ordinary commands (Jedis hands it back to its
pool once `subscribe` returns; a pool may clean it with RESET): once the client has no
subscription left, or has sent RESET, its replies are paired again, so the policy completes its
writes as on any connection (T1's EXPIRE), with Redis's replies."""

import socket

import pytest
import redis

from tests.servers import exchange_batches, read_until_quiet

STREAMS = b"which the proxy cannot add on a connection that streams"


def same_as_redis(t1_proxied, batches: list[bytes]) -> list:
    """The batches' replies through the proxy, checked against redis-server's own (but HELLO's,
    which holds the connection's id)."""
    server, process = t1_proxied
    expected = exchange_batches(server.port, batches)
    got = exchange_batches(process.port, batches)
    skip = 1 if batches[0].startswith(b"HELLO") else 0
    assert got[skip:] == expected[skip:]
    return got


HELLO3 = [b"HELLO 3\r\n"]


@pytest.mark.parametrize("hello", [[], HELLO3], ids=["resp2", "resp3"])
@pytest.mark.parametrize("subscribe, unsubscribe", [
    ([b"SUBSCRIBE sub:a\r\n"], [b"UNSUBSCRIBE sub:a\r\n"]),
    ([b"SUBSCRIBE sub:a sub:b\r\n"], [b"UNSUBSCRIBE\r\n"]),  # all at once, none named
    ([b"PSUBSCRIBE sub:*\r\n", b"SUBSCRIBE sub:a\r\n"], [b"UNSUBSCRIBE sub:a\r\n", b"PUNSUBSCRIBE sub:*\r\n"]),
    ([b"SUBSCRIBE sub:a\r\nUNSUBSCRIBE sub:a\r\n"], []),  # one read
    ([b"UNSUBSCRIBE sub:a sub:b\r\n"], [b"UNSUBSCRIBE\r\n"]),  # a stream that never subscribed
], ids=["one-channel", "all-at-once", "pattern-last", "one-read", "never-subscribed"])
def test_the_policy_completes_writes_once_no_subscription_is_left(t1_proxied, t1_direct, hello, subscribe, unsubscribe):
    key = b"sub:key:%d" % len(hello + subscribe + unsubscribe)
    t1_direct.delete(key)
    batches = hello + subscribe + unsubscribe + [b"HSET %s f v\r\n" % key]
    got = exchange_batches(t1_proxied[1].port, batches)
    assert got[-1] == (b":1\r\n", False), got
    assert 0 < t1_direct.ttl(key) <= 600  # T1's EXPIRE, which the proxy adds only to paired replies
    t1_direct.delete(key)
    same_as_redis(t1_proxied, hello + subscribe + unsubscribe + [b"PING\r\nGET sub:nokey\r\n"])


@pytest.mark.parametrize("hello", [[], HELLO3], ids=["resp2", "resp3"])
def test_a_pipeline_after_the_last_unsubscribe_keeps_its_order(t1_proxied, hello):
    same_as_redis(t1_proxied, hello + [b"SUBSCRIBE sub:a\r\nUNSUBSCRIBE sub:a\r\nPING\r\nGET sub:nokey\r\nECHO x\r\n"])


def test_a_subscription_left_keeps_the_stream(t1_proxied, t1_direct):
    """Unsubscribed from one channel of two: still a stream in RESP2 (where Redis refuses HSET
    there anyway), its writes still refused under T1 inject; after the last one, accepted. (A
    RESP3 client's subscriptions make no stream: test_paired_subscriptions.py.)"""
    port = t1_proxied[1].port
    got = exchange_batches(port, [b"SUBSCRIBE sub:a sub:b\r\n", b"UNSUBSCRIBE sub:a\r\n",
                                  b"HSET sub:left f v\r\n", b"UNSUBSCRIBE sub:b\r\n", b"HSET sub:left f v\r\n"])
    assert got[1][0].endswith(b"unsubscribe\r\n$5\r\nsub:a\r\n:1\r\n"), got
    assert STREAMS in got[2][0], got
    assert got[4] == (b":1\r\n", False), got
    assert 0 < t1_direct.ttl(b"sub:left") <= 600
    t1_direct.delete(b"sub:left")


@pytest.mark.parametrize("stateful", [b"WATCH sub:w\r\n", b"CLIENT REPLY ON\r\n", b"SSUBSCRIBE sub:s\r\n",
                                      b"SELECT 0\r\n"], ids=["watch", "client-reply", "ssubscribe", "select"])
def test_a_stream_that_may_hold_state_stays_one(t1_proxied, stateful):
    """A command on the stream that may leave state on the connection (or subscriptions the
    count does not give) keeps it a stream: Redis's replies, and T1's writes still refused."""
    batches = [b"SUBSCRIBE sub:a\r\n", stateful, b"UNSUBSCRIBE sub:a\r\n"]
    same_as_redis(t1_proxied, batches)
    got = exchange_batches(t1_proxied[1].port, batches + [b"HSET sub:kept f v\r\n"])
    assert STREAMS in got[-1][0], got


def test_messages_still_arrive_while_a_subscription_is_left(t1_proxied, t1_direct):
    sock = socket.create_connection(("127.0.0.1", t1_proxied[1].port), timeout=5)
    try:
        sock.sendall(b"SUBSCRIBE sub:m1 sub:m2\r\n")
        read_until_quiet(sock)
        sock.sendall(b"UNSUBSCRIBE sub:m1\r\n")
        assert read_until_quiet(sock)[0] == b"*3\r\n$11\r\nunsubscribe\r\n$6\r\nsub:m1\r\n:1\r\n"
        assert t1_direct.publish("sub:m2", "hello") == 1
        assert read_until_quiet(sock)[0] == b"*3\r\n$7\r\nmessage\r\n$6\r\nsub:m2\r\n$5\r\nhello\r\n"
        sock.sendall(b"UNSUBSCRIBE sub:m2\r\n")
        assert read_until_quiet(sock)[0] == b"*3\r\n$11\r\nunsubscribe\r\n$6\r\nsub:m2\r\n:0\r\n"
        assert t1_direct.publish("sub:m2", "nobody") == 0
        sock.sendall(b"HSET sub:after f v\r\nGET sub:nokey\r\n")
        assert read_until_quiet(sock)[0] == b":1\r\n$-1\r\n"
        assert 0 < t1_direct.ttl(b"sub:after") <= 600
    finally:
        sock.close()
        t1_direct.delete(b"sub:after")


@pytest.mark.parametrize("hello, alone", [
    *(pytest.param(hello, alone, id=f"{alone.decode().strip()}-resp{2 + len(hello)}") for hello in ([], HELLO3)
      for alone in (b"UNSUBSCRIBE\r\n", b"PUNSUBSCRIBE sub:*\r\n", b"UNSUBSCRIBE sub:a\r\n", b"CLIENT REPLY ON\r\n")),
    *(pytest.param(hello, alone, id=f"{alone.decode().strip()}-resp{2 + len(hello)}") for hello in ([], HELLO3)
      for alone in (b"SUNSUBSCRIBE\r\n", b"SUNSUBSCRIBE sub:s\r\n")),  # (RESP3: paired_subscriptions.py)
])
def test_a_command_of_the_family_that_changes_nothing_makes_no_stream(t1_proxied, t1_direct, hello, alone):
    """A lone (P)UNSUBSCRIBE from a client that subscribed to nothing, CLIENT REPLY ON from one
    that never turned its replies off: Redis's reply, and the connection is as before."""
    same_as_redis(t1_proxied, hello + [alone, b"PING\r\n"])
    got = exchange_batches(t1_proxied[1].port, hello + [alone, b"HSET sub:alone f v\r\n"])
    assert got[-1] == (b":1\r\n", False), got
    assert 0 < t1_direct.ttl(b"sub:alone") <= 600
    t1_direct.delete(b"sub:alone")


def test_a_pooled_connection_after_pubsub_with_redis_py(t1_proxied, t1_direct):
    """redis-py's connection subscribed and unsubscribed by hand, as Jedis does (RESP2: in RESP3
    redis-py hands the confirmations to a push handler), then ordinary commands on it."""
    client = redis.Redis(port=t1_proxied[1].port, protocol=2, single_connection_client=True)
    try:
        connection = client.connection
        connection.send_command("SUBSCRIBE", "sub:py")
        assert connection.read_response() == [b"subscribe", b"sub:py", 1]
        connection.send_command("UNSUBSCRIBE", "sub:py")
        assert connection.read_response() == [b"unsubscribe", b"sub:py", 0]
        assert client.hset("sub:py:hash", "f", "v") == 1
        assert client.hget("sub:py:hash", "f") == b"v"
        assert 0 < t1_direct.ttl("sub:py:hash") <= 600
    finally:
        client.close()
        t1_direct.delete("sub:py:hash")


@pytest.mark.parametrize("hello", [[], HELLO3], ids=["resp2", "resp3"])
@pytest.mark.parametrize("streams", [
    [b"SUBSCRIBE sub:a\r\n"], [b"PSUBSCRIBE sub:*\r\nSSUBSCRIBE sub:s\r\n"], [b"MONITOR\r\n"],
    [b"SUBSCRIBE sub:a\r\n", b"WATCH sub:w\r\nSELECT 0\r\n"],
], ids=["subscribed", "shard-channel", "monitor", "state-on-the-stream"])
def test_reset_ends_a_stream(t1_proxied, t1_direct, hello, streams):
    key = b"sub:reset:%d" % len(b"".join(streams))
    t1_direct.delete(key)
    got = exchange_batches(t1_proxied[1].port, hello + streams + [b"RESET\r\n", b"HSET %s f v\r\nPING\r\n" % key])
    assert got[-2] == (b"+RESET\r\n", False) and got[-1] == (b":1\r\n+PONG\r\n", False), got
    assert 0 < t1_direct.ttl(key) <= 600
    t1_direct.delete(key)
    if b"MONITOR" not in streams[0]:  # (MONITOR shows other clients' commands, as they come)
        same_as_redis(t1_proxied, hello + streams + [b"RESET\r\nGET sub:nokey\r\n", b"PING\r\n"])


def test_reset_in_a_pipeline_after_a_subscription(t1_proxied, t1_direct):
    same_as_redis(t1_proxied, [b"SUBSCRIBE sub:a\r\nRESET\r\nPING\r\nGET sub:nokey\r\nSELECT 0\r\n"])
    got = exchange_batches(t1_proxied[1].port, [b"SUBSCRIBE sub:a\r\nRESET\r\nHSET sub:piped f v\r\n"])
    assert got[0][0].endswith(b"+RESET\r\n:1\r\n"), got
    assert 0 < t1_direct.ttl(b"sub:piped") <= 600
    t1_direct.delete(b"sub:piped")


def test_reset_keeps_a_stream_whose_replies_may_be_off(t1_proxied):
    """After CLIENT REPLY SKIP the server may leave barriers unanswered: the stream stays one,
    with Redis's replies."""
    batches = [b"CLIENT REPLY SKIP\r\nPING\r\n", b"RESET\r\n", b"PING\r\n"]
    same_as_redis(t1_proxied, batches)
    got = exchange_batches(t1_proxied[1].port, batches + [b"HSET sub:skip f v\r\n"])
    assert STREAMS in got[-1][0], got

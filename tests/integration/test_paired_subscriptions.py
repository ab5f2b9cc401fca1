"""A RESP3 client's subscriptions through the proxy (Lettuce, node-redis and redis-py with
protocol 3 use one connection for pub/sub and commands): its replies stay paired, so the policy
completes its writes there (T1's EXPIRE) while messages arrive; everything else is Redis's bytes."""

import re
import socket
import threading
import time

import hiredis
import pytest
import redis

from tests.integration.test_streamend import same_as_redis
from tests.servers import exchange_batches, read_until_quiet, rss_mb

HELLO3 = b"HELLO 3\r\n"
HELLO2_REFUSED = b"-ERR HELLO 2 while subscribed in RESP3 is not supported through Redis Guard"


def test_writes_are_completed_while_subscribed(t1_proxied, t1_direct):
    t1_direct.delete(b"ps:key")
    sock = socket.create_connection(("127.0.0.1", t1_proxied[1].port), timeout=5)
    try:
        sock.sendall(HELLO3 + b"SUBSCRIBE ps:news\r\n")
        read_until_quiet(sock)
        sock.sendall(b"HSET ps:key f v\r\n")
        assert read_until_quiet(sock)[0] == b":1\r\n"
        assert 0 < t1_direct.ttl(b"ps:key") <= 600  # T1's EXPIRE, added on the subscribed connection
        assert t1_direct.publish("ps:news", "hello") == 1
        assert read_until_quiet(sock)[0] == b">3\r\n$7\r\nmessage\r\n$7\r\nps:news\r\n$5\r\nhello\r\n"
        sock.sendall(b"UNSUBSCRIBE\r\nSET ps:key v\r\n")
        assert read_until_quiet(sock)[0] == b">3\r\n$11\r\nunsubscribe\r\n$7\r\nps:news\r\n:0\r\n+OK\r\n"
        assert 0 < t1_direct.ttl(b"ps:key") <= 600
    finally:
        sock.close()
        t1_direct.delete(b"ps:key")


@pytest.mark.parametrize("batches", [
    [b"SUBSCRIBE ps:a ps:b\r\nGET ps:nokey\r\nPING\r\nUNSUBSCRIBE ps:a\r\nECHO x\r\n", b"UNSUBSCRIBE\r\nPING\r\n"],
    [b"SUBSCRIBE\r\nPING\r\n", b"PSUBSCRIBE\r\nSSUBSCRIBE\r\nECHO y\r\n"],  # errors: shown, and nothing else
    [b"PSUBSCRIBE ps:*\r\n", b"PUBLISH ps:x hi\r\nPING\r\n", b"PUNSUBSCRIBE ps:*\r\nPUBLISH ps:x hi\r\n"],
    [b"SSUBSCRIBE ps:s\r\nSPUBLISH ps:s hi\r\nSUNSUBSCRIBE\r\nPING\r\n"],
    [b"UNSUBSCRIBE\r\nPUNSUBSCRIBE ps:*\r\nSUNSUBSCRIBE ps:s\r\nPING\r\n"],  # nothing subscribed
    [b"SUBSCRIBE ps:a\r\nMULTI\r\nSET ps:m v EX 9\r\nEXEC\r\n", b"UNSUBSCRIBE\r\nDEL ps:m\r\n"],
    [b"MULTI\r\nSUBSCRIBE ps:t\r\nEXEC\r\n", b"PING\r\n"],  # in a transaction: a stream, as in RESP2
    [b"CLIENT REPLY SKIP\r\nPING\r\nSUBSCRIBE ps:k\r\nPING\r\n"],  # replies turned off once: a stream
    [b"SUBSCRIBE ps:a\r\nRESET\r\nPING\r\nGET ps:nokey\r\n"],  # RESET unsubscribes, and RESP2 again
    [b"SUBSCRIBE ps:a\r\nCLIENT REPLY OFF\r\nPING\r\n", b"CLIENT REPLY ON\r\nPING\r\n"],
    [b"SUBSCRIBE ps:a\r\nQUIT\r\n"],
    # (CLIENT UNPAUSE is answered on the control connection: a confirmation still comes after it)
    [b"SUBSCRIBE ps:a\r\n", b"CLIENT UNPAUSE\r\nUNSUBSCRIBE ps:a\r\nCLIENT UNPAUSE\r\nSUNSUBSCRIBE ps:s\r\nPING\r\n"],
], ids=["pipeline", "errors", "patterns-publish", "shard-channels", "never-subscribed", "transaction",
        "subscribe-in-transaction", "reply-skip", "reset", "reply-off", "quit", "control-connection"])
def test_redis_bytes(t1_proxied, batches):
    same_as_redis(t1_proxied, [HELLO3] + batches)


def without_ids(replies: list) -> list:
    """HELLO's replies hold the connection's id, which differs from the direct connection's."""
    return [(re.sub(rb"\$2\r\nid\r\n:\d+\r\n", b"", reply), closed) for reply, closed in replies]


@pytest.mark.parametrize("batches", [
    [b"SUBSCRIBE ps:h\r\nHELLO 2\r\nPING\r\nGET ps:h\r\n", b"UNSUBSCRIBE\r\nPING\r\nSET ps:h v\r\n",
     b"DEL ps:h\r\n"],
    [b"SUBSCRIBE ps:h\r\nSSUBSCRIBE ps:s\r\nHELLO 2\r\nPING\r\n", b"UNSUBSCRIBE\r\nPING\r\nGET ps:h\r\n",
     b"SUNSUBSCRIBE\r\nPING\r\nGET ps:h\r\n"],  # a shard channel keeps the server's subscribed context
    [b"SSUBSCRIBE ps:s\r\nSPUBLISH ps:s hi\r\nHELLO 2\r\nSUNSUBSCRIBE\r\n", b"CLIENT GETNAME\r\n"],
    [b"PSUBSCRIBE ps:*\r\nPUBLISH ps:x hi\r\nHELLO 2\r\nPUBLISH ps:x there\r\nPUNSUBSCRIBE\r\nPING\r\n",
     b"HELLO 3\r\nSUBSCRIBE ps:a\r\nPING\r\n", b"UNSUBSCRIBE\r\nPING\r\n"],  # RESP3 again, paired
    [b"SUBSCRIBE ps:h\r\nHELLO 2\r\nHELLO 3\r\n", b"UNSUBSCRIBE\r\nPING\r\n",
     b"SUBSCRIBE ps:a\r\nPING\r\n"],  # HELLO 3 refused in RESP2's subscribed context: RESP2 still
    [b"SUBSCRIBE ps:h\r\nHELLO 2\r\nRESET\r\nPING\r\nGET ps:h\r\n"],
    [b"SUBSCRIBE ps:h\r\nGET ps:h\r\nHELLO 2\r\nHELLO 2\r\nPING\r\n", b"QUIT\r\n"],
], ids=["channels", "shard-channel-left", "shard-channel", "messages-around-it", "hello-3-refused", "reset",
        "quit"])
def test_hello_2_while_subscribed_is_redis_s(t1_proxied, batches):
    """In front of one server, HELLO 2 while subscribed in RESP3 turns the connection into a
    RESP2 subscriber's, as Redis does: a stream, until its subscriptions or RESET end it."""
    server, process = t1_proxied
    expected = without_ids(exchange_batches(server.port, [HELLO3] + batches))
    got = without_ids(exchange_batches(process.port, [HELLO3] + batches))
    assert got[1:] == expected[1:]
    assert b"*14\r\n$6\r\nserver" in got[1][0]  # (RESP2's HELLO)


def test_the_stream_hello_2_makes_ends_with_its_subscriptions(t1_proxied, t1_direct):
    """Paired again once the last channel is gone: T1 completes a write with its EXPIRE (on a
    stream it could not, its reply unseen)."""
    got = exchange_batches(t1_proxied[1].port, [HELLO3, b"SUBSCRIBE ps:h\r\nHELLO 2\r\n",
                                                b"UNSUBSCRIBE\r\nSET ps:h v\r\n"])
    try:
        assert got[2][0] == b"*3\r\n$11\r\nunsubscribe\r\n$4\r\nps:h\r\n:0\r\n+OK\r\n"
        assert 0 < t1_direct.ttl(b"ps:h") <= 600
    finally:
        t1_direct.delete(b"ps:h")


def test_hello_2_with_options_while_subscribed_is_refused(t1_proxied):
    """A HELLO 2 whose SETNAME Redis may refuse (the protocol then as it was) is refused while
    anything is subscribed; Redis's HELLO once nothing is."""
    got = exchange_batches(t1_proxied[1].port, [HELLO3, b"SUBSCRIBE ps:h\r\nHELLO 2 SETNAME n\r\nPING\r\n",
                                             b"UNSUBSCRIBE\r\nHELLO 2 SETNAME n\r\nPING\r\n"])
    subscribed, unsubscribed = [reply for reply, _closed in got[1:]]
    assert subscribed.startswith(b">3\r\n$9\r\nsubscribe\r\n$4\r\nps:h\r\n:1\r\n" + HELLO2_REFUSED)
    assert subscribed.endswith(b"\r\n+PONG\r\n") and subscribed.count(b"\r\n") == 8  # (RESP3 still)
    assert unsubscribed.startswith(b">3\r\n$11\r\nunsubscribe\r\n$4\r\nps:h\r\n:0\r\n*14\r\n")
    assert unsubscribed.endswith(b"\r\n+PONG\r\n")


def test_a_message_after_hello_3_refused_on_the_stream(t1_proxied, t1_direct):
    """Redis refuses HELLO 3 in RESP2's subscribed context: the client stays RESP2, and a
    message after it comes as RESP2's array, in its place."""
    sock = socket.create_connection(("127.0.0.1", t1_proxied[1].port), timeout=5)
    try:
        sock.sendall(HELLO3 + b"SUBSCRIBE ps:h\r\nHELLO 2\r\nHELLO 3\r\n")
        assert read_until_quiet(sock)[0].endswith(b"are allowed in this context\r\n")
        assert t1_direct.publish("ps:h", "hi") == 1
        sock.sendall(b"PING\r\n")
        assert read_until_quiet(sock)[0] == b"*3\r\n$7\r\nmessage\r\n$4\r\nps:h\r\n$2\r\nhi\r\n*2\r\n$4\r\npong\r\n$0\r\n\r\n"
        sock.sendall(b"UNSUBSCRIBE\r\nSUBSCRIBE ps:a\r\n")
        assert read_until_quiet(sock)[0] == (b"*3\r\n$11\r\nunsubscribe\r\n$4\r\nps:h\r\n:0\r\n"
                                             b"*3\r\n$9\r\nsubscribe\r\n$4\r\nps:a\r\n:1\r\n")
        assert t1_direct.publish("ps:a", "there") == 1
        sock.sendall(b"PING\r\n")
        assert read_until_quiet(sock)[0] == (b"*3\r\n$7\r\nmessage\r\n$4\r\nps:a\r\n$5\r\nthere\r\n"
                                             b"*2\r\n$4\r\npong\r\n$0\r\n\r\n")
    finally:
        sock.close()


def test_hello_with_auth_on_a_connection_of_its_own_sets_the_protocol(t1_proxied):
    """HELLO 2 AUTH on a pinned connection: the session knows RESP2 from then on, so a
    subscription is RESP2's (the random isolation test found it paired, the connection then
    closed: the confirmations were RESP2 replies)."""
    batches = [HELLO3, b"CLIENT SETNAME n\r\n", b"HELLO 2 AUTH default pw\r\n",
               b"PSUBSCRIBE a b a\r\nPUNSUBSCRIBE a b a\r\nPING x\r\n", b"PING y\r\n"]
    got = exchange_batches(t1_proxied[1].port, batches)
    expected = exchange_batches(t1_proxied[0].port, batches)
    assert got[2][0].startswith(b"*14\r\n") and got[3:] == expected[3:]


def test_hello_2_after_reset(t1_proxied):
    got = exchange_batches(t1_proxied[1].port, [HELLO3, b"SUBSCRIBE ps:r\r\nRESET\r\n", b"HELLO 2\r\n"])
    assert got[1][0].endswith(b"+RESET\r\n") and got[2][0].startswith(b"*14\r\n")


def test_messages_among_a_pipelines_replies(t1_proxied, t1_direct):
    """Messages published while the client pipelines: every reply in its place, every message
    whole, each where a reply could be."""
    count = 300
    sock = socket.create_connection(("127.0.0.1", t1_proxied[1].port), timeout=10)
    t1_direct.set(b"ps:big", b"x" * 100_000)
    try:
        sock.sendall(HELLO3 + b"SUBSCRIBE ps:flood\r\n")
        read_until_quiet(sock)

        def publish() -> None:
            publisher = redis.Redis(port=t1_proxied[0].port)
            for n in range(count):
                publisher.publish("ps:flood", b"m%d" % n)
            publisher.close()

        thread = threading.Thread(target=publish)
        thread.start()
        sock.sendall(b"".join(b"ECHO e%d\r\nGET ps:big\r\n" % n for n in range(count)))
        reader = hiredis.Reader()
        replies, messages = [], []
        while len(replies) < 2 * count or len(messages) < count:
            data = sock.recv(1 << 20)
            assert data, "closed"
            reader.feed(data)
            while (value := reader.gets()) is not False:
                (messages if isinstance(value, hiredis.PushNotification) else replies).append(value)
        thread.join(10)
        assert replies == [value for n in range(count) for value in (b"e%d" % n, b"x" * 100_000)]
        assert messages == [[b"message", b"ps:flood", b"m%d" % n] for n in range(count)]
    finally:
        sock.close()
        t1_direct.delete(b"ps:big")


def flood_a_subscriber_that_does_not_read(proxy_port: int, pid: int, publish, channel: bytes) -> float:
    """100 MB of messages for a RESP3 subscriber that reads none: how much the proxy grew (MB).
    Its upstream connection is paused, and the server holds the rest (or, past its pub/sub
    client-output-buffer-limit, drops that connection, and the proxy the client)."""
    sock = socket.create_connection(("127.0.0.1", proxy_port), timeout=5)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    try:
        sock.sendall(HELLO3 + b"SUBSCRIBE " + channel + b"\r\n")
        read_until_quiet(sock)
        before = rss_mb(pid)
        for _ in range(100):
            publish(channel, b"m" * (1024 * 1024))
        time.sleep(0.5)
        return rss_mb(pid) - before
    finally:
        sock.close()


def test_a_subscriber_that_does_not_read_holds_the_proxys_memory_bounded(t1_proxied):
    publisher = redis.Redis(port=t1_proxied[0].port)
    try:
        grown = flood_a_subscriber_that_does_not_read(t1_proxied[1].port, t1_proxied[1].process.pid, publisher.publish,
                                                      b"ps:flooded")
    finally:
        publisher.close()
    assert grown < 40, f"the proxy grew by {grown:.0f} MB for a subscriber that does not read"

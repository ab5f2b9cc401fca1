"""CLIENT TRACKING through the proxy in front of one server: the client keeps a connection of its
own, its invalidation pushes reach it apart from its replies, and the replies stay paired with
its commands, so the policy works there as anywhere (T1's own EXPIRE, counted refusals)."""

import re
import socket
import threading
import time

import hiredis
import pytest
import redis

from tests.servers import ProxyProcess, RedisServer, exchange, read_until_quiet

POLICY = "name: tracking\nrules:\n  T1: {action: inject, default_ttl: 600}\n"


@pytest.fixture
def proxied(tmp_path):
    server = RedisServer()
    (tmp_path / "policy.yaml").write_text(POLICY)
    (tmp_path / "config.yaml").write_text("policy: policy.yaml\n")
    process = ProxyProcess(server.url, str(tmp_path / "config.yaml"))
    yield server, process
    process.stop()
    server.close()


class Resp3Client:
    """A raw RESP3 connection: replies and pushes apart, in the order they came."""

    def __init__(self, port: int):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.reader = hiredis.Reader()
        self.values = []  # (is a push, value) in order

    def send(self, *commands) -> None:
        self.sock.sendall(b"".join(hiredis.pack_command(tuple(command)) for command in commands))

    def replies(self, count: int, deadline: float = 5.0) -> list:
        """The next `count` replies (pushes before and among them are kept in `values`)."""
        end = time.monotonic() + deadline
        got = []
        while len(got) < count:
            value = self.reader.gets()
            if value is False:
                assert time.monotonic() < end, f"{len(got)} of {count} replies"
                self.reader.feed(self.sock.recv(65536))
                continue
            push = isinstance(value, hiredis.PushNotification)
            self.values.append((push, value))
            if not push:
                got.append(value)
        return got

    def drain(self, seconds: float) -> None:
        """Whatever comes in `seconds` (pushes)."""
        self.sock.settimeout(seconds)
        try:
            while True:
                data = self.sock.recv(65536)
                if not data:
                    break
                self.reader.feed(data)
        except TimeoutError:
            pass
        while (value := self.reader.gets()) is not False:
            self.values.append((isinstance(value, hiredis.PushNotification), value))

    def close(self) -> None:
        self.sock.close()


def test_invalidations_reach_the_tracking_client_and_the_policy_applies(proxied):
    server, process = proxied
    direct = redis.Redis(port=server.port)
    direct.set("k:1", "old", ex=60)
    client = Resp3Client(process.port)
    try:
        client.send(["HELLO", "3"], ["CLIENT", "TRACKING", "ON"], ["GET", "k:1"])
        assert client.replies(3)[1:] == [b"OK", b"old"]
        direct.set("k:1", "new", ex=60)
        client.send(["HSET", "h:1", "f", "v"], ["PING"])  # T1 adds its EXPIRE ... NX: its reply unseen
        assert client.replies(2) == [1, b"PONG"]
        pushes = [value for push, value in client.values if push]
        assert pushes == [[b"invalidate", [b"k:1"]]]
        assert 0 < direct.ttl("h:1") <= 600
        client.send(["CLIENT", "TRACKING", "OFF"], ["GET", "k:1"])
        assert client.replies(2) == [b"OK", b"new"]
    finally:
        client.close()


def test_replies_stay_paired_while_invalidations_race_them(proxied):
    """A tracking client reads keys another client keeps writing. Its replies must come in the
    order of its commands, and every key whose last read was followed by a write must be
    invalidated after that read: what keeps a client's cache right."""
    server, process = proxied
    keys = [f"k:{i}" for i in range(20)]
    direct = redis.Redis(port=server.port)
    for key in keys:
        direct.set(key, "0", ex=600)
    client = Resp3Client(process.port)
    writes_done = threading.Event()

    def writer():
        w = redis.Redis(port=process.port)
        for round_ in range(1, 51):
            w.mset({key: str(round_) for key in keys})
            time.sleep(0.001)
        writes_done.set()

    try:
        client.send(["HELLO", "3"], ["CLIENT", "TRACKING", "ON"])
        client.replies(2)
        thread = threading.Thread(target=writer)
        thread.start()
        reads = 0
        while not writes_done.is_set() and reads < 20000:
            commands = [["GET", key] for key in keys] + [["ECHO", f"mark{reads}"]]
            client.send(*commands)
            replies = client.replies(len(commands))
            assert replies[-1] == f"mark{reads}".encode()
            assert all(value.isdigit() for value in replies[:-1]), replies
            reads += len(commands)
        thread.join(10)
        client.drain(0.5)
        # A read that returned a value older than the final write must be followed by an
        # invalidation of its key.
        final = direct.mget(keys)
        stale = {}
        read_index = 0
        for push, value in client.values[2:]:
            if push:
                for key in value[1] or [key.encode() for key in keys]:  # None: every key
                    stale.pop(key.decode(), None)
                continue
            if isinstance(value, bytes) and value.isdigit():
                key = keys[read_index % len(keys)]
                read_index += 1
                if value != final[keys.index(key)]:
                    stale[key] = value
                else:
                    stale.pop(key, None)
        assert reads > 0 and stale == {}
    finally:
        client.close()


def test_redirected_invalidations_reach_the_subscriber(proxied):
    """RESP2: invalidations go to another connection (REDIRECT), a subscriber of
    __redis__:invalidate; the tracking connection itself gets no pushes, only its replies."""
    server, process = proxied
    direct = redis.Redis(port=server.port)
    direct.set("r:1", "a", ex=60)
    subscriber, tracker = Resp3Client(process.port), Resp3Client(process.port)
    try:
        subscriber.send(["CLIENT", "ID"], ["SUBSCRIBE", "__redis__:invalidate"])
        client_id, confirmed = subscriber.replies(2)
        assert confirmed == [b"subscribe", b"__redis__:invalidate", 1]
        tracker.send(["CLIENT", "TRACKING", "ON", "REDIRECT", str(client_id)], ["GET", "r:1"])
        assert tracker.replies(2) == [b"OK", b"a"]
        direct.set("r:1", "b", ex=60)
        assert subscriber.replies(1) == [[b"message", b"__redis__:invalidate", [b"r:1"]]]
        tracker.send(["GET", "r:1"], ["PING"])
        assert tracker.replies(2) == [b"b", b"PONG"] and not any(push for push, _ in tracker.values)
    finally:
        subscriber.close()
        tracker.close()


HELLO_ID = re.compile(rb"\$2\r\nid\r\n:\d+\r\n")  # the proxy numbers its clients itself
TRACKED = b"HELLO 3\r\nCLIENT TRACKING ON\r\nSET trk:k a\r\nGET trk:k\r\nSET trk:k v\r\n"  # its own write invalidates it
ENDINGS = [("then a command", b"PING\r\n"), ("then quit", b"QUIT\r\n"), ("then malformed", b"*1\r\n$x\r\n")]


@pytest.mark.parametrize("name,ending", ENDINGS, ids=[case[0] for case in ENDINGS])
def test_a_push_after_the_last_reply_comes_before_the_end(redis_server, proxy, name, ending):
    """The server pushes the invalidation of a key the client wrote right after the write's reply.
    QUIT or a protocol error right behind it went unanswered by the server: the proxy answered
    and closed, and the push was lost. They go to the server now, which writes the push first."""
    for _ in range(10):
        direct, through = exchange(redis_server.port, TRACKED + ending), exchange(proxy.port, TRACKED + ending)
        assert (HELLO_ID.sub(b"", through[0]), through[1]) == (HELLO_ID.sub(b"", direct[0]), direct[1])
        assert b">2\r\n$10\r\ninvalidate\r\n" in direct[0]


def test_tracking_turned_on_in_a_transaction(redis_server, proxy):
    """CLIENT TRACKING queued in MULTI: the transaction's connection stays the client's, and the
    invalidation of a key read in it arrives as Redis sends it."""

    def run(port):
        sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        try:
            sock.sendall(b"HELLO 3\r\nMULTI\r\nCLIENT TRACKING ON\r\nGET trk:m\r\nEXEC\r\n")
            first, _ = read_until_quiet(sock)
            redis.Redis(port=redis_server.port).set("trk:m", "x")
            sock.sendall(b"PING\r\nSET trk:m y\r\nQUIT\r\n")
            then, closed = read_until_quiet(sock)
            return HELLO_ID.sub(b"", first + then), closed
        finally:
            sock.close()
            redis.Redis(port=redis_server.port).delete("trk:m")

    direct = run(redis_server.port)
    assert direct[1] and direct[0].endswith(b"*2\r\n+OK\r\n_\r\n>2\r\n$10\r\ninvalidate\r\n*1\r\n$5\r\ntrk:m\r\n+PONG\r\n+OK\r\n+OK\r\n")
    assert run(proxy.port) == direct

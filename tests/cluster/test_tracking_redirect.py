"""CLIENT TRACKING ... REDIRECT in front of a cluster (cluster/redirects.py): a session of the
same client may be named, and gets the invalidations one Redis server would send it (a RESP3
push; a RESP2 subscriber's `__redis__:invalidate` message), nothing reaches any other client;
any other id gets Redis's own error; a RESP3 tracking client whose target is gone gets
`tracking-redir-broken`; the proxy's connections for it go with the client."""

import re
import socket
import time

import pytest

from proxy.backends.cluster.redirects import accepted, for_target, named
from proxy.session.clientkill import NO_SUCH_ID
from tests.cluster.test_isolation_findings import keys_on_every_master
from tests.servers import wait_for

NO_SUCH_CLIENT = b"-ERR The client ID you want redirect to does not exist\r\n"


class Raw:
    """A raw client of the proxy: what it sends, every byte it is shown."""

    def __init__(self, port: int, hello: bool = False):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.seen = b""
        if hello:
            self.ask(b"HELLO 3\r\n", lambda data: data.endswith(b"\r\n") and b"modules" in data)

    def ask(self, request: bytes, done, timeout: float = 10.0) -> bytes:
        start = len(self.seen)
        self.sock.sendall(request)
        self.read(lambda data: done(data[start:]), timeout)
        return self.seen[start:]

    def read(self, done, timeout: float = 10.0) -> bytes:
        deadline = time.monotonic() + timeout
        self.sock.settimeout(0.1)
        while not done(self.seen) and time.monotonic() < deadline:
            try:
                chunk = self.sock.recv(65536)
            except TimeoutError:
                continue
            if not chunk:
                break
            self.seen += chunk
        return self.seen

    def client_id(self) -> int:
        reply = self.ask(b"CLIENT ID\r\n", lambda data: data.endswith(b"\r\n"))
        assert reply.startswith(b":"), reply
        return int(reply[1:-2])

    def mark(self) -> bytes:
        """Everything the proxy owes before a PING's reply (a round trip: nothing still in flight)."""
        self.ask(b"ECHO mark\r\n", lambda data: data.endswith(b"$4\r\nmark\r\n"))
        return self.seen

    def close(self) -> None:
        self.sock.close()


def _command(*words) -> bytes:
    return b"*%d\r\n" % len(words) + b"".join(b"$%d\r\n%s\r\n" % (len(word), word) for word in words)


def _tracked_key(cluster, keys) -> bytes:
    """The key of a master where a tracking connection is (CLIENT LIST's flags=t): the stream's,
    or, once the client's tracking reaches the others (BCAST, reads there: tracked.py), any."""
    def master():
        found = [node for node in cluster.masters()
                 if any("t" in row["flags"] for row in cluster.client(node).client_list())]
        return found[0] if found else None
    wait_for(lambda: master() is not None, 10, "one master with the tracking connection")
    node = master()
    return next(key for key in keys if cluster.master_for_key(key.decode()).port == node.port)


def _invalidate(key: bytes) -> bytes:
    return b">2\r\n$10\r\ninvalidate\r\n*1\r\n$%d\r\n%s\r\n" % (len(key), key)


def _message(key: bytes) -> bytes:
    return b"*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n*1\r\n$%d\r\n%s\r\n" % (len(key), key)


OK = lambda data: data.endswith(b"\r\n")  # noqa: E731


@pytest.mark.parametrize("protocols", [(3, 3), (2, 3), (3, 2), (2, 2)],
                         ids=["resp3-to-resp3", "resp2-to-resp3", "resp3-to-resp2", "resp2-to-resp2"])
def test_invalidations_reach_the_target_only(redis_cluster, cluster_proxy, protocols):
    """A tracking client redirects to another session: the key it read is invalidated there, in
    the target's protocol, once; nothing reaches the tracking client, the writer or a bystander."""
    tracker_resp, target_resp = protocols
    name = "tr%d%d" % protocols
    keys = keys_on_every_master(redis_cluster, name)
    tracker, target = Raw(cluster_proxy.port, tracker_resp == 3), Raw(cluster_proxy.port, target_resp == 3)
    writer, bystander = Raw(cluster_proxy.port), Raw(cluster_proxy.port, True)
    try:
        target_id = target.client_id()
        if target_resp == 2:
            subscribed = target.ask(b"SUBSCRIBE __redis__:invalidate\r\n", OK)
            assert subscribed.endswith(b":1\r\n"), subscribed
        assert tracker.ask(b"CLIENT TRACKING ON REDIRECT %d\r\n" % target_id, OK) == b"+OK\r\n"
        key = _tracked_key(redis_cluster, keys)
        writer.ask(b"SET %s v1\r\n" % key, OK)
        assert tracker.ask(b"GET %s\r\n" % key, OK) == b"$2\r\nv1\r\n"
        assert writer.ask(b"SET %s v2\r\n" % key, OK) == b"+OK\r\n"
        expected = _invalidate(key) if target_resp == 3 else _message(key)
        shown = target.read(lambda data: expected in data)
        assert shown.count(expected) == 1, shown
        before_mark = len(target.seen)
        if target_resp == 3:
            target.mark()
            assert target.seen[before_mark:] == b"$4\r\nmark\r\n"
        for other in (tracker, writer, bystander):
            seen = other.mark()
            assert b"invalidate" not in seen, seen
        # (the tracking client's own reads go on: its replies unchanged)
        assert tracker.ask(b"GET %s\r\n" % key, OK) == b"$2\r\nv2\r\n"
    finally:
        for client in (tracker, target, writer, bystander):
            client.close()


def _target_sees(port: int, tracker_resp: int, target_resp: int, key: bytes, event: bytes, cluster=None) -> bytes:
    """What a redirect target is shown after `event`, the tracking client having read `key`."""
    tracker, target, writer = Raw(port, tracker_resp == 3), Raw(port, target_resp == 3), Raw(port)
    try:
        target_id = target.client_id()
        if target_resp == 2:
            target.ask(b"SUBSCRIBE __redis__:invalidate\r\n", OK)
        assert tracker.ask(b"CLIENT TRACKING ON REDIRECT %d\r\n" % target_id, OK) == b"+OK\r\n"
        if cluster is not None:
            key = _tracked_key(cluster, key)
        writer.ask(b"SET %s v\r\n" % key, OK)
        tracker.ask(b"GET %s\r\n" % key, OK)
        start = len(target.seen)
        writer.ask(event.replace(b"KEY", key), OK)
        target.read(lambda data: len(data) > start and data.endswith(b"\r\n"), 5)
        time.sleep(0.3)
        return target.read(lambda data: False, 0.3)[start:]
    finally:
        for client in (tracker, target, writer):
            client.close()


@pytest.mark.parametrize("event", [b"SET KEY w\r\n", b"DEL KEY\r\n", b"FLUSHALL\r\n"], ids=["set", "del", "flushall"])
@pytest.mark.parametrize("protocols", [(3, 3), (2, 3), (3, 2), (2, 2)],
                         ids=["resp3-to-resp3", "resp2-to-resp3", "resp3-to-resp2", "resp2-to-resp2"])
def test_the_target_sees_what_one_server_shows_it(redis_cluster, cluster_proxy, one_node_cluster, protocols, event):
    """The bytes a redirect target is shown for a write and for FLUSHALL (whose null is the
    tracking client's protocol's) are those one server shows it."""
    direct = _target_sees(one_node_cluster.port, *protocols, b"{k1}tsee", event)
    through = _target_sees(cluster_proxy.port, *protocols, keys_on_every_master(redis_cluster, "tsee"), event,
                           redis_cluster)
    assert direct.count(b"invalidate") == 1, direct
    key = re.compile(rb"\$\d+\r\n\{k\d+\}tsee\r\n")  # (the keys differ by their hash tag)
    assert key.sub(b"KEY", through) == key.sub(b"KEY", direct), (through, direct)


def test_a_resp2_target_not_subscribed_gets_nothing(redis_cluster, cluster_proxy):
    """Redis sends a RESP2 redirect target nothing while it is not subscribed."""
    keys = keys_on_every_master(redis_cluster, "tr2n")
    tracker, target, writer = Raw(cluster_proxy.port, True), Raw(cluster_proxy.port), Raw(cluster_proxy.port)
    try:
        target_id = target.client_id()
        assert tracker.ask(b"CLIENT TRACKING ON REDIRECT %d\r\n" % target_id, OK) == b"+OK\r\n"
        key = _tracked_key(redis_cluster, keys)
        tracker.ask(b"GET %s\r\n" % key, OK)
        writer.ask(b"SET %s v\r\n" % key, OK)
        time.sleep(0.3)
        assert b"invalidate" not in target.mark() + tracker.mark()
    finally:
        for client in (tracker, target, writer):
            client.close()


@pytest.mark.parametrize("protocol", [2, 3])
def test_redirect_to_itself(redis_cluster, cluster_proxy, protocol):
    """REDIRECT naming the tracking client itself: in RESP3 its own push; in RESP2 nothing (it is
    not subscribed), as Redis does."""
    keys = keys_on_every_master(redis_cluster, f"trself{protocol}")
    tracker, writer = Raw(cluster_proxy.port, protocol == 3), Raw(cluster_proxy.port)
    try:
        own = tracker.client_id()
        assert tracker.ask(b"CLIENT TRACKING ON REDIRECT %d\r\n" % own, OK) == b"+OK\r\n"
        key = _tracked_key(redis_cluster, keys)
        tracker.ask(b"GET %s\r\n" % key, OK)
        writer.ask(b"SET %s v\r\n" % key, OK)
        if protocol == 3:
            assert tracker.read(lambda data: _invalidate(key) in data).count(_invalidate(key)) == 1
        else:
            time.sleep(0.3)
            assert b"invalidate" not in tracker.mark()
        assert tracker.ask(b"CLIENT TRACKING OFF REDIRECT %d\r\n" % own, OK) == b"+OK\r\n"
    finally:
        tracker.close()
        writer.close()


def _subscribed_self_sees(port: int, key: bytes, cluster=None) -> bytes:
    """A RESP2 client redirecting its BCAST tracking to itself, then subscribed to
    `__redis__:invalidate`: what it is shown once `key` is written."""
    tracker, writer = Raw(port), Raw(port)
    try:
        own = tracker.client_id()
        assert tracker.ask(b"CLIENT TRACKING ON REDIRECT %d BCAST PREFIX {k\r\n" % own, OK) == b"+OK\r\n"
        if cluster is not None:
            key = _tracked_key(cluster, key)
        tracker.ask(b"SUBSCRIBE __redis__:invalidate\r\n", OK)
        start = len(tracker.seen)
        writer.ask(b"SET %s v\r\n" % key, OK)
        tracker.read(lambda data: len(data) > start and data.endswith(b"\r\n"), 5)
        time.sleep(0.3)
        return tracker.read(lambda data: False, 0.3)[start:]
    finally:
        tracker.close()
        writer.close()


def test_a_resp2_subscriber_redirecting_to_itself(redis_cluster, cluster_proxy, one_node_cluster):
    """In RESP2, REDIRECT to itself then SUBSCRIBE: its invalidations come as messages, as one
    server shows them."""
    direct = _subscribed_self_sees(one_node_cluster.port, b"{k1}tself")
    through = _subscribed_self_sees(cluster_proxy.port, keys_on_every_master(redis_cluster, "tself"), redis_cluster)
    assert direct.startswith(b"*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n"), direct
    key = re.compile(rb"\$\d+\r\n\{k\d+\}tself\r\n")
    assert key.sub(b"KEY", through) == key.sub(b"KEY", direct), (through, direct)


def test_ids_of_no_session_of_the_client_are_refused_as_redis_refuses_them(redis_cluster, cluster_proxy):
    """A node's own connection ids, an id no session has, a closed session's: Redis's error, and
    the tracking client is not tracking (nothing started). (The proxy's numbers and a node's are
    both small: the tracking client's own, the one live session here, is left out.)"""
    tracker = Raw(cluster_proxy.port, True)
    own = tracker.client_id()
    gone = Raw(cluster_proxy.port)
    gone_id = gone.client_id()
    gone.close()
    try:
        node_ids = [int(row["id"]) for master in redis_cluster.masters()
                    for row in redis_cluster.client(master).client_list()]
        for client_id in [*node_ids, gone_id, 0, 987654321]:
            if client_id == own:
                continue
            reply = tracker.ask(b"CLIENT TRACKING ON REDIRECT %d\r\n" % client_id, OK)
            if client_id == gone_id and reply == b"+OK\r\n":  # (the proxy may not have seen it go yet)
                time.sleep(0.5)
                reply = tracker.ask(b"CLIENT TRACKING ON REDIRECT %d\r\n" % client_id, OK)
            assert reply == NO_SUCH_CLIENT, (client_id, reply)
        assert tracker.ask(b"CLIENT TRACKING ON REDIRECT x\r\n", OK).startswith(b"-ERR value is not an integer")
        assert tracker.ask(b"CLIENT TRACKING ON BOGUS REDIRECT 7\r\n", OK) == b"-ERR syntax error\r\n"
        assert not any("t" in row["flags"] for master in redis_cluster.masters()
                       for row in redis_cluster.client(master).client_list())
    finally:
        tracker.close()


def test_target_gone_tells_a_resp3_tracker_redirect_broken(redis_cluster, cluster_proxy):
    keys = keys_on_every_master(redis_cluster, "trgone")
    tracker, target, writer = Raw(cluster_proxy.port, True), Raw(cluster_proxy.port, True), Raw(cluster_proxy.port)
    try:
        target_id = target.client_id()
        assert tracker.ask(b"CLIENT TRACKING ON REDIRECT %d\r\n" % target_id, OK) == b"+OK\r\n"
        key = _tracked_key(redis_cluster, keys)
        tracker.ask(b"GET %s\r\n" % key, OK)
        target.close()
        time.sleep(0.3)
        writer.ask(b"SET %s v\r\n" % key, OK)
        broken = b">2\r\n$21\r\ntracking-redir-broken\r\n:%d\r\n" % target_id
        assert broken in tracker.read(lambda data: broken in data), tracker.seen
        assert b"invalidate" not in writer.mark()
    finally:
        for client in (tracker, target, writer):
            client.close()


def _redirs(cluster) -> set:
    """(master port, the id its tracking clients redirect to) over every master."""
    return {(master.port, int(row["redir"])) for master in cluster.masters()
            for row in cluster.client(master).client_list() if "t" in row["flags"]}


def _alive(cluster, port: int, client_id: int) -> bool:
    master = next(master for master in cluster.masters() if master.port == port)
    return any(int(row["id"]) == client_id for row in cluster.client(master).client_list())


def test_switching_targets_and_turning_off(redis_cluster, cluster_proxy):
    """ON REDIRECT a, then ON REDIRECT b: the next invalidation goes to b only, the proxy's
    connection for a closes; after OFF to nobody; the proxy's connection for b closes with the
    tracking client."""
    keys = keys_on_every_master(redis_cluster, "trsw")
    tracker, first, second, writer = (Raw(cluster_proxy.port, True) for _ in range(4))
    try:
        first_id, second_id = first.client_id(), second.client_id()
        assert tracker.ask(b"CLIENT TRACKING ON REDIRECT %d\r\n" % first_id, OK) == b"+OK\r\n"
        key = _tracked_key(redis_cluster, keys)
        (port, first_sink), = _redirs(redis_cluster)
        assert _alive(redis_cluster, port, first_sink)
        tracker.ask(b"GET %s\r\n" % key, OK)
        assert tracker.ask(b"CLIENT TRACKING ON REDIRECT %d\r\n" % second_id, OK) == b"+OK\r\n"
        (_, second_sink), = _redirs(redis_cluster)
        assert second_sink != first_sink
        wait_for(lambda: not _alive(redis_cluster, port, first_sink), 10, "the first target's sink closed")
        writer.ask(b"SET %s v1\r\n" % key, OK)
        assert second.read(lambda data: _invalidate(key) in data).count(_invalidate(key)) == 1
        assert b"invalidate" not in first.mark()
        tracker.ask(b"GET %s\r\n" % key, OK)
        assert tracker.ask(b"CLIENT TRACKING OFF\r\n", OK) == b"+OK\r\n"
        writer.ask(b"SET %s v2\r\n" % key, OK)
        time.sleep(0.3)
        assert second.mark().count(b"invalidate") == 1 and b"invalidate" not in first.mark()
        assert _alive(redis_cluster, port, second_sink)  # (until the stream ends)
        tracker.close()
        wait_for(lambda: not _alive(redis_cluster, port, second_sink), 10, "the sink closed with the client")
    finally:
        for client in (tracker, first, second, writer):
            client.close()


@pytest.mark.parametrize("protocol", [2, 3])
def test_client_id_on_a_stream_is_the_proxy_s_number(redis_cluster, cluster_proxy, protocol):
    """CLIENT ID once the client streams (tracking, a RESP2 subscriber, replies off) is what it
    was, or what the master says there (a RESP2 subscriber's refusal, nothing with replies off):
    never the id of the proxy's connection on the master."""
    tracker = Raw(cluster_proxy.port, protocol == 3)
    try:
        own = tracker.client_id()
        assert tracker.ask(b"CLIENT TRACKING ON\r\n", OK) == b"+OK\r\n"
        assert tracker.client_id() == own
        # (pipelined with the REDIRECT that names it, and what follows)
        reply = tracker.ask(b"CLIENT ID\r\nCLIENT TRACKING ON REDIRECT %d\r\nCLIENT ID\r\nPING\r\n" % own,
                            lambda data: data.endswith(b"PONG\r\n"))
        assert reply == b":%d\r\n+OK\r\n:%d\r\n+PONG\r\n" % (own, own), reply
        reply = tracker.ask(b"CLIENT REPLY OFF\r\nCLIENT ID\r\nCLIENT REPLY ON\r\nCLIENT ID\r\n", OK)
        assert reply == b"+OK\r\n:%d\r\n" % own, reply
    finally:
        tracker.close()
    if protocol == 2:
        subscriber = Raw(cluster_proxy.port)
        try:
            subscriber.ask(b"SUBSCRIBE ch\r\n", OK)
            refused = subscriber.ask(b"CLIENT ID\r\n", OK)
            assert refused.startswith(b"-ERR Can't execute 'client|id'"), refused
        finally:
            subscriber.close()


@pytest.mark.parametrize("protocol", [2, 3])
def test_getredir_and_trackinginfo_name_the_target(redis_cluster, cluster_proxy, protocol):
    """CLIENT GETREDIR and TRACKINGINFO show the id the client named, as one server shows it
    (never the id of the proxy's connection the master redirects to); 0 without REDIRECT, -1
    when tracking is off."""
    tracker, target = Raw(cluster_proxy.port, protocol == 3), Raw(cluster_proxy.port)
    try:
        target_id = target.client_id()
        assert tracker.ask(b"CLIENT GETREDIR\r\n", OK) == b":-1\r\n"
        assert tracker.ask(b"CLIENT TRACKING ON REDIRECT %d\r\n" % target_id, OK) == b"+OK\r\n"
        assert tracker.ask(b"CLIENT GETREDIR\r\n", OK) == b":%d\r\n" % target_id
        info = tracker.ask(b"CLIENT TRACKINGINFO\r\n", lambda data: data.endswith(b"prefixes\r\n*0\r\n"))
        assert b"$8\r\nredirect\r\n:%d\r\n" % target_id in info, info
        assert info.startswith(b"%3\r\n" if protocol == 3 else b"*6\r\n"), info
        assert tracker.ask(b"CLIENT TRACKING ON\r\n", OK) == b"+OK\r\n"
        assert tracker.ask(b"CLIENT GETREDIR\r\n", OK) == b":0\r\n"
        assert tracker.ask(b"CLIENT TRACKING OFF\r\n", OK) == b"+OK\r\n"
        assert tracker.ask(b"CLIENT GETREDIR\r\n", OK) == b":-1\r\n"
    finally:
        tracker.close()
        target.close()


def test_with_replies_off_and_after_reset(redis_cluster, cluster_proxy):
    """A REDIRECT sent while replies are off (its answer unseen) still takes effect (BCAST: after
    CLIENT REPLY OFF the stream's reads go to the shared connections); RESET ends the tracking,
    and the proxy's connection for it closes."""
    keys = keys_on_every_master(redis_cluster, "troff")
    tracker, target, writer = Raw(cluster_proxy.port, True), Raw(cluster_proxy.port, True), Raw(cluster_proxy.port)
    try:
        target_id = target.client_id()
        reply = tracker.ask(b"CLIENT REPLY OFF\r\nCLIENT TRACKING ON REDIRECT %d BCAST PREFIX {k\r\n"
                            b"CLIENT REPLY ON\r\n" % target_id, OK)
        assert reply == b"+OK\r\n", reply
        key = _tracked_key(redis_cluster, keys)
        # (BCAST: a sink on every master, tracked.py)
        wait_for(lambda: len(_redirs(redis_cluster)) == 3, 10, "a sink on every master")
        sinks = _redirs(redis_cluster)
        for key in keys:
            writer.ask(b"SET %s v\r\n" % key, OK)
            expected = _invalidate(key)
            assert target.read(lambda data, expected=expected: expected in data).count(expected) == 1
        assert tracker.ask(b"RESET\r\n", OK) == b"+RESET\r\n"
        wait_for(lambda: not any(_alive(redis_cluster, port, sink) for port, sink in sinks), 10,
                 "the sinks closed at RESET")
        assert not _redirs(redis_cluster)
    finally:
        for client in (tracker, target, writer):
            client.close()


def flood(writer, proxy_pid: int, long_name: bytes, count: int) -> int:
    """`count` SETs of `long_name` + a number, 100 a write; how much the proxy grew meanwhile."""
    before = _rss(proxy_pid)
    deadline = time.monotonic() + 120
    for start in range(0, count, 100):
        batch = b"".join(_command(b"SET", long_name + b"%d" % i, b"v") for i in range(start, start + 100))
        writer.ask(batch, lambda data: data.count(b"+OK\r\n") >= 100, 30)
        assert time.monotonic() < deadline
    return _rss(proxy_pid) - before


def count_marked(sock, marker: bytes, count: int, chunks: list | None = None) -> int:
    """Occurrences of `marker` read from `sock` until `count` came (or 60 s), counted as they come
    (linear; a marker cut across reads counted once); the bytes kept in `chunks` if given."""
    sock.settimeout(0.5)
    tail, seen = b"", 0
    read_deadline = time.monotonic() + 60
    while seen < count and time.monotonic() < read_deadline:
        try:
            chunk = sock.recv(1 << 20)
        except TimeoutError:
            continue
        if not chunk:
            break
        window = tail + chunk
        seen += window.count(marker) - tail.count(marker)
        tail = window[-len(marker) + 1:]
        if chunks is not None:
            chunks.append(chunk)
    return seen


def _rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def test_a_target_that_does_not_read_does_not_grow_the_proxy(redis_cluster, cluster_proxy):
    """30 MB of invalidations for a target that does not read: the proxy stops reading the sink
    (Redis holds the rest) and does not grow by them; once the target reads, every one comes."""
    keys = keys_on_every_master(redis_cluster, "trslow")
    tracker, target, writer = Raw(cluster_proxy.port, True), Raw(cluster_proxy.port, True), Raw(cluster_proxy.port)
    try:
        target_id = target.client_id()
        assert tracker.ask(b"CLIENT TRACKING ON REDIRECT %d BCAST PREFIX {k\r\n" % target_id, OK) == b"+OK\r\n"
        tag = _tracked_key(redis_cluster, keys).split(b"}")[0] + b"}"
        long_name = tag + b"n" * 10000
        count = 3000
        grown = flood(writer, cluster_proxy.process.pid, long_name, count)
        last = long_name + b"%d" % (count - 1)
        chunks = []
        seen = count_marked(target.sock, tag + b"nnnn", count, chunks)  # (each key once)
        shown = b"".join(chunks)
        # (BCAST: one push holds the keys changed in one turn of the server's loop)
        assert seen == count and shown.endswith(b"$%d\r\n%s\r\n" % (len(last), last)), (seen, shown[-200:])
        assert shown.startswith(b">2\r\n$10\r\ninvalidate\r\n*")
        assert grown < 12 * 1024 * 1024, grown  # (it would be 30 MB, buffered)
    finally:
        for client in (tracker, target, writer):
            client.close()


def test_pipelined_with_the_reads_it_tracks(redis_cluster, cluster_proxy):
    """HELLO 3, CLIENT TRACKING ON REDIRECT, GET in one write from a client that did not stream
    yet: the GET's key is tracked (its invalidation reaches the target)."""
    keys = keys_on_every_master(redis_cluster, "trpipe")
    target, writer = Raw(cluster_proxy.port, True), Raw(cluster_proxy.port)
    tracker = Raw(cluster_proxy.port)
    try:
        target_id = target.client_id()
        batch = b"HELLO 3\r\nCLIENT TRACKING ON REDIRECT %d\r\n" % target_id + b"".join(
            b"GET %s\r\n" % key for key in keys) + b"PING\r\n"
        reply = tracker.ask(batch, lambda data: data.endswith(b"+PONG\r\n"))
        assert reply.endswith(b"+OK\r\n_\r\n_\r\n_\r\n+PONG\r\n"), reply
        key = _tracked_key(redis_cluster, keys)
        writer.ask(b"SET %s v\r\n" % key, OK)
        assert target.read(lambda data: _invalidate(key) in data).count(_invalidate(key)) == 1
    finally:
        for client in (tracker, target, writer):
            client.close()


def test_sans_io_forms():
    args = [b"CLIENT", b"TRACKING", b"ON", b"PREFIX", b"redirect", b"REDIRECT", b"5", b"REDIRECT", b"6"]
    assert named(args, 42) == [b"CLIENT", b"TRACKING", b"ON", b"PREFIX", b"redirect", b"REDIRECT", b"42",
                               b"REDIRECT", NO_SUCH_ID]
    assert accepted(b">2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\nk\r\n+OK\r\n")
    assert not accepted(b"-ERR The client ID you want redirect to does not exist\r\n")
    assert not accepted(b"*3\r\n$7\r\nmessage\r\n$2\r\nOK\r\n$2\r\nOK\r\n")

    class Target:
        def __init__(self, protocol, subscriber):
            self.protocol = protocol
            self.stream = object() if subscriber else None
            self.backend = type("B", (), {"sides": {self: type("S", (), {"subscriber": subscriber})()}})()
    payload = b"*1\r\n$1\r\nk\r\n"
    assert for_target(Target(3, False), payload) == _invalidate(b"k")
    assert for_target(Target(2, True), payload) == _message(b"k")
    assert for_target(Target(2, False), payload) is None


class _Conn:
    def __init__(self, address="m1"):
        self.address = address
        self.closed = False
        self.sent = []
        self.owner = None
        self.pushes_to = None

    def send(self, data, pending):
        self.sent.append(data)

    def take_pushes(self, receiver):
        self.pushes_to = receiver

    def close(self):
        self.closed = True


class _Session:
    def __init__(self, protocol=3, life=None):
        from proxy.session.states import OPEN
        self.protocol = protocol
        self.state = type("State", (), {"life": life or OPEN})()
        self.shown = []
        self.waiting_for = None
        self.stream = None
        self.backend = type("B", (), {"sides": {}})()

    def answer_locally(self, data):
        self.shown.append(data)

    def pushing_behind(self, conn):
        pass

    def forget_upstream(self, conn):
        pass


def test_sinks_follow_what_redis_accepted_sans_io():
    """Accepted: the sink named is current, the one before drains (a PING, closed at its PONG);
    refused: the new one drains, the current stays; OFF: none is current."""
    from proxy.backends.cluster.redirects import PING, Sink, Sinks
    tracker, first, second = _Session(), _Session(), _Session()
    sinks = Sinks(tracker)
    a, b, c = (Sink(sinks, target, 7, _Conn()) for target in (first, second, second))
    for sink in (a, b, c):
        sink.start()
        sink.deliver(None, b":%d\r\n" % (40 + len(sinks.all())), 1)
    sinks.answered(a, True, False)
    assert sinks.current is a and not a.conn.sent[1:]
    sinks.answered(b, True, False)
    assert sinks.current is b and a.conn.sent[-1] == PING and a in sinks.draining
    a.deliver(None, b"+PONG\r\n", 1)
    assert a.closed and a.conn.closed and a not in sinks.all()
    sinks.answered(c, False, False)
    assert sinks.current is b and c.conn.sent[-1] == PING
    sinks.answered(b, True, True)  # OFF REDIRECT: tracking off, nothing redirected
    assert sinks.current is None and b.conn.sent[-1] == PING


def test_a_sink_hands_invalidations_to_its_target_sans_io():
    from proxy.backends.cluster.redirects import Sink, Sinks
    from proxy.session.states import CLOSED
    tracker, target = _Session(), _Session(protocol=3)
    sink = Sink(Sinks(tracker), target, 9, _Conn())
    push = _invalidate(b"k")
    sink.pushed(push)
    sink.pushed(b">3\r\n$7\r\nmessage\r\n$1\r\nc\r\n$1\r\nm\r\n")  # (nothing else is ever passed on)
    assert target.shown == [push] and tracker.shown == []
    target.protocol = 2  # (after RESET: RESP2, subscribed to nothing)
    sink.pushed(push)
    assert target.shown == [push]
    target.state.life = CLOSED
    sink.pushed(push)
    assert tracker.shown == [b">2\r\n$21\r\ntracking-redir-broken\r\n:9\r\n"]
    tracker.protocol = 2  # (Redis tells only a RESP3 tracking client)
    sink.pushed(push)
    assert len(tracker.shown) == 1


def test_inside_multi_refused_with_a_clear_error(cluster_proxy):
    """Inside MULTI a REDIRECT is refused (the transaction then aborts, as after any refusal)."""
    client = Raw(cluster_proxy.port)
    try:
        own = client.client_id()
        reply = client.ask(b"MULTI\r\nCLIENT TRACKING ON REDIRECT %d\r\nEXEC\r\nCLIENT GETREDIR\r\n" % own,
                           lambda data: data.endswith(b":-1\r\n"))
        assert reply.startswith(b"+OK\r\n-ERR CLIENT TRACKING REDIRECT inside MULTI is not supported"), reply
        assert b"-EXECABORT" in reply and reply.endswith(b":-1\r\n"), reply
    finally:
        client.close()

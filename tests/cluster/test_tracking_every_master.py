"""CLIENT TRACKING in front of a cluster covers every master (cluster/tracked.py): a tracking
client gets one invalidation per key it read that another client then writes, whatever master
holds it, in its own stream (RESP3) or at its REDIRECT target; none for keys it did not read;
BCAST over every master; NOLOOP; OFF; RESET closes the proxy's connections for it."""

import time

import pytest

from tests.cluster.test_isolation_findings import keys_on_every_master
from tests.cluster.test_tracking_redirect import OK, Raw, _invalidate, _message
from tests.servers import redis_server_version, wait_for


def _tracking_conns(cluster) -> int:
    """The nodes' connections that track (CLIENT LIST flags=t)."""
    return sum(1 for node in cluster.masters() for row in cluster.client(node).client_list() if "t" in row["flags"])


def _read_all(client, keys) -> None:
    for key in keys:
        reply = client.ask(b"GET %s\r\n" % key, OK)
        assert reply[:1] in (b"$", b"_"), (key, reply)


def test_resp3_tracking_covers_every_master(redis_cluster, cluster_proxy):
    keys = keys_on_every_master(redis_cluster, "tem3")
    unread = keys_on_every_master(redis_cluster, "temu")
    tracker, writer = Raw(cluster_proxy.port, True), Raw(cluster_proxy.port)
    try:
        for key in keys + unread:
            writer.ask(b"SET %s v1\r\n" % key, OK)
        assert tracker.ask(b"CLIENT TRACKING ON\r\n", OK) == b"+OK\r\n"
        _read_all(tracker, keys)
        assert _tracking_conns(redis_cluster) == 3
        for key in keys + unread:
            assert writer.ask(b"SET %s v2\r\n" % key, OK) == b"+OK\r\n"
        seen = tracker.read(lambda data: all(_invalidate(key) in data for key in keys))
        time.sleep(0.3)
        seen = tracker.mark()
        for key in keys:
            assert seen.count(_invalidate(key)) == 1, (key, seen)
        for key in unread:
            assert key not in seen, seen
        # (read again: tracked again, invalidated again once)
        for key in keys:
            assert tracker.ask(b"GET %s\r\n" % key, OK) == b"$2\r\nv2\r\n"
        for key in keys:
            writer.ask(b"DEL %s\r\n" % key, OK)
        seen = tracker.read(lambda data: all(data.count(_invalidate(key)) == 2 for key in keys))
        for key in keys:
            assert seen.count(_invalidate(key)) == 2, seen
        tracker.close()  # (the client gone: its connections aside go with it)
        wait_for(lambda: _tracking_conns(redis_cluster) == 0, 10, "no tracking connection left")
    finally:
        tracker.close()
        writer.close()


@pytest.mark.parametrize("target_resp", [2, 3])
def test_resp2_redirect_covers_every_master(redis_cluster, cluster_proxy, target_resp):
    keys = keys_on_every_master(redis_cluster, "tem2%d" % target_resp)
    tracker, target, writer = Raw(cluster_proxy.port), Raw(cluster_proxy.port, target_resp == 3), Raw(cluster_proxy.port)
    try:
        target_id = target.client_id()
        if target_resp == 2:
            assert target.ask(b"SUBSCRIBE __redis__:invalidate\r\n", OK).endswith(b":1\r\n")
        assert tracker.ask(b"CLIENT TRACKING ON REDIRECT %d\r\n" % target_id, OK) == b"+OK\r\n"
        for key in keys:
            writer.ask(b"SET %s v1\r\n" % key, OK)
        _read_all(tracker, keys)
        for key in keys:
            writer.ask(b"SET %s v2\r\n" % key, OK)
        form = _invalidate if target_resp == 3 else _message
        seen = target.read(lambda data: all(form(key) in data for key in keys))
        time.sleep(0.3)
        if target_resp == 3:
            seen = target.mark()
        for key in keys:
            assert seen.count(form(key)) == 1, (key, seen)
        assert b"invalidate" not in tracker.mark()
    finally:
        for client in (tracker, target, writer):
            client.close()


def test_noloop_and_off(redis_cluster, cluster_proxy):
    keys = keys_on_every_master(redis_cluster, "temn")
    tracker, writer = Raw(cluster_proxy.port, True), Raw(cluster_proxy.port)
    try:
        assert tracker.ask(b"CLIENT TRACKING ON NOLOOP\r\n", OK) == b"+OK\r\n"
        for key in keys:
            tracker.ask(b"SET %s mine\r\n" % key, OK)
        _read_all(tracker, keys)
        for key in keys:  # its own writes: not notified
            assert tracker.ask(b"SET %s mine2\r\n" % key, OK) == b"+OK\r\n"
        time.sleep(0.3)
        assert b"invalidate" not in tracker.mark()
        _read_all(tracker, keys)
        for key in keys:  # another's: notified
            writer.ask(b"SET %s theirs\r\n" % key, OK)
        seen = tracker.read(lambda data: all(_invalidate(key) in data for key in keys))
        for key in keys:
            assert seen.count(_invalidate(key)) == 1, seen
        _read_all(tracker, keys)
        assert tracker.ask(b"CLIENT TRACKING OFF\r\n", OK) == b"+OK\r\n"
        before = len(tracker.mark())
        for key in keys:
            writer.ask(b"SET %s after\r\n" % key, OK)
        time.sleep(0.3)
        assert b"invalidate" not in tracker.mark()[before:]
        wait_for(lambda: _tracking_conns(redis_cluster) == 0, 10, "no connection tracks after OFF")
    finally:
        tracker.close()
        writer.close()


def test_bcast_prefixes_over_every_master_and_reset(redis_cluster, cluster_proxy):
    keys = keys_on_every_master(redis_cluster, "temb")
    tracker, writer = Raw(cluster_proxy.port, True), Raw(cluster_proxy.port)
    try:
        assert tracker.ask(b"CLIENT TRACKING ON BCAST PREFIX {k\r\n", OK) == b"+OK\r\n"
        tracker.mark()
        wait_for(lambda: _tracking_conns(redis_cluster) == 3, 10, "a tracking connection on every master")
        for key in keys:  # never read: BCAST tells all the same
            writer.ask(b"SET %s v\r\n" % key, OK)
        writer.ask(b"SET other v\r\n", OK)
        seen = tracker.read(lambda data: all(_invalidate(key) in data for key in keys))
        time.sleep(0.3)
        seen = tracker.mark()
        for key in keys:
            assert seen.count(_invalidate(key)) == 1, seen
        assert b"other" not in seen
        assert tracker.ask(b"RESET\r\n", OK) == b"+RESET\r\n"
        wait_for(lambda: _tracking_conns(redis_cluster) == 0, 10, "the connections aside closed at RESET")
    finally:
        tracker.close()
        writer.close()


def test_optin_caching_yes_on_another_master(redis_cluster, cluster_proxy):
    keys = keys_on_every_master(redis_cluster, "temo")
    tracker, writer = Raw(cluster_proxy.port, True), Raw(cluster_proxy.port)
    try:
        assert tracker.ask(b"CLIENT TRACKING ON OPTIN\r\n", OK) == b"+OK\r\n"
        for key in keys:
            writer.ask(b"SET %s v\r\n" % key, OK)
        for key in keys:
            assert tracker.ask(b"CLIENT CACHING yes\r\nGET %s\r\n" % key,
                               lambda data: data.endswith(b"$1\r\nv\r\n")) == b"+OK\r\n$1\r\nv\r\n"
        extra = keys_on_every_master(redis_cluster, "temx")
        for key in extra:  # read without CACHING yes: untracked under OPTIN
            tracker.ask(b"GET %s\r\n" % key, OK)
        for key in keys + extra:
            writer.ask(b"SET %s w\r\n" % key, OK)
        seen = tracker.read(lambda data: all(_invalidate(key) in data for key in keys))
        time.sleep(0.3)
        seen = tracker.mark()
        for key in keys:
            assert seen.count(_invalidate(key)) == 1, seen
        for key in extra:
            assert key not in seen
    finally:
        tracker.close()
        writer.close()


@pytest.mark.skipif((redis_server_version() or (0,)) < (7, 4),
                    reason="redis-py: client-side caching is supported by Redis 7.4 or later")
def test_redis_py_client_side_cache(redis_cluster, cluster_proxy):
    redis = pytest.importorskip("redis")
    cache_mod = pytest.importorskip("redis.cache")
    keys = keys_on_every_master(redis_cluster, "tempy")
    client = redis.Redis(port=cluster_proxy.port, protocol=3, cache_config=cache_mod.CacheConfig())
    writer = redis.Redis(port=cluster_proxy.port)
    try:
        for key in keys:
            writer.set(key, b"v1")
        for key in keys:
            assert client.get(key) == b"v1"
            assert client.get(key) == b"v1"  # (from the cache)
        for key in keys:
            writer.set(key, b"v2")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(client.get(key) != b"v2" for key in keys):
            time.sleep(0.05)
        assert [client.get(key) for key in keys] == [b"v2"] * 3
    finally:
        client.close()
        writer.close()


def _tracking_ids(cluster) -> dict:
    """master port -> the ids of its tracking connections."""
    return {node.port: [int(row["id"]) for row in cluster.client(node).client_list() if "t" in row["flags"]]
            for node in cluster.masters()}


def test_an_aside_killed_tells_the_client_to_forget_and_another_opens(redis_cluster, cluster_proxy):
    """A connection aside killed on its node: what the client read there is no longer tracked, so
    it gets the invalidation of everything (as at FLUSHALL); the next read there opens another,
    tracked again."""
    keys = keys_on_every_master(redis_cluster, "temk")
    tracker, writer = Raw(cluster_proxy.port, True), Raw(cluster_proxy.port)
    try:
        assert tracker.ask(b"CLIENT TRACKING ON\r\n", OK) == b"+OK\r\n"
        stream_port = next(port for port, ids in _tracking_ids(redis_cluster).items() if ids)
        _read_all(tracker, keys)
        aside_port = next(port for port, ids in _tracking_ids(redis_cluster).items() if ids and port != stream_port)
        node = next(node for node in redis_cluster.masters() if node.port == aside_port)
        aside_id = _tracking_ids(redis_cluster)[aside_port][0]
        redis_cluster.client(node).execute_command("CLIENT", "KILL", "ID", aside_id)
        flush = b">2\r\n$10\r\ninvalidate\r\n_\r\n"
        assert tracker.read(lambda data: flush in data).count(flush) == 1
        key = next(key for key in keys if redis_cluster.master_for_key(key.decode()).port == aside_port)
        assert tracker.ask(b"GET %s\r\n" % key, OK) == b"_\r\n"
        assert len(_tracking_ids(redis_cluster)[aside_port]) == 1
        writer.ask(b"SET %s again\r\n" % key, OK)
        assert tracker.read(lambda data: _invalidate(key) in data).count(_invalidate(key)) == 1
    finally:
        tracker.close()
        writer.close()


def test_pipelined_hello_tracking_and_reads(redis_cluster, cluster_proxy):
    """HELLO 3, CLIENT TRACKING ON and GETs of every master in one write: every read tracked."""
    keys = keys_on_every_master(redis_cluster, "temp")
    tracker, writer = Raw(cluster_proxy.port), Raw(cluster_proxy.port)
    try:
        for key in keys:
            writer.ask(b"SET %s v\r\n" % key, OK)
        batch = b"HELLO 3\r\nCLIENT TRACKING ON\r\n" + b"".join(b"GET %s\r\n" % key for key in keys) + b"PING\r\n"
        reply = tracker.ask(batch, lambda data: data.endswith(b"+PONG\r\n"))
        assert reply.endswith(b"+OK\r\n$1\r\nv\r\n$1\r\nv\r\n$1\r\nv\r\n+PONG\r\n"), reply
        for key in keys:
            writer.ask(b"SET %s w\r\n" % key, OK)
        seen = tracker.read(lambda data: all(_invalidate(key) in data for key in keys))
        for key in keys:
            assert seen.count(_invalidate(key)) == 1, seen
    finally:
        tracker.close()
        writer.close()


def test_inside_multi_refused_with_a_clear_error(cluster_proxy):
    client = Raw(cluster_proxy.port, True)
    try:
        reply = client.ask(b"MULTI\r\nCLIENT TRACKING ON\r\nEXEC\r\n", lambda data: data.count(b"\r\n") >= 3)
        assert reply.startswith(b"+OK\r\n-ERR CLIENT TRACKING inside MULTI is not supported"), reply
        assert reply.endswith(b"-EXECABORT Transaction discarded because of previous errors.\r\n"), reply
    finally:
        client.close()


@pytest.mark.parametrize("redirected", [False, True], ids=["resp3", "resp2-redirect-to-a-subscriber"])
def test_a_tracker_that_does_not_read_does_not_grow_the_proxy(redis_cluster, cluster_proxy, redirected):
    """30 MB of BCAST invalidations from another master than the stream's, for a RESP3 tracking
    client that does not read (or the RESP2 subscriber a RESP2 tracking client redirects to): the
    proxy stops reading its connection aside or sink (Redis holds the rest) and does not grow by
    them; once the client reads, every one comes."""
    from tests.cluster.test_tracking_redirect import count_marked, flood
    keys = keys_on_every_master(redis_cluster, "temslow")
    tracker, writer = Raw(cluster_proxy.port, not redirected), Raw(cluster_proxy.port)
    reader = tracker
    try:
        if redirected:
            reader = Raw(cluster_proxy.port)
            reader_id = reader.client_id()
            assert reader.ask(b"SUBSCRIBE __redis__:invalidate\r\n", OK).endswith(b":1\r\n")
            assert tracker.ask(b"CLIENT TRACKING ON BCAST PREFIX {k REDIRECT %d\r\n" % reader_id, OK) == b"+OK\r\n"
        else:
            assert tracker.ask(b"CLIENT TRACKING ON BCAST PREFIX {k\r\n", OK) == b"+OK\r\n"
        stream_port = next(port for port, ids in _tracking_ids(redis_cluster).items() if ids)
        wait_for(lambda: all(_tracking_ids(redis_cluster).values()), 10, "a tracking connection on every master")
        key = next(key for key in keys if redis_cluster.master_for_key(key.decode()).port != stream_port)
        tag = key.split(b"}")[0] + b"}"
        count = 3000
        grown = flood(writer, cluster_proxy.process.pid, tag + b"n" * 10000, count)
        seen = count_marked(reader.sock, tag + b"nnnn", count)
        assert seen == count, seen
        assert grown < 12 * 1024 * 1024, grown  # (it would be 30 MB, buffered)
    finally:
        for client in {tracker, writer, reader}:
            client.close()


def test_options_read_sans_io():
    from proxy.backends.cluster.tracked import _options, is_tracking
    assert _options([b"CLIENT", b"TRACKING", b"on", b"PREFIX", b"bcast", b"NOLOOP"]) == (True, False, None)
    assert _options([b"CLIENT", b"TRACKING", b"ON", b"BCAST", b"REDIRECT", b"7"]) == (True, True, b"7")
    assert _options([b"client", b"tracking", b"off"]) == (False, False, None)
    assert is_tracking([b"client", b"TRACKING", b"ON"]) and not is_tracking([b"CLIENT", b"CACHING", b"yes"])


def test_a_slot_moved_between_two_other_masters(redis_cluster, cluster_proxy):
    """A key read on another master (B), whose slot then moves to a third (C), the proxy's map not
    knowing: B's MIGRATE deletes it there (one invalidation); the next read is answered -MOVED on
    the connection aside on B, followed to one on C (no redirection shown), and tracked there."""
    from proxy.backends.cluster.routing.slots import hash_slot
    from tests.cluster.test_stream_redirects import _fresh_tag, _no_redirection, _stream_master
    tracker, writer = Raw(cluster_proxy.port, True), Raw(cluster_proxy.port)
    try:
        tracker.ask(b"CLIENT TRACKING ON\r\nECHO trackmark\r\n", lambda data: data.endswith(b"trackmark\r\n"))
        main = _stream_master(redis_cluster, "echo")
        source, target = [node for node in redis_cluster.masters() if node.port != main.port][:2]
        tag = _fresh_tag(redis_cluster, source, "temmove")
        key = tag + b"k"
        writer.ask(b"SET %s v\r\n" % key, OK)
        assert tracker.ask(b"GET %s\r\n" % key, OK) == b"$1\r\nv\r\n"
        redis_cluster.migrate_slot(hash_slot(tag), source, target)
        assert tracker.read(lambda data: _invalidate(key) in data).count(_invalidate(key)) == 1
        start = len(tracker.seen)
        assert tracker.ask(b"GET %s\r\n" % key, lambda data: data.endswith(b"$1\r\nv\r\n")).endswith(b"$1\r\nv\r\n")
        writer.ask(b"SET %s w\r\n" % key, OK)
        seen = tracker.read(lambda data: _invalidate(key) in data[start:])[start:]
        assert seen.count(_invalidate(key)) == 1, seen
        _no_redirection(redis_cluster, tracker.seen)
    finally:
        tracker.close()
        writer.close()


def test_switching_redirect_targets_on_every_master(redis_cluster, cluster_proxy):
    """REDIRECT to a, reads of every master, then REDIRECT to b: the next invalidations of every
    master reach b only; then plain ON (no REDIRECT, RESP3): they reach the client itself."""
    keys = keys_on_every_master(redis_cluster, "temsw")
    tracker, first, second, writer = (Raw(cluster_proxy.port, True) for _ in range(4))
    try:
        first_id, second_id = first.client_id(), second.client_id()
        assert tracker.ask(b"CLIENT TRACKING ON REDIRECT %d\r\n" % first_id, OK) == b"+OK\r\n"
        _read_all(tracker, keys)
        assert tracker.ask(b"CLIENT TRACKING ON REDIRECT %d\r\n" % second_id, OK) == b"+OK\r\n"
        _read_all(tracker, keys)
        for key in keys:
            writer.ask(b"SET %s v1\r\n" % key, OK)
        seen = second.read(lambda data: all(_invalidate(key) in data for key in keys))
        time.sleep(0.3)
        seen = second.mark()
        for key in keys:
            assert seen.count(_invalidate(key)) == 1, seen
        assert b"invalidate" not in first.mark()
        assert tracker.ask(b"CLIENT TRACKING ON\r\n", OK) == b"+OK\r\n"
        _read_all(tracker, keys)
        for key in keys:
            writer.ask(b"SET %s v2\r\n" % key, OK)
        seen = tracker.read(lambda data: all(_invalidate(key) in data for key in keys))
        for key in keys:
            assert seen.count(_invalidate(key)) == 1, seen
        assert second.mark().count(b"invalidate") == 3
    finally:
        for client in (tracker, first, second, writer):
            client.close()

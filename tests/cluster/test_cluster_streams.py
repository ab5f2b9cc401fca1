"""A cluster client's stream that concerns every master (cluster/sides.py): MONITOR shows what every
master runs, in one stream of whole lines, and follows a failover; a RESP2 subscriber's shard
channels of several masters, with the counts one node gives and no redirection ever shown; the
connections aside go with RESET and with the client."""

import re
import socket
import time

import pytest
import redis

from proxy.backends.cluster.sides import items
from tests.cluster.start import proxy_for
from tests.cluster.test_isolation_findings import keys_on_every_master
from tests.servers import exchange, exchange_batches, parse_all, read_until_quiet, wait_for


def _connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=5)


def _monitors(cluster) -> int:
    """Monitors over every master (CLIENT LIST's flags=O)."""
    total = 0
    for node in cluster.masters():
        total += sum("O" in client["flags"] for client in cluster.client(node).client_list())
    return total


def _read_for(sock, wanted, timeout: float = 10.0) -> bytes:
    """Read until `wanted(data)` or the timeout."""
    data = b""
    deadline = time.monotonic() + timeout
    sock.settimeout(0.2)
    while not wanted(data) and time.monotonic() < deadline:
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            continue
        if not chunk:
            break
        data += chunk
    return data


@pytest.mark.parametrize("hello", [b"", b"HELLO 3\r\n"], ids=["resp2", "resp3"])
def test_monitor_shows_every_master(redis_cluster, cluster_proxy, hello):
    keys = keys_on_every_master(redis_cluster, "mon")
    sock = _connect(cluster_proxy.port)
    writer = redis.Redis(port=cluster_proxy.port)
    try:
        if hello:
            sock.sendall(hello)
            read_until_quiet(sock)
        sock.sendall(b"MONITOR\r\n")
        # one +OK, not one a master; lines of what other tests' clients send the cluster may follow
        first = _read_for(sock, lambda data: data.endswith(b"\r\n")).split(b"\r\n")[:-1]
        assert first[0] == b"+OK" and all(line.startswith(b"+") and b"[0 " in line for line in first[1:]), first
        wait_for(lambda: _monitors(redis_cluster) == 3, 10, "a monitor on every master")
        for key in keys:
            writer.set(key, "v")
        names = [b'"SET" "%s" "v"' % key for key in keys]
        shown = _read_for(sock, lambda data: all(name in data for name in names))
        assert all(name in shown for name in names), shown
        assert shown.endswith(b"\r\n")
        lines = shown.split(b"\r\n")[:-1]
        assert all(line.startswith(b"+") and b"[0 " in line for line in lines), lines  # whole lines, none cut
        assert not any(b"redis-guard-barrier" in line for line in lines)
    finally:
        sock.close()
        writer.close()
    wait_for(lambda: _monitors(redis_cluster) == 0, 10, "the monitors gone with the client")


def test_monitor_then_reset(redis_cluster, cluster_proxy):
    """RESET ends MONITOR on every master: nothing shown after +RESET, no monitor left."""
    key = keys_on_every_master(redis_cluster, "monr")[2]
    sock = _connect(cluster_proxy.port)
    writer = redis.Redis(port=cluster_proxy.port)
    try:
        sock.sendall(b"MONITOR\r\n")
        _read_for(sock, lambda data: data == b"+OK\r\n")
        wait_for(lambda: _monitors(redis_cluster) == 3, 10, "a monitor on every master")
        sock.sendall(b"RESET\r\n")
        assert _read_for(sock, lambda data: data.endswith(b"+RESET\r\n")).endswith(b"+RESET\r\n")
        wait_for(lambda: _monitors(redis_cluster) == 0, 10, "no monitor left after RESET")
        writer.set(key, "v")
        sock.sendall(b"GET %s\r\n" % key)
        assert read_until_quiet(sock)[0] == b"$1\r\nv\r\n"
    finally:
        sock.close()
        writer.close()


def test_a_slow_monitor_does_not_grow_the_proxy(redis_cluster, cluster_proxy):
    """A monitor that does not read while 30 MB of lines are written: the servers hold what it did
    not take (the proxy reads no more of the connections aside, nor of the stream's own), the
    proxy does not grow by it; once it reads again every line comes, whole."""
    keys = keys_on_every_master(redis_cluster, "mons")
    sock = _connect(cluster_proxy.port)
    writer = redis.Redis(port=cluster_proxy.port)
    try:
        sock.sendall(b"MONITOR\r\n")
        _read_for(sock, lambda data: data == b"+OK\r\n")
        wait_for(lambda: _monitors(redis_cluster) == 3, 10, "a monitor on every master")
        before = _rss(cluster_proxy.process.pid)
        value = "x" * 20000
        deadline = time.monotonic() + 120
        for _ in range(500):  # 30 MB of monitor lines, none read meanwhile
            pipe = writer.pipeline(transaction=False)
            for key in keys:
                pipe.set(key, value)
            pipe.execute()
            assert time.monotonic() < deadline
        grown = _rss(cluster_proxy.process.pid) - before
        for key in keys:
            writer.set(key, "last")
        shown = _read_count(sock, b'"last"', 3, 60)
        assert shown.count(b'"last"') == 3
        assert shown.count(b'"SET"') == 3 * 501
        assert grown < 12 * 1024 * 1024, grown  # (it would be 30 MB, buffered)
    finally:
        sock.close()
        writer.close()


def _read_count(sock, marker: bytes, count: int, timeout: float) -> bytes:
    """Read until `marker` was seen `count` times (linear in what is read), or the timeout."""
    chunks, seen, tail = [], 0, b""
    deadline = time.monotonic() + timeout
    sock.settimeout(0.5)
    while seen < count and time.monotonic() < deadline:
        try:
            chunk = sock.recv(1 << 20)
        except TimeoutError:
            continue
        if not chunk:
            break
        chunks.append(chunk)
        window = tail + chunk
        seen += window.count(marker) - tail.count(marker)
        tail = window[-len(marker) + 1:]
    return b"".join(chunks)


def _rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def shard_channels(cluster) -> list[bytes]:
    """A shard channel on each master."""
    return [key.replace(b"}", b"}sc") for key in keys_on_every_master(cluster, "rs")]


def test_resp2_shard_channels_of_every_master(redis_cluster, cluster_proxy, one_node_cluster):
    """SSUBSCRIBE of channels of three masters, SUNSUBSCRIBE one by one and all: the bytes one
    node gives, never a -MOVED."""
    first, second, third = shard_channels(redis_cluster)
    batches = [
        b"SSUBSCRIBE %s\r\n" % first,
        b"SSUBSCRIBE %s\r\nSSUBSCRIBE %s\r\nPING\r\n" % (second, third),
        b"SUNSUBSCRIBE %s\r\n" % second,
        b"SSUBSCRIBE %s\r\n" % second,
        b"SUNSUBSCRIBE %s %s\r\n" % (first, first),
        b"SUNSUBSCRIBE\r\nSUNSUBSCRIBE\r\nPING\r\n",
    ]
    expected = exchange_batches(one_node_cluster.port, batches)
    got = exchange_batches(cluster_proxy.port, batches)
    assert all(b"MOVED" not in reply for reply, _closed in got), got
    # SUNSUBSCRIBE without a channel: one node unsubscribes in its dict's order
    assert got[:5] == expected[:5]
    shown, one_node = parse_all(got[5][0])[:2], parse_all(expected[5][0])[:2]
    assert sorted(reply[1] for reply in shown) == sorted(reply[1] for reply in one_node)
    assert [reply[2] for reply in shown] == [reply[2] for reply in one_node] == [1, 0]
    assert parse_all(got[5][0])[2:] == parse_all(expected[5][0])[2:]


def test_resp2_shard_messages_of_every_master(redis_cluster, cluster_proxy):
    channels = shard_channels(redis_cluster)
    publisher = redis.Redis(port=cluster_proxy.port)
    sock = _connect(cluster_proxy.port)
    try:
        sock.sendall(b"".join(b"SSUBSCRIBE %s\r\n" % channel for channel in channels))
        confirmations = _read_for(sock, lambda data: data.count(b"ssubscribe") == 3)
        assert [reply[2] for reply in parse_all(confirmations)] == [1, 2, 3]
        for channel in channels:
            assert publisher.spublish(channel, b"hello " + channel) == 1
        shown = _read_for(sock, lambda data: data.count(b"smessage") == 3)
        assert sorted(parse_all(shown)) == sorted([[b"smessage", channel, b"hello " + channel] for channel in channels])
        sock.sendall(b"PING\r\n")
        assert _read_for(sock, lambda data: data.endswith(b"\r\n")) == b"*2\r\n$4\r\npong\r\n$0\r\n\r\n"
        sock.sendall(b"RESET\r\n")
        assert _read_for(sock, lambda data: data.endswith(b"+RESET\r\n")) == b"+RESET\r\n"
        wait_for(lambda: all(publisher.spublish(channel, b"late") == 0 for channel in channels), 10,
                 "no subscriber left after RESET")
        sock.sendall(b"PING\r\n")
        assert read_until_quiet(sock)[0] == b"+PONG\r\n"
    finally:
        sock.close()
        publisher.close()


def _main_master(cluster, command: str):
    """The master whose monitor's (or subscriber's) connection ran `command` last: the stream's own."""
    for node in cluster.masters():
        if any(client["cmd"] == command for client in cluster.client(node).client_list()):
            return node
    raise AssertionError(f"no master ran {command}")


def test_monitor_follows_a_failover(small_cluster):
    """A master other than the stream's dies; its replica takes over: the monitor shows what the
    new master runs (the proxy opens a monitor there when its map learns of it)."""
    proxy = proxy_for(small_cluster)
    sock = _connect(proxy.port)
    writer = redis.Redis(port=proxy.port, socket_timeout=10)
    try:
        sock.sendall(b"MONITOR\r\n")
        _read_for(sock, lambda data: data == b"+OK\r\n")
        wait_for(lambda: _monitors(small_cluster) == 3, 10, "a monitor on every master")
        sock.sendall(b"ECHO mark\r\n")
        assert b"\r\n$4\r\nmark\r\n" in _read_for(sock, lambda data: b"\r\n$4\r\nmark\r\n" in data)
        main = _main_master(small_cluster, "echo")
        victim = next(node for node in small_cluster.masters() if node is not main)
        key = next(key for key in keys_on_every_master(small_cluster, "fo")
                   if small_cluster.master_for_key(key) is victim)
        small_cluster.kill(victim)
        promoted = small_cluster.wait_for_failover(victim)
        shown = b""
        deadline = time.monotonic() + 30
        for attempt in range(300):  # until the new master's monitor is there (bounded)
            value = b"after-%d" % attempt
            try:
                writer.set(key, value)
            except redis.ConnectionError:
                pass
            shown += _read_for(sock, lambda data, value=value: value in data, 0.2)
            if value in shown or time.monotonic() > deadline:
                break
        assert b'"SET" "%s" "after-' % key in shown, shown[-500:]
        assert b"[0 " in shown and b":%d]" % promoted.port not in shown  # (a client's address, not a node's)
    finally:
        sock.close()
        writer.close()
        assert proxy.stop() == 0


def test_resp2_shard_channels_follow_slot_migrations(small_cluster):
    """Slots move without the proxy knowing: a SSUBSCRIBE that reaches the old owner (aside or the
    stream's own master) is answered -MOVED there; the proxy sends it to the new owner, and the
    client sees only the confirmation, counted over every master, and the messages."""
    proxy = proxy_for(small_cluster)
    sock = _connect(proxy.port)
    publisher = redis.Redis(port=proxy.port, socket_timeout=10)
    try:
        first, second, third = shard_channels(small_cluster)
        sock.sendall(b"SSUBSCRIBE %s\r\nSSUBSCRIBE %s\r\n" % (first, second))
        assert [reply[2] for reply in parse_all(_read_for(sock, lambda data: data.count(b"ssubscribe") == 2))] == [1, 2]
        owner_of = small_cluster.master_for_key
        a, b, c = owner_of(first), owner_of(second), owner_of(third)
        moved = []
        for channel, source in ((b"{m1}x", b), (b"{m2}y", a)):  # a slot of the one aside, one of the stream's
            tag = next(f"{{t{n}}}".encode() for n in range(10000) if owner_of(f"{{t{n}}}") is source)
            channel = tag + channel
            small_cluster.migrate_slot(small_cluster.keyslot(channel), source, c)
            moved.append(channel)
        for count, channel in enumerate(moved, start=3):
            sock.sendall(b"SSUBSCRIBE %s\r\n" % channel)
            shown = _read_for(sock, lambda data, count=count: data.endswith(b":%d\r\n" % count))
            assert shown == b"*3\r\n$10\r\nssubscribe\r\n$%d\r\n%s\r\n:%d\r\n" % (len(channel), channel, count), shown
        for channel in moved:
            assert publisher.spublish(channel, b"m") == 1
        shown = _read_for(sock, lambda data: data.count(b"smessage") == 2)
        assert sorted(parse_all(shown)) == sorted([[b"smessage", channel, b"m"] for channel in moved])
        assert b"MOVED" not in shown
    finally:
        sock.close()
        publisher.close()
        assert proxy.stop() == 0


def _not_monitor_lines(data: bytes) -> bytes:
    """`data` without MONITOR's lines (what other clients ran meanwhile)."""
    return b"".join(line + b"\r\n" for line in data.split(b"\r\n")[:-1] if not re.match(rb"\+\d+\.\d+ \[", line))


@pytest.mark.parametrize("start", [
    b"CLIENT REPLY OFF\r\nSET {a}x 1\r\nCLIENT REPLY ON\r\n",
    b"CLIENT REPLY SKIP\r\nPING\r\n",
    b"CLIENT TRACKING ON\r\n",
    b"HELLO 3\r\nCLIENT TRACKING ON\r\n",
    b"MONITOR\r\n",
    b"SUBSCRIBE ch\r\n",
    b"PSUBSCRIBE ch*\r\n",
    b"SSUBSCRIBE ch\r\n",
], ids=["reply-off-on", "reply-skip", "tracking", "tracking-resp3", "monitor", "subscribe", "psubscribe",
        "ssubscribe"])
def test_no_redirection_on_any_stream(redis_cluster, cluster_proxy, one_node_cluster, start, request):
    """A key of any master on a stream of any shape: what one node says (its value, or the
    refusal a subscriber or a monitor gets), never a -MOVED or -ASK."""
    keys = keys_on_every_master(redis_cluster, request.node.callspec.id)
    commands = b"".join(b"GET %s\r\nSET %s v\r\nGET %s\r\n" % (key, key, key) for key in keys) + b"PING\r\n"
    batches = [start, commands]
    got = exchange_batches(cluster_proxy.port, batches)
    expected = exchange_batches(one_node_cluster.port, batches)
    got_bytes, expected_bytes = (_not_monitor_lines(b"".join(reply for reply, _closed in replies))
                                 for replies in (got, expected))
    if start.startswith(b"HELLO"):  # (HELLO's map holds the connection's id)
        got_bytes, expected_bytes = (data[data.index(b"*0\r\n") + 4:] for data in (got_bytes, expected_bytes))
        # Invalidations come from the stream's master only (the others' keys are read on the
        # shared connections, untracked): compared without them
        got_bytes, expected_bytes = (b"".join(item for item in items(data) if not item.startswith(b">"))
                                     for data in (got_bytes, expected_bytes))
    assert b"MOVED" not in got_bytes and b"ASK" not in got_bytes
    assert got_bytes == expected_bytes


def test_items_cut_replies_and_pushes_sans_io():
    invalidate = b">2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\nk\r\n"
    data = invalidate + b"$1\r\nv\r\n-MOVED 1 127.0.0.1:1\r\n>0\r\n*2\r\n$1\r\na\r\n:1\r\n*3\r\n$1"
    assert items(data) == [invalidate, b"$1\r\nv\r\n", b"-MOVED 1 127.0.0.1:1\r\n", b">0\r\n",
                           b"*2\r\n$1\r\na\r\n:1\r\n", b"*3\r\n$1"]


@pytest.mark.parametrize("protocol", [2, 3])
def test_what_cannot_run_apart_from_the_stream_is_refused_not_redirected(redis_cluster, cluster_proxy, protocol):
    """On a tracking client's stream: a transaction with a key of another master aborts (EXECABORT,
    nothing run), a blocking command or WATCH of such a key gets a clear error; never -MOVED."""
    main_key, *others = keys_on_every_master(redis_cluster, f"ref{protocol}")
    hello = b"HELLO 3\r\n" if protocol == 3 else b""
    sock = _connect(cluster_proxy.port)
    direct = redis.Redis(port=cluster_proxy.port)
    try:
        sock.sendall(hello + b"CLIENT TRACKING ON\r\n")
        read_until_quiet(sock)
        sock.sendall(b"ECHO mark\r\n")
        _read_for(sock, lambda data: data.endswith(b"mark\r\n"))
        # (which master the stream is on: the key of the others that the stream's master refuses)
        replies = []
        for key in [main_key, *others]:
            sock.sendall(b"MULTI\r\nSET %s in-txn\r\nEXEC\r\n" % key)
            replies.append(_read_for(sock, lambda data: data.count(b"\r\n") >= 3 and (
                data.endswith(b"*1\r\n+OK\r\n") or b"EXECABORT" in data)))
        aborted = [reply for reply in replies if b"EXECABORT" in reply]
        assert len(aborted) == 2 and len([reply for reply in replies if reply.endswith(b"*1\r\n+OK\r\n")]) == 1
        assert all(b"MOVED" not in reply and b"of a key another master owns" in reply for reply in aborted), aborted
        keys = [key for key, reply in zip([main_key, *others], replies) if b"EXECABORT" in reply]
        assert all(direct.get(key) is None for key in keys)  # nothing ran
        for command in (b"BLPOP %s 0.01", b"WATCH %s"):
            sock.sendall(command % keys[0] + b"\r\n")
            shown = _read_for(sock, lambda data: data.endswith(b"\r\n"))
            assert shown.startswith(b"-ERR ") and b"of a key another master owns" in shown, shown
        sock.sendall(b"SET %s v\r\nGET %s\r\n" % (keys[1], keys[1]))
        assert _read_for(sock, lambda data: data.endswith(b"$1\r\nv\r\n")) == b"+OK\r\n$1\r\nv\r\n"
    finally:
        sock.close()
        direct.close()


def test_resp2_sunsubscribe_of_all_pipelined_after_subscriptions(redis_cluster, cluster_proxy, one_node_cluster):
    """SSUBSCRIBE of two channels aside then SUNSUBSCRIBE naming none, in one pipeline: every
    channel unsubscribed, the counts one node gives (how many confirmations a master owes is
    read from its first)."""
    first, second, _third = shard_channels(redis_cluster)
    pair = second + b"a", second + b"b"  # (one slot: the tag)
    batches = [b"SSUBSCRIBE %s\r\n" % first, b"SSUBSCRIBE %s %s\r\nSUNSUBSCRIBE\r\nPING\r\n" % pair]
    got = exchange_batches(cluster_proxy.port, batches)
    expected = exchange_batches(one_node_cluster.port, batches)
    assert got[0] == expected[0]
    shown, one_node = parse_all(got[1][0]), parse_all(expected[1][0])
    assert shown[:2] == one_node[:2] == [[b"ssubscribe", pair[0], 2], [b"ssubscribe", pair[1], 3]]
    assert sorted(reply[1] for reply in shown[2:5]) == sorted(reply[1] for reply in one_node[2:5])
    assert [reply[2] for reply in shown[2:5]] == [reply[2] for reply in one_node[2:5]] == [2, 1, 0]
    assert shown[5:] == one_node[5:] == [b"PONG"]  # (nothing subscribed: out of the subscribed context)


def test_a_monitor_aside_that_is_killed_opens_again(redis_cluster, cluster_proxy):
    sock = _connect(cluster_proxy.port)
    writer = redis.Redis(port=cluster_proxy.port)
    try:
        sock.sendall(b"MONITOR\r\n")
        _read_for(sock, lambda data: data == b"+OK\r\n")
        wait_for(lambda: _monitors(redis_cluster) == 3, 10, "a monitor on every master")
        sock.sendall(b"ECHO mark\r\n")
        _read_for(sock, lambda data: b"\r\n$4\r\nmark\r\n" in data)
        main = _main_master(redis_cluster, "echo")
        other = next(node for node in redis_cluster.masters() if node is not main)
        node = redis_cluster.client(other)
        (aside,) = [client for client in node.client_list() if "O" in client["flags"]]
        node.client_kill_filter(_id=aside["id"])
        wait_for(lambda: _monitors(redis_cluster) == 3, 10, "the monitor aside opened again")
        key = next(key for key in keys_on_every_master(redis_cluster, "again") if redis_cluster.master_for_key(key) is other)
        writer.set(key, "again")
        assert b'"SET" "%s" "again"' % key in _read_for(sock, lambda data: b'"again"' in data)
    finally:
        sock.close()
        writer.close()


def test_a_lent_connection_s_redirection_is_followed(small_cluster):
    """Slots move without the proxy knowing: a blocking command or a script on a connection lent
    by the old owner is answered -MOVED there; the proxy sends it to the new owner, and the client
    gets its reply."""
    proxy = proxy_for(small_cluster)
    try:
        masters = small_cluster.masters()
        replies = []
        for tag, command in ((b"{lz1}", b"BLPOP %s 0.1\r\n"),
                             (b"{lz2}", b"EVAL \"return redis.call('set', KEYS[1], 'x')\" 1 %s\r\n"),
                             (b"{lz3}", b"RPUSH %s a\r\nBLPOP %s 1\r\n")):
            key = tag + b"k"
            source = small_cluster.master_for_key(key)
            small_cluster.migrate_slot(small_cluster.keyslot(key), source, next(m for m in masters if m is not source))
            replies.append(exchange(proxy.port, command.replace(b"%s", key))[0])
        assert replies == [b"*-1\r\n", b"+OK\r\n", b":1\r\n*2\r\n$6\r\n{lz3}k\r\n$1\r\na\r\n"], replies
    finally:
        assert proxy.stop() == 0

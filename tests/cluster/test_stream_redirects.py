"""No -MOVED or -ASK reaches a client while a slot migrates away from the master a client's
stream (CLIENT TRACKING, MONITOR, a RESP2 subscriber, CLIENT REPLY OFF/ON) or transaction
(WATCH, MULTI, EXEC) is on, before the proxy's map learns it: real migrations (CLUSTER SETSLOT
MIGRATING/IMPORTING, MIGRATE) on a real 3-master cluster. An ordinary command on a stream gets
the new owner's reply; what cannot leave the stream or the transaction's connection gets a
TRYAGAIN error naming no node."""

import socket
import time

import pytest
import redis

from proxy.backends.cluster.routing.slots import hash_slot
from proxy.backends.cluster.sides import items
from tests.cluster.start import proxy_for
from tests.cluster.test_cluster_streams import _read_for
from tests.servers import parse_all

_used_slots: set[int] = set()


@pytest.fixture(scope="module")
def proxy(redis_cluster):
    process = proxy_for(redis_cluster)
    yield process
    assert process.stop() == 0


def _connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=5)


def _owners(cluster) -> dict:
    """Slot -> the port of its master, from CLUSTER SHARDS now."""
    owners = {}
    for shard in cluster.shards():
        master = next(node for node in shard["nodes"] if node.get("role") == "master" and node.get("health") == "online")
        for low, high in shard["slots"]:
            for slot in range(low, high + 1):
                owners[slot] = int(master["port"])
    return owners


def _fresh_tag(cluster, node, name: str) -> bytes:
    """A hash tag of a slot `node` owns that no test of this module used yet."""
    owners = _owners(cluster)
    for number in range(100000):
        tag = b"{%s%d}" % (name.encode(), number)
        slot = hash_slot(tag)
        if slot not in _used_slots and owners[slot] == node.port:
            _used_slots.add(slot)
            return tag
    raise AssertionError("no slot left")


def _no_redirection(cluster, data: bytes) -> None:
    assert b"MOVED" not in data and b"ASK " not in data, data
    for node in cluster.nodes:
        assert b"%d" % node.port not in data, (node.port, data)


def _stream_master(cluster, command: str):
    for node in cluster.masters():
        if any(client["cmd"] == command for client in cluster.client(node).client_list()):
            return node
    raise AssertionError(f"no master ran {command}")


def _subscriber_master(cluster):
    for node in cluster.masters():
        if any(client["sub"] == "1" for client in cluster.client(node).client_list()):
            return node
    raise AssertionError("no master has the subscriber")


def _settle() -> None:
    """The proxy refreshes its map only when asked (a MOVED, a failure): a refresh an earlier
    test's MOVED asked for is over after this, so the migrations that follow stay unknown."""
    time.sleep(1.0)


def _moving(cluster, main, name: str):
    """Two slots of `main` moving to another master, the proxy's map not knowing: one MIGRATING
    (its key `asked` moved already: the source answers -ASK), one moved for good (`moved`: -MOVED).
    Returns (asked, moved, the migrating slot's tag, source, target)."""
    _settle()
    target = next(node for node in cluster.masters() if node is not main)
    direct_main = cluster.client(main)
    asking, gone = _fresh_tag(cluster, main, name + "a"), _fresh_tag(cluster, main, name + "m")
    asked, moved = asking + b"k", gone + b"k"
    direct_main.set(asked, b"a")
    direct_main.set(moved, b"m")
    slot = hash_slot(asking)
    cluster.begin_migration(slot, main, target)
    cluster.move_keys(slot, main, target)
    cluster.migrate_slot(hash_slot(gone), main, target)
    return asked, moved, asking, main, target


def _importing_get(cluster, node, key: bytes):
    """GET on a node that imports the key's slot (ASKING first, on the same connection)."""
    pipe = cluster.client(node).pipeline(transaction=False)
    pipe.execute_command("ASKING")
    pipe.get(key)
    return pipe.execute()[1]


def _finish(cluster, tag: bytes, source, target) -> None:
    slot = hash_slot(tag)
    cluster.move_keys(slot, source, target)
    cluster.finish_migration(slot, source, target)


@pytest.mark.parametrize("protocol", [2, 3])
def test_a_tracking_stream_follows_its_own_master_s_redirections(redis_cluster, proxy, protocol):
    """On the stream's own master a slot migrating (-ASK: ASKING + the command on the target) and
    one moved (-MOVED): every command gets the reply one node gives, in order, pipelined."""
    sock = _connect(proxy.port)
    try:
        sock.sendall((b"HELLO 3\r\n" if protocol == 3 else b"") + b"CLIENT TRACKING ON\r\nECHO mark\r\n")
        _read_for(sock, lambda data: data.endswith(b"mark\r\n"))
        main = _stream_master(redis_cluster, "echo")
        asked, moved, asking, source, target = _moving(redis_cluster, main, f"tr{protocol}")
        fresh = asking + b"new"
        sock.sendall(b"GET %s\r\nGET %s\r\nSET %s n\r\nGET %s\r\nPING\r\nGET %s\r\n" % (asked, moved, fresh, fresh, asked))
        shown = _read_for(sock, lambda data: data.count(b"\r\n") >= 10 and data.endswith(b"$1\r\na\r\n"))
        _no_redirection(redis_cluster, shown)
        replies = [item for item in items(shown) if not item.startswith(b">")]
        assert replies == [b"$1\r\na\r\n", b"$1\r\nm\r\n", b"+OK\r\n", b"$1\r\nn\r\n", b"+PONG\r\n", b"$1\r\na\r\n"]
        assert _importing_get(redis_cluster, target, fresh) == b"n"  # (written on the importing node, by ASKING)
        # A command that blocks cannot leave the stream
        sock.sendall(b"BLPOP %s 0.01\r\nPING\r\n" % (asking + b"l"))
        shown = _read_for(sock, lambda data: data.endswith(b"+PONG\r\n"))
        _no_redirection(redis_cluster, shown)
        replies = [item for item in items(shown) if not item.startswith(b">")]
        assert replies[0].startswith(b"-TRYAGAIN BLPOP: its key's slot is moving"), replies
        assert replies[1:] == [b"+PONG\r\n"]
        _finish(redis_cluster, asking, source, target)
    finally:
        sock.close()


def test_a_monitor_and_a_resp2_subscriber_get_their_refusals(redis_cluster, proxy):
    """A key of a slot migrating away from the stream's master: the refusal one node gives a
    monitor or a RESP2 subscriber, not the -ASK."""
    monitor, subscriber = _connect(proxy.port), _connect(proxy.port)
    try:
        monitor.sendall(b"MONITOR\r\n")
        _read_for(monitor, lambda data: data == b"+OK\r\n")
        monitor.sendall(b"ECHO monitor-mark\r\n")
        _read_for(monitor, lambda data: b"monitor-mark\r\n" in data)
        main = _stream_master(redis_cluster, "echo")
        asked, moved, asking, source, target = _moving(redis_cluster, main, "mon")
        monitor.sendall(b"GET %s\r\nGET %s\r\nECHO done\r\n" % (asked, moved))
        shown = _read_for(monitor, lambda data: data.endswith(b"$4\r\ndone\r\n"))
        shown = b"".join(line + b"\r\n" for line in shown.split(b"\r\n")[:-1] if not line.startswith(b"+"))
        _no_redirection(redis_cluster, shown)
        assert shown == b"-ERR Replica can't interact with the keyspace\r\n" * 2 + b"$4\r\ndone\r\n", shown
        _finish(redis_cluster, asking, source, target)

        subscriber.sendall(b"SUBSCRIBE ch\r\n")
        _read_for(subscriber, lambda data: data.endswith(b":1\r\n"))
        main = _subscriber_master(redis_cluster)
        asked, moved, asking, source, target = _moving(redis_cluster, main, "sub")
        subscriber.sendall(b"GET %s\r\nSET %s v\r\nPING\r\n" % (asked, moved))
        shown = _read_for(subscriber, lambda data: data.endswith(b"$0\r\n\r\n"))
        _no_redirection(redis_cluster, shown)
        refusal = b"-ERR Can't execute '%s': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are " \
                  b"allowed in this context\r\n"
        assert shown == refusal % b"get" + refusal % b"set" + b"*2\r\n$4\r\npong\r\n$0\r\n\r\n", shown
        _finish(redis_cluster, asking, source, target)
    finally:
        monitor.close()
        subscriber.close()


def test_replies_off_then_on(redis_cluster, proxy):
    """After CLIENT REPLY OFF (replies unsure from then on) a command of the stream's master's
    migrating or moved slot runs on its owner: a write under OFF is not lost, a read after ON
    shows the owner's reply."""
    sock = _connect(proxy.port)
    try:
        sock.sendall(b"ECHO warm\r\n")
        _read_for(sock, lambda data: data.endswith(b"warm\r\n"))
        sock.sendall(b"CLIENT REPLY OFF\r\nCLIENT REPLY ON\r\nECHO off-mark\r\n")
        _read_for(sock, lambda data: data.endswith(b"off-mark\r\n"))
        main = _stream_master(redis_cluster, "echo")
        asked, moved, asking, source, target = _moving(redis_cluster, main, "off")
        sock.sendall(b"CLIENT REPLY OFF\r\nSET %s w\r\nSET %s w\r\nCLIENT REPLY ON\r\nGET %s\r\nGET %s\r\n"
                     % (asked, moved, asked, moved))
        shown = _read_for(sock, lambda data: data.count(b"$1\r\nw\r\n") == 2)
        _no_redirection(redis_cluster, shown)
        assert shown == b"+OK\r\n$1\r\nw\r\n$1\r\nw\r\n", shown
        _finish(redis_cluster, asking, source, target)
    finally:
        sock.close()


def test_a_transaction_pinned_to_the_old_owner(redis_cluster, proxy):
    """A transaction pinned to a master its key's slot left (-MOVED) or is leaving (-ASK): the
    queued command gets a TRYAGAIN error, EXEC answers EXECABORT, nothing runs; WATCH of such a
    key gets a TRYAGAIN error; the retry, once the map learnt the move, runs on the new owner."""
    master = redis_cluster.masters()[0]
    asked, moved, asking, source, target = _moving(redis_cluster, master, "txn")
    sock = _connect(proxy.port)
    try:
        sock.sendall(b"MULTI\r\nSET %s x\r\nEXEC\r\n" % moved)
        shown = _read_for(sock, lambda data: data.count(b"\r\n") >= 3)
        _no_redirection(redis_cluster, shown)
        assert len(items(shown)) == 3, shown
        ok, refused, aborted = items(shown)
        assert ok == b"+OK\r\n" and aborted.startswith(b"-EXECABORT"), shown
        assert refused.startswith(b"-TRYAGAIN SET: its key's slot is moving") and b"retry it" in refused
        assert redis_cluster.client(target).get(moved) == b"m"
        sock.sendall(b"MULTI\r\nSET %s x\r\nEXEC\r\n" % moved)  # (the map learnt the MOVED)
        assert _read_for(sock, lambda data: data.endswith(b"*1\r\n+OK\r\n")) == b"+OK\r\n+QUEUED\r\n*1\r\n+OK\r\n"

        fresh = asking + b"absent"  # (a key of the migrating slot on neither node: -ASK)
        sock.sendall(b"WATCH %s\r\n" % fresh)
        shown = _read_for(sock, lambda data: data.endswith(b"\r\n"))
        _no_redirection(redis_cluster, shown)
        assert shown.startswith(b"-TRYAGAIN WATCH: its key's slot is moving") and b"Nothing is watched" in shown
        sock.sendall(b"UNWATCH\r\nMULTI\r\nSET %s x\r\nGET %s\r\nEXEC\r\nPING\r\n" % (fresh, asked))
        shown = _read_for(sock, lambda data: data.endswith(b"+PONG\r\n"))
        _no_redirection(redis_cluster, shown)
        replies = items(shown)
        assert replies[:2] == [b"+OK\r\n", b"+OK\r\n"] and replies[-1] == b"+PONG\r\n", replies
        assert all(reply.startswith(b"-TRYAGAIN ") for reply in replies[2:4]), replies
        assert replies[4].startswith(b"-EXECABORT"), replies
        assert _importing_get(redis_cluster, target, fresh) is None  # (nothing ran: -ASK on the source for it)
        _finish(redis_cluster, asking, source, target)
    finally:
        sock.close()


def test_exec_after_the_slot_moved(redis_cluster, proxy):
    """The slot moves between the queued command and EXEC: the old owner discards the transaction
    (-MOVED to EXEC); the client gets a TRYAGAIN error for EXEC, nothing ran."""
    master = redis_cluster.masters()[1]
    target = next(node for node in redis_cluster.masters() if node is not master)
    tag = _fresh_tag(redis_cluster, master, "exec")
    key = tag + b"k"
    sock = _connect(proxy.port)
    try:
        sock.sendall(b"MULTI\r\nSET %s x\r\n" % key)
        assert _read_for(sock, lambda data: data.endswith(b"+QUEUED\r\n")) == b"+OK\r\n+QUEUED\r\n"
        _settle()
        redis_cluster.migrate_slot(hash_slot(tag), master, target)
        sock.sendall(b"EXEC\r\nGET %s\r\n" % key)
        shown = _read_for(sock, lambda data: data.endswith(b"\r\n") and len(parse_all(data)) == 2)
        _no_redirection(redis_cluster, shown)
        refused, value = items(shown)
        assert refused.startswith(b"-TRYAGAIN EXEC: its key's slot is moving") and b"discarded" in refused
        assert value in (b"$-1\r\n", b"_\r\n"), value
    finally:
        sock.close()


def test_redis_py_sees_a_retryable_error(redis_cluster, proxy):
    """A standalone client's view: redis-py raises TryAgainError for WATCH, and its transaction
    helper's retry after UNWATCH goes through."""
    master = redis_cluster.masters()[2]
    target = next(node for node in redis_cluster.masters() if node is not master)
    tag = _fresh_tag(redis_cluster, master, "py")
    key = tag + b"k"
    redis_cluster.client(master).set(key, b"1")
    _settle()
    redis_cluster.migrate_slot(hash_slot(tag), master, target)
    client = redis.Redis(port=proxy.port, socket_timeout=10)
    try:
        with client.pipeline() as pipe:
            with pytest.raises(redis.exceptions.TryAgainError):
                pipe.watch(key)
            pipe.watch(key)  # (nothing was watched: the proxy unwatched, and the map learnt the move)
            value = int(pipe.get(key))
            pipe.multi()
            pipe.set(key, value + 1)
            assert pipe.execute() == [True]
        assert client.get(key) == b"2"
    finally:
        client.close()


def _replies(shown: bytes) -> list[bytes]:
    return [item for item in items(shown) if not item.startswith(b">")]


@pytest.mark.parametrize("protocol", [2, 3])
def test_a_transaction_on_a_tracking_stream(redis_cluster, proxy, protocol):
    """MULTI on a stream (CLIENT TRACKING ON): a queued command whose key's slot is migrating away
    from the stream's master (-ASK) or moved before the map learnt it (-MOVED) gets the TRYAGAIN
    error that names no node, and EXEC answers EXECABORT as one node does after a refused queued
    command; nothing runs. Pipelined and one command at a time (nothing is held back); a
    transaction of the master's own keys runs, its invalidations (RESP3 pushes) passed on."""
    sock = _connect(proxy.port)
    try:
        sock.sendall((b"HELLO 3\r\n" if protocol == 3 else b"") + b"CLIENT TRACKING ON\r\nECHO mark\r\n")
        _read_for(sock, lambda data: data.endswith(b"mark\r\n"))
        main = _stream_master(redis_cluster, "echo")
        own = _fresh_tag(redis_cluster, main, f"own{protocol}") + b"k"
        # A transaction of the stream's master's keys runs, a tracked key's invalidation among its replies
        sock.sendall(b"SET %s 1\r\nGET %s\r\nMULTI\r\nINCR %s\r\nGET %s\r\nEXEC\r\nPING\r\n" % (own, own, own, own))
        shown = _read_for(sock, lambda data: data.endswith(b"+PONG\r\n"))
        replies = _replies(shown)
        assert replies[:5] == [b"+OK\r\n", b"$1\r\n1\r\n", b"+OK\r\n", b"+QUEUED\r\n", b"+QUEUED\r\n"], shown
        assert replies[5] == b"*2\r\n:2\r\n$1\r\n2\r\n" and replies[6:] == [b"+PONG\r\n"], shown
        if protocol == 3:
            assert b">2\r\n$10\r\ninvalidate\r\n" in shown, shown

        asked, moved, asking, source, target = _moving(redis_cluster, main, f"mq{protocol}")
        for key in (asked, moved):
            sock.sendall(b"MULTI\r\nSET %s x\r\nGET %s\r\nEXEC\r\nPING\r\n" % (key, own))
            shown = _read_for(sock, lambda data: data.endswith(b"+PONG\r\n"))
            _no_redirection(redis_cluster, shown)
            replies = _replies(shown)
            assert len(replies) == 5, replies
            assert replies[0] == b"+OK\r\n" and replies[2] == b"+QUEUED\r\n" and replies[4] == b"+PONG\r\n", replies
            assert replies[1].startswith(b"-TRYAGAIN SET: its key's slot is moving"), replies
            assert b"EXEC answers EXECABORT" in replies[1], replies
            assert replies[3] == b"-EXECABORT Transaction discarded because of previous errors.\r\n", replies
        assert redis_cluster.client(target).get(moved) == b"m" and _importing_get(redis_cluster, target, asked) == b"a"

        # One command at a time: each reply comes before the next command is sent
        fresh = asking + b"absent"  # (on neither node: -ASK on the source)
        sock.sendall(b"MULTI\r\n")
        assert _replies(_read_for(sock, lambda data: data.endswith(b"+OK\r\n"))) == [b"+OK\r\n"]
        sock.sendall(b"SET %s y\r\n" % fresh)
        shown = _read_for(sock, lambda data: data.endswith(b"\r\n") and b"TRYAGAIN" in data)
        _no_redirection(redis_cluster, shown)
        assert _replies(shown)[0].startswith(b"-TRYAGAIN SET: "), shown
        sock.sendall(b"EXEC\r\n")
        shown = _read_for(sock, lambda data: data.endswith(b"\r\n") and b"EXECABORT" in data)
        assert _replies(shown) == [b"-EXECABORT Transaction discarded because of previous errors.\r\n"], shown
        assert _importing_get(redis_cluster, target, fresh) is None
        _finish(redis_cluster, asking, source, target)

        # The map learnt the MOVED: the key is another master's now, refused as before (EXECABORT)
        sock.sendall(b"MULTI\r\nSET %s x\r\nEXEC\r\nPING\r\n" % moved)
        shown = _read_for(sock, lambda data: data.endswith(b"+PONG\r\n"))
        _no_redirection(redis_cluster, shown)
        replies = _replies(shown)
        assert replies[1].startswith(b"-ERR SET of a key another master owns") and replies[2].startswith(b"-EXECABORT")
    finally:
        sock.close()


def test_exec_on_a_stream_after_the_slot_moved(redis_cluster, proxy):
    """On a tracking stream the slot moves between the queued command and EXEC: the old owner
    discards the transaction (-MOVED to EXEC); the client gets a TRYAGAIN error for EXEC that names
    no node, nothing ran, and the stream goes on."""
    sock = _connect(proxy.port)
    try:
        sock.sendall(b"HELLO 3\r\nCLIENT TRACKING ON\r\nECHO mark\r\n")
        _read_for(sock, lambda data: data.endswith(b"mark\r\n"))
        main = _stream_master(redis_cluster, "echo")
        target = next(node for node in redis_cluster.masters() if node is not main)
        tag = _fresh_tag(redis_cluster, main, "sexec")
        key = tag + b"k"
        sock.sendall(b"MULTI\r\nSET %s x\r\n" % key)
        assert _replies(_read_for(sock, lambda data: data.endswith(b"+QUEUED\r\n"))) == [b"+OK\r\n", b"+QUEUED\r\n"]
        _settle()
        redis_cluster.migrate_slot(hash_slot(tag), main, target)
        sock.sendall(b"EXEC\r\nPING\r\n")
        shown = _read_for(sock, lambda data: data.endswith(b"+PONG\r\n"))
        _no_redirection(redis_cluster, shown)
        refused, pong = _replies(shown)
        assert refused.startswith(b"-TRYAGAIN EXEC: its key's slot is moving") and b"discarded" in refused
        assert pong == b"+PONG\r\n" and redis_cluster.client(target).get(key) is None
    finally:
        sock.close()


def test_a_transaction_on_a_monitor_s_stream(redis_cluster, proxy):
    """MULTI on a MONITOR's stream, a key of a slot migrating away from its master: the refusal one
    node gives a monitor that queues a key's command, then EXECABORT; never the -ASK/-MOVED."""
    sock = _connect(proxy.port)
    try:
        sock.sendall(b"MONITOR\r\n")
        _read_for(sock, lambda data: data == b"+OK\r\n")
        sock.sendall(b"ECHO monitor-mark\r\n")
        _read_for(sock, lambda data: b"monitor-mark\r\n" in data)
        main = _stream_master(redis_cluster, "echo")
        asked, moved, asking, source, target = _moving(redis_cluster, main, "monq")
        sock.sendall(b"MULTI\r\nGET %s\r\nGET %s\r\nEXEC\r\nECHO done\r\n" % (asked, moved))
        shown = _read_for(sock, lambda data: data.endswith(b"$4\r\ndone\r\n"))
        # (monitor lines apart: they show the test's own MIGRATE and CLUSTER commands, naming nodes)
        lines = [line for line in shown.split(b"\r\n")[:-1] if not line.startswith(b"+") or line == b"+OK"]
        _no_redirection(redis_cluster, b"\r\n".join(lines))
        assert lines == [b"+OK", b"-ERR Replica can't interact with the keyspace",
                         b"-ERR Replica can't interact with the keyspace",
                         b"-EXECABORT Transaction discarded because of previous errors.", b"$4", b"done"], shown
        _finish(redis_cluster, asking, source, target)
    finally:
        sock.close()

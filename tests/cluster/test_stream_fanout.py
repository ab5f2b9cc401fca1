"""A client on a stream in front of a cluster (CLIENT TRACKING, CLIENT REPLY) sends a keyless
command meant for every master (FLUSHALL, DBSIZE, KEYS, SCRIPT LOAD...): it reaches every master,
as without a stream, its merged reply in its place among the stream's (handlers.fanout,
sides.fanned). A RESP2 subscriber gets the refusal Redis gives in that context; inside MULTI on the
stream such a command is refused (the transaction runs on one master)."""

import socket

from tests.cluster.test_isolation_findings import keys_on_every_master
from tests.servers import parse_all, read_until_quiet

TRACKING = b"HELLO 3\r\nCLIENT TRACKING ON\r\n"


def _connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=10)


def _fill(cluster, keys) -> None:
    for key in keys:
        cluster.client(cluster.master_for_key(key.decode())).set(key, b"v")


def _sizes(cluster) -> list[int]:
    return [cluster.client(node).dbsize() for node in cluster.masters()]


def _start(sock, payload: bytes) -> list:
    sock.sendall(payload)
    data, _closed = read_until_quiet(sock, 5, 0.5)
    return parse_all(data)


def _replies(sock, payload: bytes, count: int) -> list:
    """Send `payload`; the replies (pushes apart) until `count` came."""
    sock.sendall(payload)
    data = b""
    found = []
    sock.settimeout(10)
    while len(found) < count:
        chunk = sock.recv(65536)
        assert chunk, (data, found)
        data += chunk
        found = [item for item in parse_all(data) if not (isinstance(item, list) and item[:1] == [b"invalidate"])]
    return found


def test_tracking_flushall_and_flushdb_empty_every_master(redis_cluster, cluster_proxy):
    keys = keys_on_every_master(redis_cluster, "fan-flush")
    sock = _connect(cluster_proxy.port)
    try:
        _start(sock, TRACKING)
        for command in (b"FLUSHALL\r\n", b"FLUSHDB\r\n"):
            _fill(redis_cluster, keys)
            assert all(size > 0 for size in _sizes(redis_cluster))
            assert _replies(sock, command + b"PING\r\n", 2) == [b"OK", b"PONG"]
            assert _sizes(redis_cluster) == [0, 0, 0]
    finally:
        sock.close()


def test_tracking_dbsize_and_keys_count_every_master_in_order(redis_cluster, cluster_proxy):
    redis_cluster.client(redis_cluster.masters()[0])  # (the cluster's nodes reachable)
    keys = keys_on_every_master(redis_cluster, "fan-count")
    sock = _connect(cluster_proxy.port)
    try:
        _start(sock, TRACKING)
        assert _replies(sock, b"FLUSHALL\r\n", 1) == [b"OK"]
        # SETs of every master's keys pipelined before DBSIZE: counted, replies in order
        payload = b"".join(b"SET %s v\r\n" % key for key in keys) + b"DBSIZE\r\nKEYS *fan-count\r\nGET %s\r\n" % keys[0]
        replies = _replies(sock, payload, 6)
        assert replies[:3] == [b"OK"] * 3
        assert replies[3] == 3
        assert sorted(replies[4]) == sorted(keys)
        assert replies[5] == b"v"
        assert _replies(sock, b"FLUSHALL\r\n", 1) == [b"OK"]
    finally:
        sock.close()


def test_tracking_script_load_reaches_every_master(redis_cluster, cluster_proxy):
    script = b"return 'fan-out-on-a-stream'"
    sock = _connect(cluster_proxy.port)
    try:
        _start(sock, TRACKING)
        sock.sendall(b"SCRIPT FLUSH\r\n")
        sha = _replies(sock, b"SCRIPT LOAD \"%s\"\r\n" % script, 2)[1]
        assert len(sha) == 40
        for node in redis_cluster.masters():
            assert redis_cluster.client(node).script_exists(sha.decode()) == [True], node
        assert _replies(sock, b"SCRIPT EXISTS %s\r\n" % sha, 1) == [[1]]
    finally:
        sock.close()


def test_reply_off_flushall_empties_every_master(redis_cluster, cluster_proxy):
    keys = keys_on_every_master(redis_cluster, "fan-off")
    _fill(redis_cluster, keys)
    sock = _connect(cluster_proxy.port)
    try:
        sock.sendall(b"CLIENT REPLY OFF\r\nFLUSHALL\r\nCLIENT REPLY ON\r\nPING\r\n")
        data, _closed = read_until_quiet(sock, 5, 0.5)
        assert parse_all(data) == [b"OK", b"PONG"]  # (nothing for FLUSHALL: replies were off)
        assert _sizes(redis_cluster) == [0, 0, 0]
    finally:
        sock.close()


def test_reply_skip_dbsize_shows_what_the_server_would(redis_cluster, cluster_proxy):
    sock = _connect(cluster_proxy.port)
    try:
        sock.sendall(b"CLIENT REPLY SKIP\r\nDBSIZE\r\nDBSIZE\r\nPING\r\n")
        data, _closed = read_until_quiet(sock, 5, 0.5)
        replies = parse_all(data)
        assert len(replies) == 2 and isinstance(replies[0], int) and replies[1] == b"PONG", replies
    finally:
        sock.close()


def test_resp2_subscriber_is_refused(redis_cluster, cluster_proxy):
    sock = _connect(cluster_proxy.port)
    try:
        _start(sock, b"SUBSCRIBE fan-ch\r\n")
        sock.sendall(b"FLUSHALL\r\nDBSIZE\r\n")
        data, _closed = read_until_quiet(sock, 5, 0.5)
        replies = parse_all(data)
        assert len(replies) == 2, replies
        assert all(isinstance(reply, Exception) and "only (P|S)SUBSCRIBE" in str(reply) for reply in replies), replies
    finally:
        sock.close()


def test_inside_multi_on_a_stream_refused(redis_cluster, cluster_proxy):
    keys = keys_on_every_master(redis_cluster, "fan-multi")
    _fill(redis_cluster, keys)
    sock = _connect(cluster_proxy.port)
    try:
        _start(sock, TRACKING)
        replies = _replies(sock, b"MULTI\r\nFLUSHALL\r\nEXEC\r\nPING\r\n", 4)
        assert replies[0] == b"OK"
        assert isinstance(replies[1], Exception) and "inside MULTI" in str(replies[1]), replies
        assert isinstance(replies[2], Exception) and "EXECABORT" in str(replies[2]), replies
        assert replies[3] == b"PONG"
        assert all(size > 0 for size in _sizes(redis_cluster))
    finally:
        sock.close()
        for key in keys:
            redis_cluster.client(redis_cluster.master_for_key(key.decode())).delete(key)


def test_tracking_scan_walks_every_master(redis_cluster, cluster_proxy):
    keys = keys_on_every_master(redis_cluster, "fan-scan")
    _fill(redis_cluster, keys)
    sock = _connect(cluster_proxy.port)
    try:
        _start(sock, TRACKING)
        found, cursor = [], b"0"
        for _round in range(100):
            cursor, page = _replies(sock, b"SCAN %s MATCH *fan-scan COUNT 1000\r\n" % cursor, 1)[0]
            found += page
            if cursor == b"0":
                break
        assert sorted(found) == sorted(keys)
    finally:
        sock.close()
        for key in keys:
            redis_cluster.client(redis_cluster.master_for_key(key.decode())).delete(key)


def test_monitor_keeps_the_masters_refusal(redis_cluster, cluster_proxy):
    keys = keys_on_every_master(redis_cluster, "fan-mon")
    _fill(redis_cluster, keys)
    sock = _connect(cluster_proxy.port)
    try:
        sock.sendall(b"MONITOR\r\n")
        data, _closed = read_until_quiet(sock, 5, 0.5)
        assert data.startswith(b"+OK\r\n")
        sock.sendall(b"FLUSHALL\r\n")
        data, _closed = read_until_quiet(sock, 5, 0.5)
        assert any(line.startswith(b"-") for line in data.split(b"\r\n")), data
        assert all(size > 0 for size in _sizes(redis_cluster))
    finally:
        sock.close()
        for key in keys:
            redis_cluster.client(redis_cluster.master_for_key(key.decode())).delete(key)

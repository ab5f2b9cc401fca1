"""One face (issue 52) with real processes: in front of a real 3-master cluster (each master with a
replica) the proxy's answers to the commands where a server names itself (INFO, ROLE, CONFIG GET,
HELLO, CLIENT INFO/LIST, CLUSTER, LATENCY/MEMORY DOCTOR...) name no node's port, in both faces and
both protocols, and agree with the face: the proxy's port, a master without replicas; with
`cluster_face.announce` the one-node cluster is named by the announced address."""

import re

import hiredis
import pytest

from proxy.backends.cluster import face
from tests.cluster.start import proxy_for
from tests.cluster.test_face import ask
from tests.servers import ProxyProcess

PROTOCOLS = pytest.mark.parametrize("protocol", [2, 3], ids=["resp2", "resp3"])
FACES = pytest.mark.parametrize("which", ["standalone", "cluster"])

ASKED = [
    ("INFO",), ("INFO", "everything"), ("INFO", "server"), ("INFO", "replication"), ("INFO", "cluster"), ("ROLE",),
    ("CONFIG", "GET", "*"), ("CONFIG", "GET", "port"), ("CONFIG", "GET", "bind"), ("CONFIG", "GET", "cluster-*"),
    ("CONFIG", "GET", "*announce*"), ("CONFIG", "GET", "*file*"), ("CONFIG", "GET", "replicaof"),
    ("CLIENT", "LIST"), ("CLIENT", "INFO"), ("HELLO",), ("HELLO", "3"), ("HELLO", "2"),
    ("LATENCY", "DOCTOR"), ("MEMORY", "DOCTOR"), ("MEMORY", "STATS"), ("LATENCY", "LATEST"), ("SLOWLOG", "GET"),
    ("CLUSTER", "SLOTS"), ("CLUSTER", "SHARDS"), ("CLUSTER", "NODES"), ("CLUSTER", "INFO"), ("CLUSTER", "MYID"),
    ("CLUSTER", "HELP"), ("CLUSTER", "LINKS"), ("COMMAND", "DOCS", "cluster"), ("ACL", "LOG"),
]


@pytest.fixture(scope="module")
def proxies(redis_cluster):
    import redis

    for master in redis_cluster.masters():  # an ACL LOG entry on every master (its client-info: laddr=the node)
        with pytest.raises(redis.exceptions.AuthenticationError):
            redis_cluster.client(master).execute_command("AUTH", "nobody", "wrong")
    both = {"standalone": proxy_for(redis_cluster), "cluster": proxy_for(redis_cluster, "--face", "cluster")}
    yield both
    for process in both.values():
        process.stop()


def _node_ports(redis_cluster) -> list[bytes]:
    return [b"%d" % port for node in redis_cluster.nodes for port in (node.port, node.bus_port)]


def _named(ports: list[bytes], reply: bytes) -> list[bytes]:
    """The ports a reply names as a whole number (INFO's `used_memory_peak:1706624` names no 17066)."""
    return [port for port in ports if re.search(rb"(?<![0-9])" + port + rb"(?![0-9])", reply)]


def _value(reply: bytes):
    reader = hiredis.Reader()
    reader.feed(reply)
    return reader.gets()


@FACES
@PROTOCOLS
def test_no_node_port_in_any_reply(proxies, redis_cluster, which, protocol):
    proxy = proxies[which]
    ports = _node_ports(redis_cluster)
    for args in ASKED:
        reply = ask(proxy.port, protocol, *args)
        leaked = _named(ports, reply)
        assert not leaked, f"{args} names node ports {leaked}: {reply[:300]!r}"
        assert reply[:1] not in (b"-", b"!") or args[0] == "CLUSTER", f"{args}: {reply!r}"


@FACES
@PROTOCOLS
def test_info_and_role_present_the_proxy_as_a_master_without_replicas(proxies, which, protocol):
    proxy = proxies[which]
    info = _value(ask(proxy.port, protocol, "INFO", "everything"))
    lines = (info if isinstance(info, str) else info.decode()).split("\r\n")
    mode = "cluster" if which == "cluster" else "standalone"
    assert f"redis_mode:{mode}" in lines and f"tcp_port:{proxy.port}" in lines and "config_file:" in lines
    assert f"cluster_enabled:{int(which == 'cluster')}" in lines
    assert "role:master" in lines and "connected_slaves:0" in lines
    assert not [line for line in lines if line.startswith(("slave0:", "master_host:", "master_port:"))]
    offset = next(int(line.split(":")[1]) for line in lines if line.startswith("master_repl_offset:"))
    role = _value(ask(proxy.port, protocol, "ROLE"))
    assert role[0] == b"master" and role[2] == [] and role[1] >= offset


@FACES
@PROTOCOLS
def test_acl_log_entries_name_the_proxy(proxies, which, protocol):
    proxy = proxies[which]
    entries = _value(ask(proxy.port, protocol, "ACL", "LOG"))
    infos = [(entry if isinstance(entry, dict) else dict(zip(entry[::2], entry[1::2])))[b"client-info"]
             for entry in entries]
    assert infos and all(b" laddr=127.0.0.1:%d " % proxy.port in info for info in infos), infos


@FACES
@PROTOCOLS
def test_config_get_names_the_proxy(proxies, which, protocol):
    proxy = proxies[which]

    def get(pattern):
        value = _value(ask(proxy.port, protocol, "CONFIG", "GET", pattern))
        return value if isinstance(value, dict) else dict(zip(value[::2], value[1::2]))

    assert get("port") == {b"port": b"%d" % proxy.port}
    assert get("bind") == {b"bind": b"127.0.0.1"}
    cluster = get("cluster-*")
    assert cluster[b"cluster-enabled"] == (b"yes" if which == "cluster" else b"no")
    assert cluster[b"cluster-config-file"] == b"nodes.conf" and cluster[b"cluster-announce-port"] == b"0"
    assert get("replica-announce-port") == {b"replica-announce-port": b"0"}


@FACES
@PROTOCOLS
def test_hello_gives_the_id_client_id_gives(proxies, which, protocol):
    import socket

    with socket.create_connection(("127.0.0.1", proxies[which].port), timeout=10) as sock:
        reader = hiredis.Reader()
        sock.sendall(hiredis.pack_command(("HELLO", str(protocol))) + hiredis.pack_command(("CLIENT", "ID")))
        replies = []
        while len(replies) < 2:
            reader.feed(sock.recv(65536))
            while (reply := reader.gets()) is not False:
                replies.append(reply)
    hello, client_id = replies
    fields = hello if isinstance(hello, dict) else dict(zip(hello[::2], hello[1::2]))
    assert fields[b"id"] == client_id
    assert fields[b"mode"] == (b"cluster" if which == "cluster" else b"standalone") and fields[b"role"] == b"master"


@PROTOCOLS
def test_the_announced_address_names_the_one_node(tmp_path, redis_cluster, protocol):
    """cluster_face.announce (NAT, a port forward): the one node is named by it in CLUSTER
    SLOTS/SHARDS/NODES and MYID (its id derived from it); CONFIG GET cluster-announce-* says it;
    INFO's tcp_port and CONFIG GET port stay the port the proxy listens on."""
    config = tmp_path / "announce.yaml"
    config.write_text("policy: none\nface: cluster\ncluster_face:\n  announce: 203.0.113.9:7000\n")
    proxy = ProxyProcess(None, str(config), "--upstream-cluster", redis_cluster.seeds)
    try:
        node = face.Me(b"203.0.113.9", 7000, face.node_id(b"203.0.113.9", 7000), plain_port=7000)
        assert ask(proxy.port, protocol, "CLUSTER", "SLOTS") == face.slots_reply(node, protocol)
        assert ask(proxy.port, protocol, "CLUSTER", "SHARDS") == face.shards_reply(node, protocol)
        assert ask(proxy.port, protocol, "CLUSTER", "NODES") == face.nodes_reply(node, protocol)
        assert ask(proxy.port, protocol, "CLUSTER", "MYID") == b"$40\r\n" + node.node_id + b"\r\n"
        announce = _value(ask(proxy.port, protocol, "CONFIG", "GET", "cluster-announce-*"))
        announce = announce if isinstance(announce, dict) else dict(zip(announce[::2], announce[1::2]))
        assert announce[b"cluster-announce-ip"] == b"203.0.113.9" and announce[b"cluster-announce-port"] == b"7000"
        assert f"tcp_port:{proxy.port}\r\n".encode() in ask(proxy.port, protocol, "INFO", "server")
        ports = _node_ports(redis_cluster)
        for args in ASKED:
            reply = ask(proxy.port, protocol, *args)
            assert not _named(ports, reply), args
    finally:
        proxy.stop()


def _exchange(port: int, payload: bytes, count: int, timeout: float = 10) -> list:
    """`count` replies to `payload` (RESP3 pushes among them) on one connection."""
    import socket
    import time

    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(payload)
        reader = hiredis.Reader(notEnoughData=False)
        replies = []
        deadline = time.monotonic() + timeout
        while len(replies) < count and time.monotonic() < deadline:
            reader.feed(sock.recv(65536))
            while (reply := reader.gets()) is not False:
                replies.append(reply)
        return replies


def _command(*args) -> bytes:
    return hiredis.pack_command(tuple(args))


@FACES
def test_inside_multi_refused_exec_aborts(proxies, redis_cluster, which):
    """Queued in MULTI they would be answered at EXEC by the transaction's node, naming itself:
    refused at queue time (EXEC aborts); KEYS and DBSIZE queue as before."""
    port = proxies[which].port
    for args in (("INFO",), ("INFO", "server"), ("ROLE",), ("CONFIG", "GET", "port"), ("CLIENT", "INFO"),
                 ("CLIENT", "LIST")):
        for first in ((), ("SET", "{x}k", "1")):  # a transaction with no key yet, or pinned to a node
            payload = _command("MULTI") + (_command(*first) if first else b"") + _command(*args) + _command("EXEC")
            replies = _exchange(port, payload, 3 + bool(first))
            assert replies[0] == b"OK" and (not first or replies[1] == b"QUEUED"), (args, replies)
            assert isinstance(replies[-2], hiredis.ReplyError), (args, replies)
            assert "inside MULTI is not available through redis-guard" in str(replies[-2])
            assert str(replies[-1]).startswith("EXECABORT"), (args, replies)
    replies = _exchange(port, _command("MULTI") + _command("DBSIZE") + _command("EXEC"), 3)
    assert replies[1] == b"QUEUED" and isinstance(replies[2], list), replies
    # While WATCHing (before MULTI) they are answered as anywhere, and the transaction runs
    payload = (_command("WATCH", "{x}k") + _command("INFO", "server") + _command("ROLE") + _command("CLIENT", "INFO")
               + _command("MULTI") + _command("SET", "{x}k", "2") + _command("EXEC"))
    replies = _exchange(port, payload, 7)
    assert b"tcp_port:%d\r\n" % port in replies[1] and replies[2][0] == b"master" and replies[2][2] == []
    assert b" laddr=127.0.0.1:%d " % port in replies[3] and replies[4:] == [b"OK", b"QUEUED", [b"OK"]], replies


@FACES
def test_on_a_stream_answered_as_the_face_presents_them(proxies, redis_cluster, which):
    """After CLIENT TRACKING ON (RESP3: the client's connection is a stream on one master), INFO,
    ROLE, CONFIG GET, CLIENT INFO are the proxy's, in order; after CLIENT REPLY OFF nothing shows."""
    proxy = proxies[which]
    ports = _node_ports(redis_cluster)
    asked = [("INFO", "server"), ("INFO", "replication"), ("ROLE",), ("CONFIG", "GET", "port"), ("CLIENT", "INFO"),
             ("CLIENT", "LIST")]
    payload = (_command("HELLO", "3") + _command("CLIENT", "TRACKING", "ON")
               + b"".join(_command(*args) for args in asked) + _command("PING"))
    replies = _exchange(proxy.port, payload, 3 + len(asked))
    assert replies[1] == b"OK" and replies[-1] == b"PONG", replies
    for args, reply in zip(asked, replies[2:-1]):
        text = repr(reply).encode()
        assert not [port for port in ports if port in text], (args, reply)
    assert f"tcp_port:{proxy.port}" in str(replies[2]) and replies[4] == [b"master", replies[4][1], []]
    assert replies[5] == {b"port": b"%d" % proxy.port}
    payload = (_command("CLIENT", "REPLY", "OFF") + b"".join(_command(*args) for args in asked)
               + _command("CLIENT", "REPLY", "ON") + _command("PING"))
    assert _exchange(proxy.port, payload, 2) == [b"OK", b"PONG"]


@FACES
def test_monitor_lines_name_the_proxy_s_connections(proxies, redis_cluster, which):
    """MONITOR's lines show the address of the connection that sent each command: one of the
    proxy's own connections to the node (the proxy's host, a port of its own), never a node's."""
    import socket
    import time

    import redis

    port = proxies[which].port
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(_command("MONITOR"))
        seen = b""
        deadline = time.monotonic() + 10
        while b"+OK\r\n" not in seen and time.monotonic() < deadline:
            seen += sock.recv(65536)
        client = redis.Redis(port=port, socket_timeout=10)
        keys = [f"face-leaks:{i}" for i in range(30)]  # (on every master)
        while b"face-leaks:29" not in seen and time.monotonic() < deadline:
            for key in keys:
                client.get(key)
            sock.settimeout(1)
            try:
                seen += sock.recv(65536)
            except TimeoutError:
                pass
        client.close()
    assert b'"GET" "face-leaks:' in seen, seen[:300]
    assert not [node for node in _node_ports(redis_cluster) if node in seen]

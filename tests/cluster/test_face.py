"""`face: cluster` with real processes: the proxy in front of a real 3-master cluster presents
itself as a one-node cluster at its own address, and redis-py's `RedisCluster` pointed at it works
unchanged (keys of every master, pipelines, multi-key commands across slots, pub/sub, a Lock,
scan_iter) without ever learning a real node's address or meeting a redirection. Its replies
match, byte for byte, those of a real one-node cluster (`one_node_cluster`)."""

import socket
import time

import hiredis
import pytest

from proxy.backends.cluster import face
from tests.cluster.start import proxy_for
from tests.servers import ProxyProcess, exchange_batches, free_port

redis = pytest.importorskip("redis")
from redis.cluster import RedisCluster  # noqa: E402

PROTOCOLS = pytest.mark.parametrize("protocol", [2, 3], ids=["resp2", "resp3"])
DISCOVERY = ("SLOTS", "SHARDS", "NODES", "INFO", "MYID")


def command(*args) -> bytes:
    return hiredis.pack_command(tuple(args))


def ask(port: int, protocol: int, *args, host: str = "127.0.0.1") -> bytes:
    """The raw reply bytes to one command on a new connection in `protocol`."""
    with socket.create_connection((host, port), timeout=10) as sock:
        if protocol == 3:
            sock.sendall(command("HELLO", "3"))
            reader = hiredis.Reader()
            while (hello := reader.gets()) is False:
                reader.feed(sock.recv(65536))
            assert hello
        sock.sendall(command(*args))
        data = b""
        reader = hiredis.Reader()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            chunk = sock.recv(65536)
            assert chunk, "closed before the reply"
            data += chunk
            reader.feed(chunk)
            if reader.gets() is not False:
                return data
    raise AssertionError("no reply")


@pytest.fixture(scope="module")
def face_proxy(redis_cluster):
    process = proxy_for(redis_cluster, "--face", "cluster")
    yield process
    process.stop()


@pytest.fixture(params=[2, 3], ids=["resp2", "resp3"])
def cluster_client(face_proxy, request):
    client = RedisCluster(host="127.0.0.1", port=face_proxy.port, protocol=request.param, socket_timeout=20)
    yield client
    client.close()


def _keys_on_every_master(redis_cluster, prefix: str) -> list[str]:
    found = {}
    for i in range(1000):
        key = f"{prefix}:{i}"
        found.setdefault(redis_cluster.master_for_key(key).port, key)
        if len(found) == len(redis_cluster.masters()):
            return list(found.values())
    raise AssertionError("no key found for every master")


def _me(port: int, host: bytes = b"127.0.0.1") -> face.Me:
    return face.Me(host, port, face.node_id(host, port), plain_port=port)


# -- the replies --------------------------------------------------------------------------------

@PROTOCOLS
def test_replies_as_a_real_one_node_cluster_writes_them(one_node_cluster, protocol):
    """The builders' bytes are Redis's own for a node owning every slot (its address and id put
    in; the cluster bus port, which the proxy has none of, shown as 0)."""
    port = one_node_cluster.port
    real_id = ask(port, 2, "CLUSTER", "MYID").split(b"\r\n")[1]
    host = hiredis.Reader()
    host.feed(ask(port, 2, "CLUSTER", "SLOTS"))
    node = face.Me(host.gets()[0][2][0], port, real_id, plain_port=port)
    assert ask(port, protocol, "CLUSTER", "SLOTS") == face.slots_reply(node, protocol)
    assert ask(port, protocol, "CLUSTER", "SHARDS") == face.shards_reply(node, protocol)
    line = face.nodes_line(node).replace(b"@0 ", b"@%d " % (port + 10000))
    assert ask(port, protocol, "CLUSTER", "NODES") == face._text(line, protocol)
    assert ask(port, protocol, "CLUSTER", "INFO") == face.info_reply(protocol)
    assert ask(port, protocol, "CLUSTER", "MYID") == face.decide([b"CLUSTER", b"MYID"], node, protocol)


@PROTOCOLS
def test_the_proxy_is_one_node_at_its_own_address(face_proxy, redis_cluster, protocol):
    node = _me(face_proxy.port)
    seen = b""
    for sub in DISCOVERY:
        reply = ask(face_proxy.port, protocol, "CLUSTER", sub)
        assert reply == face.decide([b"CLUSTER", sub.encode()], node, protocol)
        seen += reply
    for real in redis_cluster.nodes:  # no real node's address or id in any of them
        assert str(real.port).encode() not in seen and real.node_id.encode() not in seen
    assert b"cluster_enabled:1\r\n" in ask(face_proxy.port, protocol, "INFO", "cluster")
    hello = hiredis.Reader()
    hello.feed(ask(face_proxy.port, 2, "HELLO", str(protocol)))
    fields = hello.gets()  # (a map in RESP3)
    fields = fields if isinstance(fields, dict) else dict(zip(fields[::2], fields[1::2], strict=True))
    assert fields[b"mode"] == b"cluster"


def test_keys_in_a_slot_from_its_real_owner(face_proxy, redis_cluster):
    client = redis.Redis(port=face_proxy.port, socket_timeout=20)
    keys = [f"{{inslot}}:{i}" for i in range(7)]
    client.delete(*keys)
    client.mset(dict.fromkeys(keys, "v"))
    slot = redis_cluster.keyslot(keys[0])
    assert client.execute_command("CLUSTER", "KEYSLOT", keys[0]) == slot
    assert client.execute_command("CLUSTER", "COUNTKEYSINSLOT", slot) == 7
    assert sorted(client.execute_command("CLUSTER", "GETKEYSINSLOT", slot, 100)) == sorted(k.encode() for k in keys)
    with pytest.raises(redis.ResponseError, match="^Invalid slot$"):
        client.execute_command("CLUSTER", "COUNTKEYSINSLOT", 16384)
    with pytest.raises(redis.ResponseError, match="wrong number of arguments for 'cluster|keyslot'"):
        client.execute_command("CLUSTER", "KEYSLOT")
    for name in ("READONLY", "READWRITE", "ASKING"):
        assert client.execute_command(name) in (True, b"OK")


def test_reshaping_and_clusters_inside_multi_refused(face_proxy):
    client = redis.Redis(port=face_proxy.port, socket_timeout=20)
    with pytest.raises(redis.ResponseError, match="CLUSTER MEET is not available through redis-guard"):
        client.execute_command("CLUSTER", "MEET", "127.0.0.1", "1")
    with pytest.raises(redis.ResponseError, match="CLUSTER FAILOVER is not available through redis-guard"):
        client.execute_command("CLUSTER", "FAILOVER")
    replies = exchange_batches(face_proxy.port, [command("MULTI") + command("CLUSTER", "SLOTS") + command("EXEC")])
    assert replies[0][0] == (b"+OK\r\n-ERR CLUSTER commands are answered by redis-guard's one-node cluster face "
                             b"(face: cluster), not inside MULTI: send them outside the transaction\r\n"
                             b"-EXECABORT Transaction discarded because of previous errors.\r\n")


# -- a real cluster client --------------------------------------------------------------------

def test_cluster_client_sees_one_node(cluster_client, face_proxy):
    nodes = cluster_client.get_nodes()
    assert [(node.host, node.port) for node in nodes] == [("127.0.0.1", face_proxy.port)]
    assert cluster_client.get_node_from_key("any") is nodes[0]
    assert cluster_client.cluster_keyslot("foo") == 12182
    assert cluster_client.info("cluster")["cluster_enabled"] == 1


def test_cluster_client_get_set_pipeline_mget(cluster_client, redis_cluster):
    keys = _keys_on_every_master(redis_cluster, "face") + [f"face:many:{i}" for i in range(40)]
    for key in keys[:3]:
        assert cluster_client.set(key, key) is True
        assert cluster_client.get(key) == key.encode()
        assert redis_cluster.client(redis_cluster.master_for_key(key)).get(key) in (key, key.encode())  # real owner
    pipe = cluster_client.pipeline()
    for key in keys:
        pipe.set(key, key + "!")
    for key in keys:
        pipe.get(key)
    replies = pipe.execute()
    assert replies == [True] * len(keys) + [(key + "!").encode() for key in keys]
    assert all(cluster_client.mset_nonatomic({key: "m" + key for key in keys}))  # (one reply a slot)
    assert cluster_client.mget_nonatomic(keys) == [("m" + key).encode() for key in keys]
    tagged = [f"{{tag}}:{i}" for i in range(5)]
    assert cluster_client.mset(dict.fromkeys(tagged, "t")) is True
    assert cluster_client.mget(tagged) == [b"t"] * 5
    assert cluster_client.delete(*keys) == len(keys)  # (split by slot by the client)


def test_cluster_client_pubsub(cluster_client):
    pubsub = cluster_client.pubsub()
    try:
        pubsub.subscribe("face-news")
        deadline = time.monotonic() + 10
        message = None
        while time.monotonic() < deadline and message is None:
            message = pubsub.get_message(ignore_subscribe_messages=True, timeout=0.2)
            if message is None:
                cluster_client.publish("face-news", "hello")
        assert message is not None and message["data"] == b"hello"
    finally:
        pubsub.close()


def test_cluster_client_lock_on_every_master(cluster_client, redis_cluster):
    for name in _keys_on_every_master(redis_cluster, "facelock"):
        lock = cluster_client.lock(name, timeout=10)
        assert lock.acquire(blocking=False)
        assert lock.extend(5) and lock.owned()
        assert not cluster_client.lock(name, timeout=10).acquire(blocking=False)
        lock.release()
        assert not cluster_client.exists(name)


def test_cluster_client_scan_iter(cluster_client, redis_cluster):
    keys = {f"facescan:{i}" for i in range(150)}
    cluster_client.mset_nonatomic(dict.fromkeys(keys, "v"))
    found = list(cluster_client.scan_iter(match="facescan:*", count=20))
    assert len(found) == len(keys) and {key.decode() for key in found} == keys  # each key once
    assert {redis_cluster.master_for_key(key).port for key in keys} == {m.port for m in redis_cluster.masters()}
    cluster_client.delete(*keys)


def test_no_redirection_reaches_the_cluster_client(small_cluster):
    """A slot moved to another master while the client works: the proxy follows MOVED and ASK
    itself; the client still knows one node, the proxy."""
    proxy = proxy_for(small_cluster, "--face", "cluster")
    try:
        client = RedisCluster(host="127.0.0.1", port=proxy.port, socket_timeout=20)
        keys = [f"{{moving}}:{i}" for i in range(30)]
        client.mset_nonatomic(dict.fromkeys(keys, "v"))
        slot = small_cluster.keyslot(keys[0])
        src = small_cluster.master_for_key(keys[0])
        dst = next(node for node in small_cluster.masters() if node.port != src.port)
        small_cluster.begin_migration(slot, src, dst)
        small_cluster.move_keys(slot, src, dst, limit=10)  # half moved: ASK for those keys
        # (one key a command: a multi-key command over a half-moved slot gets Redis's TRYAGAIN)
        assert [client.get(key) for key in keys] == [b"v"] * len(keys)
        small_cluster.move_keys(slot, src, dst)
        small_cluster.finish_migration(slot, src, dst)  # MOVED
        assert client.mget(keys) == [b"v"] * len(keys)
        assert client.set(keys[0], "w") is True and client.get(keys[0]) == b"w"
        assert small_cluster.client(dst).get(keys[0]) in ("w", b"w")
        assert [(node.host, node.port) for node in client.get_nodes()] == [("127.0.0.1", proxy.port)]
        client.close()
    finally:
        proxy.stop()


# -- where the client reached the proxy -------------------------------------------------------

def test_listening_on_every_address_each_client_sees_the_one_it_used(redis_cluster):
    proxy = proxy_for(redis_cluster, "--face", "cluster", "--listen", "0.0.0.0:0")
    try:
        for host in ("127.0.0.1", "127.0.0.2"):
            reply = ask(proxy.port, 2, "CLUSTER", "SLOTS", host=host)
            assert reply == face.slots_reply(_me(proxy.port, host.encode()), 2)
            client = RedisCluster(host=host, port=proxy.port, socket_timeout=20)
            assert [(node.host, node.port) for node in client.get_nodes()] == [(host, proxy.port)]
            assert client.set("wildcard", host) is True and client.get("wildcard") == host.encode()
            client.close()
    finally:
        proxy.stop()


def test_workers_sharing_a_port_are_one_node(redis_cluster):
    proxy = proxy_for(redis_cluster, "--face", "cluster", "--workers", "2")
    try:
        conns = [redis.Redis(port=proxy.port, socket_timeout=20) for _ in range(16)]
        ids = {conn.execute_command("CLUSTER", "MYID") for conn in conns}
        assert ids == {face.node_id(b"127.0.0.1", proxy.port)}
        # (CLIENT ID is each worker's own count: a repeated one shows both workers answered)
        client_ids = [conn.client_id() for conn in conns]
        assert len(set(client_ids)) < len(client_ids)
        for conn in conns:
            conn.close()
    finally:
        proxy.stop()


def test_tls_clients_are_sent_to_the_tls_port(tmp_path, redis_cluster):
    import shutil

    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    from tests.tls.certs import Certs
    from tests.tls.test_tls import write_config

    (tmp_path / "certs").mkdir()
    certs = Certs(str(tmp_path / "certs"))
    tls_port = free_port()
    config = write_config(tmp_path, certs, auth_clients="no", extra=f"tls_listen: {tls_port}\nface: cluster\n")
    proxy = ProxyProcess(None, config, "--upstream-cluster", redis_cluster.seeds)
    try:
        client = RedisCluster(host="127.0.0.1", port=tls_port, ssl=True, ssl_ca_certs=certs.ca, socket_timeout=20)
        assert [(node.host, node.port) for node in client.get_nodes()] == [("127.0.0.1", tls_port)]
        assert client.set("tls-face", "v") is True and client.get("tls-face") == b"v"
        shards = client.execute_command("CLUSTER", "SHARDS")
        fields = shards[0][b"nodes"][0] if isinstance(shards[0], dict) else None
        if fields is None:
            node = dict(zip(shards[0][3][0][::2], shards[0][3][0][1::2], strict=True))
        else:
            node = fields
        assert (node[b"port"], node[b"tls-port"]) == (proxy.port, tls_port)
        client.close()
        plain = RedisCluster(host="127.0.0.1", port=proxy.port, socket_timeout=20)
        assert [(node.host, node.port) for node in plain.get_nodes()] == [("127.0.0.1", proxy.port)]
        assert plain.get("tls-face") == b"v"
        plain.close()
    finally:
        proxy.stop()


def test_face_cluster_in_front_of_one_server_refused(tmp_path):
    import subprocess
    import sys

    from tests.servers import REPO

    done = subprocess.run([sys.executable, "-m", "proxy", "serve", "--upstream", "redis://127.0.0.1:1",
                           "--face", "cluster", "--listen", "127.0.0.1:0"], cwd=REPO, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2
    assert "face: cluster presents a Redis Cluster (upstream_cluster) as one node" in done.stderr


@pytest.mark.parametrize("which", ["face_proxy", "cluster_proxy"], ids=["face-cluster", "face-standalone"])
def test_cluster_on_a_stream_answered_by_the_proxy_in_order(which, request, redis_cluster):
    """After CLIENT REPLY, MONITOR or SUBSCRIBE the client's commands go on its own node's stream:
    CLUSTER there is still the proxy's (never the node's view of the real cluster), in order with
    the stream's replies, skipped under CLIENT REPLY SKIP/OFF as Redis skips a reply."""
    port = request.getfixturevalue(which).port
    if which == "face_proxy":
        myid = b"$40\r\n" + face.node_id(b"127.0.0.1", port) + b"\r\n"
        slots = face.slots_reply(_me(port), 2)
    else:
        myid = slots = b"-ERR This instance has cluster support disabled\r\n"
    replies = exchange_batches(port, [command("CLIENT", "REPLY", "SKIP"), command("CLUSTER", "SLOTS"),
                                      command("CLUSTER", "MYID")])
    assert replies == [(b"", False), (b"", False), (myid, False)]
    replies = exchange_batches(port, [command("CLIENT", "REPLY", "OFF"), command("CLUSTER", "SLOTS"),
                                      command("CLIENT", "REPLY", "ON") + command("CLUSTER", "SLOTS")])
    assert replies == [(b"", False), (b"", False), (b"+OK\r\n" + slots, False)]
    replies = exchange_batches(port, [command("SUBSCRIBE", "x"), command("CLUSTER", "MYID"), command("UNSUBSCRIBE"),
                                      command("CLUSTER", "MYID") + command("GET", "{never}set")])
    assert replies[1:] == [(myid, False), (b"*3\r\n$11\r\nunsubscribe\r\n$1\r\nx\r\n:0\r\n", False),
                           (myid + b"$-1\r\n", False)]  # (the stream ended: GET routed by slot again)
    replies = exchange_batches(port, [command("MONITOR"), command("CLUSTER", "MYID")])
    assert replies == [(b"+OK\r\n", False), (myid, False)]
    for real in redis_cluster.nodes:
        assert all(str(real.port).encode() not in reply for reply, _ in replies)


def test_standalone_face_inside_multi_never_asks_a_node(cluster_proxy):
    """With the default face CLUSTER inside MULTI is the proxy's error too (it went to the
    transaction's node, which answered with the real cluster's slots and addresses)."""
    for first in (command("SET", "{multi}a", "1"), b""):
        replies = exchange_batches(cluster_proxy.port, [command("MULTI") + first + command("CLUSTER", "SLOTS")
                                                        + command("EXEC")])
        queued = b"+QUEUED\r\n" if first else b""
        assert replies[0][0] == (b"+OK\r\n" + queued + b"-ERR This instance has cluster support disabled\r\n"
                                 b"-EXECABORT Transaction discarded because of previous errors.\r\n")

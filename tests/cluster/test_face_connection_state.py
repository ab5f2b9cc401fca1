"""Connection state in front of a real 3-master cluster, as one server shows it (issue 52):
READONLY/READWRITE/ASKING answered as the face says (the standalone face: as a server without
cluster support, byte for byte what a plain redis-server answers; `face: cluster`: +OK), CLIENT
NO-EVICT answered by the proxy (the client's connection is the proxy's) and shown as CLIENT INFO's
flag `e`, and CLIENT LIST's `cmd=` the last command of each of the proxy's clients."""

import socket
import time

import pytest

from tests.cluster.start import proxy_for
from tests.servers import RedisServer, exchange, exchange_batches

redis = pytest.importorskip("redis")

NO_SUPPORT = b"-ERR This instance has cluster support disabled\r\n"
EXECABORT = b"-EXECABORT Transaction discarded because of previous errors.\r\n"


@pytest.fixture(scope="module")
def plain_server():
    """One plain redis-server: what the standalone face must answer."""
    server = RedisServer()
    yield server
    server.close()


@pytest.fixture(scope="module")
def face_proxy(redis_cluster):
    process = proxy_for(redis_cluster, "--face", "cluster")
    yield process
    process.stop()


# -- READONLY, READWRITE, ASKING ----------------------------------------------------------------

@pytest.mark.parametrize("payload", [
    b"READONLY\r\nREADWRITE\r\nASKING\r\nPING\r\n",
    b"readonly\r\nReadWrite\r\nasking\r\n",
    b"READONLY x\r\nASKING 1 2\r\nREADWRITE \"\"\r\n",  # Redis's arity errors
    b"HELLO 3\r\nREADONLY\r\nASKING\r\n",
    # On a stream: replies off or skipped (nothing, then the error), a RESP2 subscriber (refused in its context)
    b"CLIENT REPLY OFF\r\nREADONLY\r\nCLIENT REPLY ON\r\nREADWRITE\r\nCLIENT REPLY SKIP\r\nASKING\r\nASKING\r\n",
    b"SUBSCRIBE rg-face-ch\r\nREADONLY\r\nASKING\r\nPING\r\nUNSUBSCRIBE rg-face-ch\r\n",
], ids=["alone", "any-case", "arity", "resp3", "replies-off", "subscriber"])
def test_cluster_only_commands_as_a_plain_server(cluster_proxy, plain_server, payload):
    got = exchange(cluster_proxy.port, payload)
    expected = exchange(plain_server.port, payload)
    if payload.startswith(b"HELLO"):  # (the ids differ: the replies after HELLO's)
        got, expected = [(reply[0].split(b"*0\r\n", 1)[1], reply[1]) for reply in (got, expected)]
    assert got == expected
    assert NO_SUPPORT in got[0] or b"wrong number" in got[0] or b"in this context" in got[0]


def test_cluster_only_commands_inside_multi_refused_as_cluster_s(cluster_proxy, plain_server):
    """Inside MULTI as CLUSTER's subcommands are with the standalone face: the error at once and
    EXEC aborts (a plain server queues them and EXEC's reply holds the error; docs/cluster-face.md)."""
    for name in (b"READONLY", b"READWRITE", b"ASKING"):
        payload = b"MULTI\r\nSET {f}k 1\r\n" + name + b"\r\nEXEC\r\nGET {f}k\r\n"
        got = exchange(cluster_proxy.port, b"DEL {f}k\r\n" + payload)[0]
        assert got == b":0\r\n+OK\r\n+QUEUED\r\n" + NO_SUPPORT + EXECABORT + b"$-1\r\n" or \
            got == b":1\r\n+OK\r\n+QUEUED\r\n" + NO_SUPPORT + EXECABORT + b"$-1\r\n", got
        cluster = exchange(cluster_proxy.port, b"MULTI\r\nCLUSTER INFO\r\nEXEC\r\n")[0]
        assert cluster == b"+OK\r\n" + NO_SUPPORT + EXECABORT  # (the same as CLUSTER's)
    # the rest of one server's answers are the same
    assert exchange(plain_server.port, b"MULTI\r\nREADONLY\r\nEXEC\r\n")[0] == b"+OK\r\n+QUEUED\r\n*1\r\n" + NO_SUPPORT


def test_cluster_face_answers_ok(face_proxy):
    assert exchange(face_proxy.port, b"READONLY\r\nREADWRITE\r\nASKING\r\nREADONLY x\r\n")[0] == (
        b"+OK\r\n+OK\r\n+OK\r\n-ERR wrong number of arguments for 'readonly' command\r\n")
    got = exchange(face_proxy.port, b"MULTI\r\nREADONLY\r\nSET {f}k 1\r\nEXEC\r\n")[0]
    assert got == b"+OK\r\n+QUEUED\r\n+QUEUED\r\n*2\r\n+OK\r\n+OK\r\n", got
    got = exchange(face_proxy.port, b"CLIENT REPLY SKIP\r\nREADONLY\r\nASKING\r\nSUBSCRIBE rg-face-ch\r\nREADWRITE\r\n")[0]
    assert got.startswith(b"+OK\r\n*3\r\n$9\r\nsubscribe\r\n"), got
    assert got.endswith(b"-ERR Can't execute 'readwrite': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / "
                        b"RESET are allowed in this context\r\n"), got


# -- CLIENT NO-EVICT ----------------------------------------------------------------------------

@pytest.mark.parametrize("protocol", [2, 3])
def test_client_no_evict_noted_by_the_proxy(cluster_proxy, plain_server, protocol):
    client = redis.Redis(port=cluster_proxy.port, protocol=protocol, single_connection_client=True)
    try:
        assert "e" not in client.client_info()["flags"]
        assert client.client_no_evict("ON") in (True, b"OK", "OK")
        assert client.client_info()["flags"].endswith("e")
        mine = [row for row in client.client_list() if int(row["id"]) == client.client_id()]
        assert mine and "e" in mine[0]["flags"]
        assert client.client_no_evict("off") in (True, b"OK", "OK")
        assert "e" not in client.client_info()["flags"]
        assert client.execute_command("CLIENT", "NO-EVICT", "On") in (True, b"OK", "OK")
        assert "e" in client.client_info()["flags"]
        with pytest.raises(redis.ResponseError, match="^syntax error$"):
            client.execute_command("CLIENT", "NO-EVICT", "maybe")
        assert "e" in client.client_info()["flags"]  # (a refused one changes nothing)
        client.execute_command("RESET")  # Redis's RESET clears it
        assert "e" not in client.client_info()["flags"]
    finally:
        client.close()
    payload = (b"CLIENT NO-EVICT\r\nCLIENT NO-EVICT on off\r\nCLIENT NO-EVICT yes\r\nCLIENT NO-EVICT ON\r\n"
               b"client no-evict OFF\r\n")
    assert exchange(cluster_proxy.port, payload) == exchange(plain_server.port, payload)


def test_client_no_evict_inside_multi_takes_effect_at_exec(cluster_proxy, plain_server):
    def flags_after(first: bytes) -> tuple[bytes, bytes]:
        got = exchange_batches(cluster_proxy.port, [first, b"CLIENT INFO\r\n"])
        return got[0][0], got[1][0].split(b" flags=")[1].split(b" ")[0]

    payload = b"MULTI\r\nCLIENT NO-EVICT on\r\nSET {f}k 1\r\nEXEC\r\n"
    replies, flags = flags_after(payload)
    assert replies == exchange(plain_server.port, payload)[0] == b"+OK\r\n+QUEUED\r\n+QUEUED\r\n*2\r\n+OK\r\n+OK\r\n"
    assert flags == b"e"
    payload = b"MULTI\r\nCLIENT NO-EVICT on\r\nDISCARD\r\n"
    assert flags_after(payload) == (exchange(plain_server.port, payload)[0], b"N")
    payload = b"MULTI\r\nCLIENT NO-EVICT bad\r\nEXEC\r\n"  # queued, its syntax error in EXEC's reply
    assert flags_after(payload) == (exchange(plain_server.port, payload)[0], b"N")
    payload = b"CLIENT NO-EVICT on\r\nMULTI\r\nCLIENT NO-EVICT off\r\nEXEC\r\n"
    assert flags_after(payload) == (exchange(plain_server.port, payload)[0], b"N")


def test_no_touch_and_caching_still_refused(cluster_proxy):
    """They change what the server does for the client: no connection of its own to hold them.
    (NO-TOUCH is Redis 7.2's: the 7.0 table does not know it, refused as an unknown subcommand.)"""
    for payload in (b"CLIENT NO-TOUCH on\r\n", b"CLIENT CACHING yes\r\n"):
        reply = exchange(cluster_proxy.port, payload)[0]
        assert reply.startswith(b"-ERR ") and b"+OK" not in reply, reply
    assert b"not supported through Redis Guard" in exchange(cluster_proxy.port, b"CLIENT CACHING yes\r\n")[0]


# -- CLIENT LIST's cmd= ---------------------------------------------------------------------------

def _rows(client) -> dict:
    return {int(row["id"]): row for row in client.client_list()}


def test_client_list_shows_each_client_s_last_command(cluster_proxy):
    """redis-py's TestPubSubConnectionKilled finds its subscriber by cmd=subscribe."""
    watcher = redis.Redis(port=cluster_proxy.port, single_connection_client=True)
    others = [redis.Redis(port=cluster_proxy.port, single_connection_client=True) for _ in range(4)]
    subscriber = socket.create_connection(("127.0.0.1", cluster_proxy.port), timeout=10)
    try:
        ids = [other.client_id() for other in others]
        others[0].get("{f}k")
        others[1].config_get("maxmemory")
        others[2].execute_command("CLIENT", "GETNAME")
        with pytest.raises(redis.ResponseError):
            others[3].execute_command("NOSUCHCOMMAND")
        subscriber.sendall(b"CLIENT ID\r\nSUBSCRIBE rg-face-cmd\r\n")
        data = b""
        deadline = time.monotonic() + 10
        while b"rg-face-cmd" not in data and time.monotonic() < deadline:
            data += subscriber.recv(65536)
        subscriber_id = int(data[1:data.index(b"\r\n")])
        rows = _rows(watcher)
        assert [rows[i]["cmd"] for i in ids] == ["get", "config|get", "client|getname", "NULL"]
        assert rows[subscriber_id]["cmd"] == "subscribe"
        assert rows[watcher.client_id()]["cmd"] == "client|list"
        others[0].execute_command("PING")
        assert _rows(watcher)[ids[0]]["cmd"] == "ping"
        with socket.create_connection(("127.0.0.1", cluster_proxy.port), timeout=10) as raw:
            raw.sendall(b"CLIENT ID\r\n")
            raw_id = int(raw.recv(100)[1:-2])
            raw.sendall(b"PING\r\nSET {f}k 1\r\nHGET {f}h x\r\n")  # one batch: its last command
            data = b""
            while data.count(b"\r\n") < 3 and time.monotonic() < deadline + 10:
                data += raw.recv(65536)
            assert data == b"+PONG\r\n+OK\r\n$-1\r\n"
            assert _rows(watcher)[raw_id]["cmd"] == "hget"
        with pytest.raises(redis.ResponseError):
            others[0].execute_command("CLIENT")  # a container alone: its own name, as Redis shows it
        assert _rows(watcher)[ids[0]]["cmd"] == "client"
        with pytest.raises(redis.ResponseError):
            others[0].execute_command("CONFIG", "NOSUCH")  # an unknown subcommand: NULL, as Redis shows
        assert _rows(watcher)[ids[0]]["cmd"] == "NULL"
    finally:
        subscriber.close()
        watcher.close()
        for other in others:
            other.close()

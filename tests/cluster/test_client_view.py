"""CLIENT INFO and CLIENT LIST in front of a cluster: the id CLIENT ID gave and the name CLIENT
SETNAME set, in Redis's format (cluster/clientinfo.py), RESP2 and RESP3; the errors one node gives."""

import re

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from proxy.backends.cluster.clientinfo import View, client_list, line
from tests.servers import exchange, exchange_batches

LINE = re.compile(rb"id=(\d+) addr=127\.0\.0\.1:(\d+) laddr=127\.0\.0\.1:(\d+) fd=\d+ name=(\S*) age=\d+ idle=0 "
                  rb"flags=(\w+) db=0 sub=0 psub=0 ssub=0 multi=(-?\d+) qbuf=0 qbuf-free=0 argv-mem=0 multi-mem=0 "
                  rb"rbs=0 rbp=0 obl=0 oll=0 omem=0 tot-mem=0 events=r cmd=(\S+) user=default redir=-1 resp=([23])\n")


def _bulk(reply: bytes, protocol: int) -> bytes:
    if protocol == 3:
        match = re.fullmatch(rb"=(\d+)\r\ntxt:(.*)\r\n", reply, re.S)
        assert match and int(match[1]) == len(match[2]) + 4, reply
    else:
        match = re.fullmatch(rb"\$(\d+)\r\n()(.*)\r\n", reply, re.S)
        assert match and int(match[1]) == len(match[3]), reply
        return match[3]
    return match[2]


@pytest.mark.parametrize("protocol", [2, 3])
def test_client_info_names_the_proxy_s_id_and_name(cluster_proxy, protocol):
    hello = b"HELLO 3\r\n" if protocol == 3 else b""
    got = exchange_batches(cluster_proxy.port, [hello + b"CLIENT ID\r\nCLIENT SETNAME app-1\r\n", b"CLIENT INFO\r\n"])
    first = got[0][0]
    client_id = int(re.search(rb":(\d+)\r\n\+OK\r\n$", first)[1])
    text = _bulk(got[1][0], protocol)
    match = LINE.fullmatch(text)
    assert match, text
    assert int(match[1]) == client_id and match[4] == b"app-1" and match[5] == b"N"
    assert int(match[3]) == cluster_proxy.port and match[7] == b"client|info" and int(match[8]) == protocol


@pytest.mark.parametrize("protocol", [2, 3])
def test_client_list_shows_the_client_s_own_connections(cluster_proxy, protocol):
    """redis-py's pool: two connections of one client; CLIENT LIST shows both (the proxy's ids and
    names), and no node's connection."""
    one = redis.Redis(port=cluster_proxy.port, protocol=protocol, single_connection_client=True)
    two = redis.Redis(port=cluster_proxy.port, protocol=protocol, single_connection_client=True)
    try:
        one.client_setname("one")
        two.client_setname("two")
        listed = {int(row["id"]): row for row in one.client_list()}
        assert listed[one.client_id()]["name"] == "one" and listed[two.client_id()]["name"] == "two"
        assert listed[one.client_id()]["cmd"] == "client|list"
        assert one.client_info()["id"] == one.client_id() and one.client_info()["name"] == "one"
        assert [row["name"] for row in one.client_list(client_id=[two.client_id()])] == ["two"]
        assert {row["name"] for row in one.client_list(_type="normal")} >= {"one", "two"}
        assert one.client_list(_type="pubsub") == [] and one.client_list(_type="master") == []
    finally:
        one.close()
        two.close()


@pytest.mark.parametrize("command", [b"CLIENT LIST TYPE nobody", b"CLIENT LIST ID x", b"CLIENT LIST ID 1 +2", b"CLIENT LIST FOO",
                                     b"CLIENT LIST TYPE", b"CLIENT INFO x"])
def test_errors_as_one_node_gives_them(cluster_proxy, one_node_cluster, command):
    payload = command + b"\r\nPING\r\n"
    assert exchange(cluster_proxy.port, payload)[0] == exchange(one_node_cluster.port, payload)[0]


def test_client_info_inside_a_transaction_is_refused(cluster_proxy):
    """Queued, the transaction's node would describe its own connection at EXEC (its address
    as laddr): refused at queue time, EXEC aborts (issue 52, tests/cluster/test_face_leaks.py)."""
    got = exchange(cluster_proxy.port, b"MULTI\r\nSET {t}k v\r\nCLIENT INFO\r\nEXEC\r\n")[0]
    assert got.startswith(b"+OK\r\n+QUEUED\r\n-ERR CLIENT INFO inside MULTI is not available"), got
    assert got.endswith(b"-EXECABORT Transaction discarded because of previous errors.\r\n"), got


def test_the_line_sans_io():
    view = View(7, "127.0.0.1:5000", "127.0.0.1:6000", 9, b"n", 3, "P", 1, 0, 0, -1, "ping", "app", 3)
    assert line(view) == (b"id=7 addr=127.0.0.1:5000 laddr=127.0.0.1:6000 fd=9 name=n age=3 idle=0 flags=P db=0 "
                          b"sub=1 psub=0 ssub=0 multi=-1 qbuf=0 qbuf-free=0 argv-mem=0 multi-mem=0 rbs=0 rbp=0 "
                          b"obl=0 oll=0 omem=0 tot-mem=0 events=r cmd=ping user=app redir=-1 resp=3\n")
    other = View(3)
    assert client_list([b"CLIENT", b"LIST", b"TYPE", b"pubsub"], [view, other], 2) == b"$%d\r\n%s\r\n" % (
        len(line(view)), line(view))
    assert client_list([b"CLIENT", b"LIST", b"ID", b"3", b"7"], [view, other], 2).startswith(b"$")
    assert client_list([b"CLIENT", b"LIST", b"ID", b"3", b"7"], [view, other], 2).index(b"id=3") < \
        client_list([b"CLIENT", b"LIST", b"ID", b"3", b"7"], [view, other], 2).index(b"id=7")


def test_client_kill_id_names_the_proxy_s_ids(cluster_proxy):
    """The id CLIENT ID and CLIENT LIST give kills that client (SKIPME as in Redis); an id no
    client of the proxy has kills nothing, whatever connection of a node has it."""
    one = redis.Redis(port=cluster_proxy.port, single_connection_client=True)
    two = redis.Redis(port=cluster_proxy.port, single_connection_client=True)
    try:
        two_id = two.client_id()
        assert one.execute_command("CLIENT", "KILL", "ID", one.client_id()) == 0  # SKIPME yes
        assert one.execute_command("CLIENT", "KILL", "ID", 10 ** 9) == 0
        assert one.execute_command("CLIENT", "KILL", "ID", two_id, "SKIPME", "yes") == 1
        assert two_id not in {int(row["id"]) for row in one.client_list()}
        assert exchange(cluster_proxy.port, b"CLIENT ID\r\n")[0].startswith(b":")
        own = int(exchange(cluster_proxy.port, b"CLIENT ID\r\n")[0][1:-2]) + 1  # the next connection's id
        assert exchange(cluster_proxy.port, b"CLIENT KILL ID %d SKIPME no\r\nPING\r\n" % own) == (b":1\r\n", True)
        assert exchange(cluster_proxy.port, b"CLIENT KILL ID 0\r\n")[0] == b"-ERR client-id should be greater than 0\r\n"
    finally:
        one.close()
        two.close()


def test_client_kill_addr_and_laddr_name_the_proxy_s_clients(cluster_proxy):
    """The addresses CLIENT LIST shows (the client's own, the proxy's listener) kill those clients,
    by the old form `CLIENT KILL addr:port` and by the ADDR and LADDR filters, as redis-py's
    test_client_kill* do against one server; an address no client of the proxy has still goes
    to every master ("No such client" / 0)."""
    def pair():
        one = redis.Redis(port=cluster_proxy.port, single_connection_client=True)
        two = redis.Redis(port=cluster_proxy.port, single_connection_client=True)
        one.client_setname("kill-one")
        two.client_setname("kill-two")
        rows = {row.get("name"): row for row in one.client_list()}
        assert {"kill-one", "kill-two"} <= set(rows)
        return one, two, rows

    def names(client):
        return {row.get("name") for row in client.client_list()}

    one, two, rows = pair()
    try:
        assert one.client_kill(rows["kill-two"]["addr"]) is True
        assert "kill-two" not in names(one) and "kill-one" in names(one)
        with pytest.raises(redis.ResponseError, match="^No such client$"):
            one.client_kill(rows["kill-two"]["addr"])
    finally:
        one.close()
        two.close()
    one, two, rows = pair()
    try:
        assert one.client_kill_filter(_id=None, addr=rows["kill-two"]["addr"]) == 1
        assert one.client_kill_filter(_id=None, addr=rows["kill-one"]["addr"]) == 0  # SKIPME yes
        assert one.client_kill_filter(_id=None, addr="127.0.0.1:1") == 0
        assert "kill-two" not in names(one) and "kill-one" in names(one)
    finally:
        one.close()
        two.close()
    one, two, rows = pair()
    try:
        assert rows["kill-two"]["laddr"] == f"127.0.0.1:{cluster_proxy.port}"
        assert one.client_kill_filter(_id=None, laddr=rows["kill-two"]["laddr"]) >= 1
        assert "kill-two" not in names(one) and "kill-one" in names(one)
        # the old form on the caller's own address closes the caller after its reply
        three = redis.Redis(port=cluster_proxy.port, single_connection_client=True, retry=Retry(NoBackoff(), 0))
        own = three.client_info()["addr"]
        assert exchange(cluster_proxy.port, b"CLIENT KILL " + own.encode() + b"\r\nPING\r\n") == \
            (b"+OK\r\n+PONG\r\n", False)  # another connection kills `three`, and goes on
        with pytest.raises(redis.ConnectionError):
            three.execute_command("PING")
        assert exchange(cluster_proxy.port, b"CLIENT KILL 127.0.0.1:1\r\n")[0] == b"-ERR No such client\r\n"
        assert exchange(cluster_proxy.port, b"CLIENT KILL 127.0.0.1:1\r\nPING\r\n")[0] == \
            b"-ERR No such client\r\n+PONG\r\n"
    finally:
        one.close()
        two.close()

"""In front of a cluster: a client gone (closed or half-closed) during a BLPOP on the connection
lent by its key's owner is freed there, as Redis frees it: another client's LPUSH stays in the
list (`proxy/session/gone.py`; standalone: tests/integration/test_gone_clients.py)."""

import socket
import time

import pytest
import redis

from tests.integration.test_gone_clients import read_to_eof, send
from tests.servers import wait_for


def blocked_clients(cluster) -> int:
    return sum(cluster.client(node).info("clients")["blocked_clients"] for node in cluster._live())


@pytest.mark.parametrize("how", ["half-close", "close"])
def test_a_blpop_of_a_gone_client_pops_nothing(redis_cluster, cluster_proxy, how):
    client = redis.Redis(port=cluster_proxy.port, socket_timeout=10)
    client.delete("gone:{q}")
    sock = socket.create_connection(("127.0.0.1", cluster_proxy.port))
    try:
        send(sock, ("BLPOP", "gone:{q}", "0"))
        wait_for(lambda: blocked_clients(redis_cluster) == 1, 10, "the BLPOP blocked on its master")
        if how == "half-close":
            sock.shutdown(socket.SHUT_WR)
        else:
            sock.close()
        wait_for(lambda: blocked_clients(redis_cluster) == 0, 10, "the master freeing the gone client's BLPOP")
        assert client.lpush("gone:{q}", "x") == 1
        time.sleep(0.1)
        assert client.llen("gone:{q}") == 1
        if how == "half-close":
            assert read_to_eof(sock) == b""
    finally:
        sock.close()
        client.close()


def test_a_wait_of_a_gone_client_is_freed_on_every_master(redis_cluster, cluster_proxy):
    """WAIT goes to every master on lent connections; with one replica each, WAIT 2 0 waits
    forever: the client gone, every master frees it."""
    masters = len([node for node in redis_cluster._live() if node.is_master])
    sock = socket.create_connection(("127.0.0.1", cluster_proxy.port))
    try:
        send(sock, ("WAIT", "2", "0"))
        wait_for(lambda: blocked_clients(redis_cluster) == masters, 10, "WAIT blocked on every master")
        sock.shutdown(socket.SHUT_WR)
        wait_for(lambda: blocked_clients(redis_cluster) == 0, 10, "every master freeing the gone client's WAIT")
        read_to_eof(sock)  # (then the client's connection closes)
    finally:
        sock.close()

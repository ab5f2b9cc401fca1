"""Client AUTH in front of a Redis Cluster without applications: the shared connections carry the
proxy's one identity, so the proxy answers AUTH as a node would for that identity."""

import pytest

pytest.importorskip("redis")

from tests.servers import exchange  # noqa: E402


@pytest.mark.parametrize("command", [
    b"AUTH secret\r\n",  # the one-argument form, and the cluster has no password
    b"AUTH default secret\r\n",  # the default user has none: any password passes
    b"AUTH someone secret\r\n",  # a user the proxy does not run as
    b"AUTH\r\n",
    b"AUTH a b c\r\n",
    b"HELLO 3 AUTH someone secret\r\n",
    b"HELLO 4 AUTH default secret\r\n",
])
def test_auth_is_answered_as_a_node_answers_it(cluster_proxy, redis_cluster, command):
    node = redis_cluster.masters()[0]
    direct, _ = exchange(node.port, command + b"PING\r\n")
    through, closed = exchange(cluster_proxy.port, command + b"PING\r\n")
    assert through == direct and not closed


def test_hello_with_the_proxys_credentials_switches_the_protocol(cluster_proxy):
    reply, closed = exchange(cluster_proxy.port, b"HELLO 3 AUTH default secret SETNAME app\r\n"
                                                 b"CLIENT GETNAME\r\nSET auth:1 v\r\nGET auth:1\r\n")
    assert reply.startswith(b"%") and b"proto\r\n:3\r\n" in reply
    assert reply.endswith(b"$3\r\napp\r\n+OK\r\n$1\r\nv\r\n") and not closed

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


def test_auth_as_default_never_makes_the_client_default(redis_cluster):
    """Issue 49: with a policy the proxy's connections run as its ACL user on every node; a
    client's `AUTH default x` (the nodes' default user has no password) passes as Redis would
    answer it, yet the client stays that user: FLUSHALL inside a script is refused, on the nodes."""
    import os

    from proxy.commands.table import CommandTable
    from proxy.policy.acl import compile_users
    from proxy.policy.engine import Engine
    from proxy.policy.loader import load_policy_text
    from tests.cluster.start import proxy_for
    from tests.servers import REPO

    path = os.path.join(REPO, "configs", "policies", "lowercase-colon.yaml")
    process = proxy_for(redis_cluster, "--policy", path)
    try:
        owner = redis_cluster.master_for_key("guard:key")
        redis_cluster.client(owner).set("guard:key", "v")
        for login in (b"AUTH default x\r\n", b"HELLO 2 AUTH default x\r\n", b"HELLO 3 AUTH default x\r\n"):
            reply, closed = exchange(process.port, login + b"ACL WHOAMI\r\nEVAL \"return redis.call('FLUSHALL')\" 0\r\n"
                                     b"ACL WHOAMI\r\n", timeout=5, settle=0.5)
            assert not closed and b"$7\r\ndefault\r\n" not in reply, reply
            assert reply.count(b"redis-guard:lowercase-colon") == 2, reply
        assert redis_cluster.client(owner).get("guard:key") == b"v"
    finally:
        process.stop()
        with open(path) as f:
            users = compile_users(Engine(load_policy_text(f.read()), CommandTable.from_snapshot()), None)
        for node in redis_cluster.nodes:
            if node.alive:
                redis_cluster.command(node, "ACL", "DELUSER", *(user.name for user in users.users))

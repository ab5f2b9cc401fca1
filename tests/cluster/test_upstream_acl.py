"""The second wall in front of a Redis Cluster: ACL is per node and not replicated, so the proxy
creates the policy's users on every node, masters and replicas, and they hold there."""

import pytest
import redis

from proxy.policy.acl import compile_users
from proxy.policy.engine import Engine
from proxy.policy.loader import load_policy_text
from proxy.policy.passwords import hash_password
from tests.cluster.start import proxy_for
from tests.servers import server_command_table

POLICY = """
name: shop-cluster
auth: required
applications:
  checkout:
    password_hash: "{hash}"
    prefixes: ["shop:order:"]
  reports:
    password_hash: "{hash}"
    prefixes: ["shop:"]
    read_only: true
rules:
  K7: {{}}
  C2: {{}}
"""


@pytest.fixture(scope="module")
def acl_proxy(redis_cluster, tmp_path_factory):
    text = POLICY.format(hash=hash_password(b"pw", log_n=4))
    policy = tmp_path_factory.mktemp("acl") / "policy.yaml"
    policy.write_text(text)
    process = proxy_for(redis_cluster, "--policy", str(policy))
    users = compile_users(Engine(load_policy_text(text), server_command_table()), None)
    yield process, users
    process.stop()
    for node in redis_cluster.nodes:
        if node.alive:
            redis_cluster.command(node, "ACL", "DELUSER", *(user.name for user in users.users))


def test_users_on_every_node(acl_proxy, redis_cluster):
    process, users = acl_proxy
    nodes = [node for node in redis_cluster.nodes if node.alive]
    assert len(nodes) == 6
    assert f"upstream ACL users: 3 applied on {len(nodes)} nodes" in process.log
    for node in nodes:  # masters and replicas: a replica promoted keeps the wall
        names = {n if isinstance(n, str) else n.decode() for n in redis_cluster.command(node, "ACL", "USERS")}
        assert {user.name for user in users.users} <= names, node


def test_the_users_hold_on_the_nodes(acl_proxy, redis_cluster):
    _, users = acl_proxy
    for key in ("shop:order:1", "shop:product:1"):
        redis_cluster.client(redis_cluster.master_for_key(key)).set(key, "v")
    name, password = users.credentials_for("checkout")
    owner = redis_cluster.master_for_key("shop:product:1")
    client = redis_cluster.client(owner, username=name, password=password)
    with pytest.raises(redis.exceptions.NoPermissionError):
        client.get("shop:product:1")
    with pytest.raises(redis.exceptions.ResponseError):
        client.eval("return redis.call('GET', 'shop:product:1')", 0)
    mine = redis_cluster.client(redis_cluster.master_for_key("shop:order:1"), username=name, password=password)
    assert mine.get("shop:order:1") == b"v"
    name, password = users.credentials_for("reports")
    reader = redis_cluster.client(redis_cluster.master_for_key("shop:order:1"), username=name, password=password)
    assert reader.get("shop:order:1") == b"v"
    with pytest.raises(redis.exceptions.NoPermissionError):
        reader.set("shop:order:1", "x")


@pytest.mark.parametrize("where", ["shared", "transaction"])
def test_through_the_proxy_an_applications_commands_run_as_its_user(acl_proxy, redis_cluster, where):
    """The proxy's connections for a client of `checkout` (shared per master, and lent for a
    transaction) log in as checkout's ACL user: a script reaching another application's key in
    the same slot is refused by the node itself, though the proxy let the EVAL through."""
    process, users = acl_proxy
    owner = redis_cluster.client(redis_cluster.master_for_key("{t}"))
    owner.set("shop:product:{t}1", "secret")
    client = redis.Redis(port=process.port, username="checkout", password="pw")
    script = "return redis.call('GET', 'shop:product:{t}1')"
    if where == "shared":
        with pytest.raises(redis.exceptions.ResponseError, match="can't access at least one of the keys|No permissions to access a key"):
            client.eval(script, 1, "shop:order:{t}1")
    else:
        pipe = client.pipeline(transaction=True)
        pipe.set("shop:order:{t}2", "v").eval(script, 1, "shop:order:{t}2")
        replies = pipe.execute(raise_on_error=False)
        assert replies[0] is True and isinstance(replies[1], redis.exceptions.ResponseError)
    assert client.set("shop:order:{t}3", "v") is True
    name = users.credentials_for("checkout")[0]
    assert name in {entry["user"] for entry in owner.client_list()}
    client.close()


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_renamed_policys_users_go_from_every_node_on_reload(redis_cluster, tmp_path, workers):
    """The cluster's node connections open as the new policy's user after a reload (`retarget`),
    so the old policy's user is deleted on every node while the proxy keeps serving."""
    from tests.servers import wait_for

    def users_on(node) -> set[str]:
        return {n if isinstance(n, str) else n.decode() for n in redis_cluster.command(node, "ACL", "USERS")}

    policy = tmp_path / "policy.yaml"
    policy.write_text("name: life\nrules:\n  K2: {style: lowercase}\n")
    process = proxy_for(redis_cluster, "--policy", str(policy), "--workers", workers)
    nodes = [node for node in redis_cluster.nodes if node.alive]
    clients = [redis.Redis(port=process.port) for _ in range(4)]
    try:
        for number, client in enumerate(clients):
            for shard in range(3):  # keys on every master
                assert client.set(f"life:{number}:{{{shard}}}", "1") is True
        assert all("redis-guard:life" in users_on(node) for node in nodes)
        policy.write_text("name: renamed\nrules:\n  K2: {style: lowercase}\n")
        wait_for(lambda: all("redis-guard:renamed" in users_on(node) for node in nodes), 20, "the new user")
        wait_for(lambda: not any("redis-guard:life" in users_on(node) for node in nodes), 40,
                 "the old policy's user to be deleted on every node")
        for number, client in enumerate(clients):
            for shard in range(3):
                assert client.get(f"life:{number}:{{{shard}}}") == b"1"
                assert client.set(f"life:{number}:{{{shard}}}", "2") is True
        for node in nodes:
            listing = redis_cluster.command(node, "CLIENT", "LIST")
            listing = listing.decode() if isinstance(listing, bytes) else listing
            assert "user=redis-guard:life " not in listing, node
    finally:
        for client in clients:
            client.close()
        assert process.stop() == 0
    assert not any("redis-guard:renamed" in users_on(node) for node in nodes)

"""Applications (K7) in front of a Redis Cluster: before a client authenticates, nothing it sends
reaches a node, whose shared connections carry the proxy's own identity."""

import time

import pytest
import redis

from proxy.policy.passwords import hash_password
from tests.cluster.start import proxy_for
from tests.servers import exchange

POLICY = """
name: shop
auth: required
applications:
  checkout:
    password_hash: "{hash}"
    prefixes: ["shop:order:"]
  reports:
    password_hash: "{hash}"
    prefixes: ["shop:order:", "shop:cart:"]
    read_only: true
rules:
  C2: {{baseline: false}}  # (CLIENT KILL on a stream is tested below: the baseline would deny it)
  K7: {{}}
"""
NOAUTH = b"-NOAUTH Authentication required.\r\n"


@pytest.fixture(scope="module")
def shop_proxy(redis_cluster, tmp_path_factory):
    policy = tmp_path_factory.mktemp("apps") / "policy.yaml"
    policy.write_text(POLICY.format(hash=hash_password(b"checkout-pw", log_n=10)))
    process = proxy_for(redis_cluster, "--policy", str(policy))
    yield process
    process.stop()


@pytest.mark.parametrize("command", [
    b"GET shop:order:1\r\n",
    b"set shop:order:1 v\r\n",
    b"Get shop:order:1\r\n",  # mixed case: the second lookup
    b"NO.SUCH.COMMAND shop:order:1\r\n",  # a module's command, for all the proxy knows
    b"nosuchcommand\r\n",
])
def test_before_auth_nothing_is_forwarded(shop_proxy, redis_cluster, command):
    assert exchange(shop_proxy.port, command, timeout=5, settle=0.3)[0] == NOAUTH


def test_after_auth_the_application_reaches_its_keys(shop_proxy, redis_cluster):
    payload = (b"AUTH checkout checkout-pw\r\nSET shop:order:7 v\r\nGET shop:order:7\r\n"
               b"NO.SUCH.COMMAND\r\n")
    reply, _ = exchange(shop_proxy.port, payload, timeout=5, settle=0.5)
    assert reply.startswith(b"+OK\r\n+OK\r\n$1\r\nv\r\n-ERR unknown command"), reply
    assert redis_cluster.client(redis_cluster.master_for_key("shop:order:7")).get("shop:order:7") == b"v"


@pytest.mark.parametrize("protocol", [2, 3])
def test_scan_over_every_master_lists_only_the_applications_keys(shop_proxy, redis_cluster, protocol):
    """SCAN with the MATCH the proxy adds still walks every master with the proxy's own cursors
    (issue 14); an application of two prefixes names one per SCAN."""
    mine = [f"shop:order:{i}" for i in range(60)]
    others = [f"other:{i}" for i in range(30)] + [f"shop:product:{i}" for i in range(10)]
    for key in mine + others:
        redis_cluster.client(redis_cluster.master_for_key(key)).set(key, "v")
    assert len({redis_cluster.master_for_key(key).port for key in mine}) == 3  # on every master
    client = redis.Redis(port=shop_proxy.port, username="checkout", password="checkout-pw", protocol=protocol)
    try:
        assert sorted(k.decode() for k in client.scan_iter(count=7)) == sorted(mine)
        assert sorted(k.decode() for k in client.scan_iter(match="shop:order:1*")) == sorted(
            k for k in mine if k.startswith("shop:order:1"))
    finally:
        client.close()
    reports = redis.Redis(port=shop_proxy.port, username="reports", password="checkout-pw", protocol=protocol)
    try:
        with pytest.raises(redis.exceptions.NoPermissionError, match="one SCAN per prefix"):
            reports.scan(0)
        with pytest.raises(redis.exceptions.NoPermissionError, match="RANDOMKEY"):
            reports.randomkey()
        assert sorted(k.decode() for k in reports.scan_iter(match="shop:order:*")) == sorted(mine)
    finally:
        reports.close()



@pytest.mark.parametrize("protocol", [2, 3])
def test_tracking_copy_and_pubsub_stay_the_application_s(shop_proxy, redis_cluster, protocol):
    """Issue 49 in front of a cluster: CLIENT TRACKING REDIRECT names a session of the same
    application only (another application's CLIENT ID, or a node's connection found in its CLIENT
    LIST, gets Redis's error for an id no client has), BCAST needs PREFIXes under the
    application's; COPY ... DB and other applications' channel names are refused. On a stream
    (CLIENT REPLY OFF) REDIRECT and CLIENT KILL are checked too."""
    node = redis_cluster.client(redis_cluster.master_for_key("shop:order:1"))
    client = redis.Redis(port=shop_proxy.port, username="checkout", password="checkout-pw", protocol=protocol,
                         single_connection_client=True)
    other = redis.Redis(port=shop_proxy.port, username="reports", password="checkout-pw", protocol=protocol,
                        single_connection_client=True)
    try:
        own, others = client.client_id(), other.client_id()
        ids = [others] + [int(row["id"]) for row in node.client_list()]
        for client_id in ids:
            if client_id == own:  # (a node's ids and the proxy's numbers are both small)
                continue
            with pytest.raises(redis.exceptions.ResponseError,
                               match="The client ID you want redirect to does not exist"):
                client.execute_command("CLIENT", "TRACKING", "ON", "REDIRECT", client_id)
        assert client.execute_command("CLIENT", "TRACKING", "ON", "REDIRECT", own) in (b"OK", "OK", True)
        assert client.client_id() == own
        assert client.execute_command("CLIENT", "TRACKING", "OFF") in (b"OK", "OK", True)
        with pytest.raises(redis.exceptions.NoPermissionError, match="BCAST without PREFIX"):
            client.execute_command("CLIENT", "TRACKING", "ON", "BCAST")
        with pytest.raises(redis.exceptions.NoPermissionError, match="K7"):
            client.execute_command("CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "shop:cart:")
        # On a stream of its own (CLIENT REPLY OFF) too: the master answers that nobody has the id.
        # (one live id of each master: the stream's master is any of them)
        each = [redis_cluster.client(master).client_id() for master in redis_cluster.masters()]
        payload = (b"AUTH checkout checkout-pw\r\nCLIENT REPLY OFF\r\n" +
                   b"".join(b"CLIENT TRACKING ON REDIRECT %d\r\n" % client_id for client_id in each) +
                   b"CLIENT REPLY ON\r\nPING\r\n")
        assert exchange(shop_proxy.port, payload, timeout=5, settle=0.5)[0] == b"+OK\r\n+OK\r\n+PONG\r\n"
        # A CLIENT KILL on that stream reaches none of the proxy's connections.
        before = _settled_ids(redis_cluster)  # (the last exchange's stream connection gone)
        payload = b"AUTH checkout checkout-pw\r\nCLIENT REPLY OFF\r\nCLIENT REPLY ON\r\nCLIENT KILL TYPE normal\r\n"
        assert exchange(shop_proxy.port, payload, timeout=5, settle=0.5)[0] == b"+OK\r\n+OK\r\n:0\r\n"
        after = {(master.port, row["id"]) for master in redis_cluster.masters()
                 for row in redis_cluster.client(master).client_list()}
        assert len(before - after) <= 1  # (the stream's own connection, closed with it)
        assert not any("t" in row["flags"] for master in redis_cluster.masters()
                       for row in redis_cluster.client(master).client_list())
        with pytest.raises(redis.exceptions.NoPermissionError, match="not databases"):
            client.execute_command("COPY", "shop:order:1", "shop:order:2", "DB", "1")
        with pytest.raises(redis.exceptions.NoPermissionError, match="K7"):
            client.execute_command("PUBSUB", "CHANNELS", "*")
        with pytest.raises(redis.exceptions.NoPermissionError, match="K7"):
            client.execute_command("PUBSUB", "NUMSUB", "shop:order:c", "other:c")
        assert client.execute_command("PUBSUB", "CHANNELS") == []
    finally:
        client.close()
        other.close()


def _settled_ids(redis_cluster) -> set:
    """(master port, client id) of every master's clients, once two listings 0.2 s apart agree."""
    def ids():
        return {(master.port, row["id"]) for master in redis_cluster.masters()
                for row in redis_cluster.client(master).client_list()}
    last = ids()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        time.sleep(0.2)
        now = ids()
        if now == last:
            break
        last = now
    return last

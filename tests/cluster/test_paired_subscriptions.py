"""A RESP3 client's channels and patterns in front of a Redis Cluster: on a connection of their
own on one master, the client's other commands routed by slot with Redis's replies (a one-node
cluster's), the policy's writes completed; the connection goes with RESET and with the client.
Its shard channels: on a connection of their own on each channel's master, shown with the
counts one node would show."""

import socket
import time

import pytest
import redis

from tests.cluster.start import proxy_for
from tests.cluster.test_isolation_findings import keys_on_every_master
from tests.integration.test_paired_subscriptions import flood_a_subscriber_that_does_not_read
from tests.servers import exchange_batches, read_until_quiet

HELLO3 = b"HELLO 3\r\n"
POLICY = "name: pushes-cluster\nrules:\n  T1: {action: inject, default_ttl: 600}\n"


@pytest.fixture(scope="module")
def policy_proxy(redis_cluster, tmp_path_factory):
    policy = tmp_path_factory.mktemp("pushes") / "policy.yaml"
    policy.write_text(POLICY)
    process = proxy_for(redis_cluster, "--policy", str(policy))
    yield process
    process.stop()


def subscribers(cluster, channel: str) -> int:
    """The channel's subscribers on every master (PUBSUB NUMSUB is per node)."""
    return sum(dict(cluster.client(node).pubsub_numsub(channel))[channel.encode()] for node in cluster.masters())


def wait_for_subscribers(cluster, channel: str, count: int) -> None:
    deadline = time.monotonic() + 5
    while subscribers(cluster, channel) != count:
        assert time.monotonic() < deadline, f"{channel}: {subscribers(cluster, channel)} subscribers, not {count}"
        time.sleep(0.05)


@pytest.mark.parametrize("subscribe", [
    b"SUBSCRIBE pc:a\r\n",
    b"PSUBSCRIBE pc:*\r\nSUBSCRIBE pc:a pc:b\r\nUNSUBSCRIBE pc:a\r\n",
    b"SUBSCRIBE\r\nUNSUBSCRIBE\r\n",  # an error, then nothing subscribed
    b"PUBLISH pc:a x\r\nSUBSCRIBE pc:a\r\nPUBLISH pc:b y\r\n",  # (ordered with the client's PUBLISH)
], ids=["channel", "patterns", "errors", "publish"])
def test_a_pipeline_with_keys_on_every_master(redis_cluster, cluster_proxy, one_node_cluster, subscribe):
    keys = keys_on_every_master(redis_cluster, "pc")
    gets = b"".join(b"GET %s\r\n" % key for key in keys)
    batches = [HELLO3, subscribe + gets + b"PING\r\n", b"UNSUBSCRIBE\r\nPUNSUBSCRIBE\r\n" + gets]
    expected = exchange_batches(one_node_cluster.port, batches)
    got = exchange_batches(cluster_proxy.port, batches)
    assert got[1:] == expected[1:]  # (HELLO's map holds the connection's id)


def test_messages_and_writes_while_subscribed(redis_cluster, policy_proxy):
    keys = keys_on_every_master(redis_cluster, "pcw")
    direct = [redis_cluster.client(redis_cluster.master_for_key(key)) for key in keys]
    publisher = redis.Redis(port=policy_proxy.port)
    sock = socket.create_connection(("127.0.0.1", policy_proxy.port), timeout=5)
    try:
        sock.sendall(HELLO3 + b"SUBSCRIBE pc:news\r\n")
        read_until_quiet(sock)
        sock.sendall(b"".join(b"HSET %s f v\r\n" % key for key in keys))
        assert read_until_quiet(sock)[0] == b":1\r\n" * 3
        assert all(0 < client.ttl(key) <= 600 for client, key in zip(direct, keys))  # T1's EXPIRE
        assert publisher.publish("pc:news", "hello") == 1
        assert read_until_quiet(sock)[0] == b">3\r\n$7\r\nmessage\r\n$7\r\npc:news\r\n$5\r\nhello\r\n"
    finally:
        sock.close()
        publisher.close()
        for client, key in zip(direct, keys):
            client.delete(key)


def test_the_connection_goes_with_reset_and_with_the_client(redis_cluster, cluster_proxy):
    sock = socket.create_connection(("127.0.0.1", cluster_proxy.port), timeout=5)
    try:
        sock.sendall(HELLO3 + b"SUBSCRIBE pc:gone\r\n")
        read_until_quiet(sock)
        assert subscribers(redis_cluster, "pc:gone") == 1
        sock.sendall(b"RESET\r\nPING\r\n")
        assert read_until_quiet(sock)[0] == b"+RESET\r\n+PONG\r\n"
        wait_for_subscribers(redis_cluster, "pc:gone", 0)
        sock.sendall(HELLO3 + b"SUBSCRIBE pc:gone\r\n")
        read_until_quiet(sock)
        assert subscribers(redis_cluster, "pc:gone") == 1
    finally:
        sock.close()
    wait_for_subscribers(redis_cluster, "pc:gone", 0)


def test_nothing_is_subscribed_after_reset(cluster_proxy, one_node_cluster):
    """RESET's +RESET comes once the connection aside has unsubscribed: a PUBLISH after it finds
    nobody, and no message comes after +RESET (as from one node)."""
    batches = [HELLO3, b"SUBSCRIBE pc:after PC:other\r\n", b"RESET\r\nPUBLISH pc:after m\r\nPING\r\n"]
    expected = exchange_batches(one_node_cluster.port, batches)
    assert expected[2] == (b"+RESET\r\n:0\r\n+PONG\r\n", False)
    for _ in range(5):
        assert exchange_batches(cluster_proxy.port, batches)[1:] == expected[1:]


@pytest.mark.parametrize("subscribe, unsubscribe", [
    (b"SUBSCRIBE pc:r\r\n", b"UNSUBSCRIBE\r\n"),
    (b"SSUBSCRIBE pc:r\r\n", b"SUNSUBSCRIBE\r\n"),
], ids=["channel", "shard-channel"])
@pytest.mark.parametrize("command", [b"MONITOR\r\n", b"CLIENT TRACKING ON\r\n", b"CLIENT REPLY OFF\r\n",
                                     b"HELLO 2\r\n"],
                         ids=["monitor", "tracking", "reply-off", "hello-2"])
def test_what_would_stream_elsewhere_is_refused_while_subscribed(redis_cluster, cluster_proxy, one_node_cluster,
                                                                 command, subscribe, unsubscribe):
    """Its replies could not be ordered with the subscriptions' pushes (HELLO 2: the server would
    send them as RESP2 replies): refused while anything is subscribed, Redis's once nothing is."""
    keys = keys_on_every_master(redis_cluster, "pcr")
    got = exchange_batches(cluster_proxy.port, [HELLO3, subscribe + command + b"GET %s\r\n" % keys[1]])
    assert b"-ERR " in got[1][0] and b"not supported through Redis Guard" in got[1][0], got
    assert got[1][0].endswith(b"_\r\n"), got  # (the GET after it, routed by slot)
    batches = [HELLO3, subscribe + unsubscribe + command + b"PING\r\n"]
    if command not in (b"HELLO 2\r\n", b"MONITOR\r\n"):  # (HELLO's map holds the connection's id; times)
        assert exchange_batches(cluster_proxy.port, batches)[1:] == exchange_batches(one_node_cluster.port, batches)[1:]


def pushes_of(data: bytes) -> list[bytes]:
    """Each push of `data`, which holds only pushes of three elements, none holding `>3`."""
    assert data.startswith(b">3\r\n"), data
    return [b">3\r\n" + push for push in data.split(b">3\r\n")[1:]]


def shard_channels(cluster) -> list[bytes]:
    """Two shard channels of one slot on the first master, one on each of the others."""
    first, second, third = keys_on_every_master(cluster, "pcs")
    return [first, first.replace(b"pcs", b"pcs2"), second, third]


def test_shard_channels_on_every_master(redis_cluster, cluster_proxy, one_node_cluster):
    """Shard channels of every master, with channels and keys of every master: the replies,
    confirmations and counts one node gives. SUNSUBSCRIBE without a channel reaches every master;
    one node unsubscribes in the order of its dict, so its confirmations are compared as a set,
    their counts in order."""
    a, a2, b, c = shard_channels(redis_cluster)
    keys = keys_on_every_master(redis_cluster, "pcsk")
    gets = b"".join(b"GET %s\r\n" % key for key in keys)
    batches = [
        HELLO3,
        b"SSUBSCRIBE %s\r\nSSUBSCRIBE %s\r\nSSUBSCRIBE %s %s\r\n" % (b, c, a, a2) + gets + b"PING\r\n",
        b"SUBSCRIBE pcs:ch\r\nSUNSUBSCRIBE %s\r\nSUNSUBSCRIBE pcs:never\r\nSSUBSCRIBE %s\r\n" % (b, c) + gets,
        b"SSUBSCRIBE %s %s\r\nSSUBSCRIBE\r\nSUNSUBSCRIBE %s %s\r\n" % (a, b, a, c) + gets,  # (CROSSSLOT, arity)
        b"SSUBSCRIBE %s\r\n" % b,
        b"SUNSUBSCRIBE\r\n",
        b"SUNSUBSCRIBE\r\nUNSUBSCRIBE\r\n" + gets + b"PING\r\n",
    ]
    expected = exchange_batches(one_node_cluster.port, batches)
    got = exchange_batches(cluster_proxy.port, batches)
    assert b"MOVED" not in b"".join(data for data, _closed in got), got
    assert got[1:5] == expected[1:5]
    assert got[6:] == expected[6:]
    got_pushes, expected_pushes = pushes_of(got[5][0]), pushes_of(expected[5][0])
    assert [push.rsplit(b":", 1)[1] for push in got_pushes] == [b"3\r\n", b"2\r\n", b"1\r\n", b"0\r\n"]
    assert [push.rsplit(b":", 1)[1] for push in expected_pushes] == [b"3\r\n", b"2\r\n", b"1\r\n", b"0\r\n"]
    assert sorted(push.rsplit(b":", 1)[0] for push in got_pushes) == \
        sorted(push.rsplit(b":", 1)[0] for push in expected_pushes)


def test_shard_messages_and_reset(redis_cluster, cluster_proxy):
    """Messages published on every master reach the subscriber; when RESET's +RESET comes, none
    of its channels and shard channels has a subscriber left."""
    channels = shard_channels(redis_cluster)
    publisher = redis.Redis(port=cluster_proxy.port)
    sock = socket.create_connection(("127.0.0.1", cluster_proxy.port), timeout=5)
    try:
        sock.sendall(HELLO3 + b"SUBSCRIBE pcs:plain\r\n" +
                     b"".join(b"SSUBSCRIBE %s\r\n" % channel for channel in channels))
        assert read_until_quiet(sock)[0].endswith(b":4\r\n")
        for channel in channels:
            assert publisher.execute_command("SPUBLISH", channel, b"m-" + channel) == 1
        got = pushes_of(read_until_quiet(sock)[0])
        assert sorted(got) == sorted(b">3\r\n$8\r\nsmessage\r\n$%d\r\n%s\r\n$%d\r\nm-%s\r\n"
                                     % (len(channel), channel, len(channel) + 2, channel) for channel in channels)
        sock.sendall(b"RESET\r\n")
        assert read_until_quiet(sock)[0] == b"+RESET\r\n"
        assert [publisher.execute_command("SPUBLISH", channel, b"late") for channel in channels] == [0] * 4
        assert subscribers(redis_cluster, "pcs:plain") == 0
        sock.sendall(b"PING\r\n")
        assert read_until_quiet(sock)[0] == b"+PONG\r\n"
    finally:
        sock.close()
        publisher.close()


def test_the_client_is_disconnected_when_a_masters_shard_channels_are_gone(redis_cluster, cluster_proxy):
    """One master's connection aside for shard channels killed there (as a failover would close
    it): the client is disconnected, as a subscriber of that server would be."""
    channels = shard_channels(redis_cluster)
    sock = socket.create_connection(("127.0.0.1", cluster_proxy.port), timeout=5)
    try:
        sock.sendall(HELLO3 + b"SSUBSCRIBE %s %s\r\nSSUBSCRIBE %s\r\n" % (channels[0], channels[1], channels[2]))
        assert read_until_quiet(sock)[0].endswith(b":3\r\n")
        owner = redis_cluster.client(redis_cluster.master_for_key(channels[0]))
        killed = sum(owner.client_kill_filter(_id=entry["id"]) for entry in owner.client_list()
                     if entry["cmd"] == "ssubscribe" and entry.get("ssub") == "2")
        assert killed == 1
        assert read_until_quiet(sock, 5, 1.0) == (b"", True)
    finally:
        sock.close()


def test_a_subscriber_that_does_not_read_holds_the_proxys_memory_bounded(redis_cluster, cluster_proxy):
    publisher = redis_cluster.client(redis_cluster.masters()[0])
    grown = flood_a_subscriber_that_does_not_read(cluster_proxy.port, cluster_proxy.process.pid, publisher.publish,
                                                  b"pc:flooded")
    assert grown < 40, f"the proxy grew by {grown:.0f} MB for a subscriber that does not read"


def test_a_subscription_inside_multi_while_subscribed_is_refused(redis_cluster, cluster_proxy):
    """At EXEC it would run on the transaction's connection: subscriptions in two places."""
    got = exchange_batches(cluster_proxy.port, [HELLO3, b"SUBSCRIBE pc:m\r\nMULTI\r\nSUBSCRIBE pc:n\r\nEXEC\r\nPING\r\n"])
    assert b"not supported through Redis Guard" in got[1][0], got
    assert got[1][0].endswith(b"-EXECABORT Transaction discarded because of previous errors.\r\n+PONG\r\n"), got


def test_the_client_is_disconnected_when_its_subscriptions_are_gone(redis_cluster, cluster_proxy):
    """The connection aside killed on its master (as a failover would close it): the client is
    disconnected, as a subscriber of that server would be."""
    sock = socket.create_connection(("127.0.0.1", cluster_proxy.port), timeout=5)
    try:
        sock.sendall(HELLO3 + b"SUBSCRIBE pc:k1 pc:k2 pc:k3 pc:k4 pc:k5\r\n")  # (sub=5: this test's)
        read_until_quiet(sock)
        killed = 0
        for node in redis_cluster.masters():
            client = redis_cluster.client(node)
            for entry in client.client_list():
                if entry["cmd"] == "subscribe" and entry["sub"] == "5":
                    killed += client.client_kill_filter(_id=entry["id"])
        assert killed == 1
        assert read_until_quiet(sock, 5, 1.0) == (b"", True)
    finally:
        sock.close()

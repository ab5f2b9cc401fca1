"""Proxy bugs in front of a Redis Cluster found by the randomized isolation test
(test_isolation_random.py), each replayed by hand: the same requests through the proxy and to a
one-node cluster owning every slot (what Redis answers in cluster mode). They stay as
regression tests.
"""

import pytest

from tests.servers import exchange_batches


def keys_on_every_master(cluster, name: str = "x") -> list[bytes]:
    """One key per master, found by hash tag."""
    keys, owners = [], set()
    for tag in range(1000):
        key = f"{{k{tag}}}{name}"
        owner = cluster.master_for_key(key).port
        if owner not in owners:
            owners.add(owner)
            keys.append(key.encode())
        if len(owners) == 3:
            return keys
    raise AssertionError("no key found for some master")


@pytest.mark.parametrize("streams", [
    b"SUBSCRIBE ch\r\n",
    b"PSUBSCRIBE p*\r\nSUBSCRIBE a b\r\nUNSUBSCRIBE a\r\n",
    b"SSUBSCRIBE sc\r\n",
], ids=["resp3-subscribe", "resp3-patterns", "resp3-ssubscribe"])
def test_streaming_client_keeps_routing_by_slot(redis_cluster, cluster_proxy, one_node_cluster, streams):
    """A RESP3 client's channels, patterns and shard channels live on connections of their own:
    its other commands are routed by slot, with Redis's replies."""
    keys = keys_on_every_master(redis_cluster)
    batches = [b"HELLO 3\r\n", streams, b"".join(b"GET %s\r\n" % key for key in keys) + b"PING\r\n"]
    got = exchange_batches(cluster_proxy.port, batches)
    assert b"MOVED" not in got[2][0], got
    expected = exchange_batches(one_node_cluster.port, batches)
    assert got[1:] == expected[1:]  # (HELLO's map holds the connection's id)


@pytest.mark.parametrize("streams", [
    [b"SUBSCRIBE ch\r\n", b"UNSUBSCRIBE ch\r\n"],
    [b"HELLO 3\r\n", b"SUBSCRIBE ch\r\n", b"UNSUBSCRIBE\r\n"],  # (all: one, the order of several is the server's)
    [b"PSUBSCRIBE p*\r\nSUBSCRIBE ch\r\n", b"UNSUBSCRIBE ch\r\nPUNSUBSCRIBE p*\r\n"],
    [b"HELLO 3\r\n", b"PUNSUBSCRIBE\r\n"],
    [b"PUNSUBSCRIBE\r\n"],
    [b"SUNSUBSCRIBE\r\nSUNSUBSCRIBE sc\r\n"],
    [b"UNSUBSCRIBE a b\r\n", b"UNSUBSCRIBE\r\n"],
    [b"CLIENT REPLY ON\r\n"],
    [b"SUBSCRIBE ch\r\n", b"RESET\r\n"],
    [b"HELLO 3\r\n", b"PSUBSCRIBE p*\r\n", b"SELECT 0\r\nRESET\r\n"],  # (SELECT: ends at RESET only)
    [b"SSUBSCRIBE sc\r\n", b"RESET\r\n"],
], ids=["resp2", "resp3", "patterns", "resp3-punsubscribe", "punsubscribe", "sunsubscribe", "never-subscribed",
        "client-reply-on",
        "reset", "resp3-reset", "shard-reset"])
def test_a_stream_that_ends_routes_by_slot_again(redis_cluster, cluster_proxy, one_node_cluster, streams):
    """Once no subscription is left (or none was made), or after RESET, the client's commands
    are routed by slot again (a Jedis connection back in its pool after `subscribe`, or one a
    pool cleaned with RESET), with Redis's replies."""
    keys = keys_on_every_master(redis_cluster, "sub")
    batches = streams + [b"".join(b"GET %s\r\n" % key for key in keys) + b"PING\r\n"]
    expected = exchange_batches(one_node_cluster.port, batches)
    got = exchange_batches(cluster_proxy.port, batches)
    skip = 1 if batches[0].startswith(b"HELLO") else 0  # (its reply holds the connection's id)
    assert got[skip:] == expected[skip:]
    assert b"MOVED" not in got[-1][0] and got[-1][0].endswith(b"PONG\r\n")


def test_reset_ends_a_monitor(redis_cluster, cluster_proxy):
    keys = keys_on_every_master(redis_cluster, "mon")
    got = exchange_batches(cluster_proxy.port, [b"MONITOR\r\n", b"RESET\r\n",
                                                b"".join(b"GET %s\r\n" % key for key in keys)])
    assert got[0] == (b"+OK\r\n", False) and got[1][0].endswith(b"+RESET\r\n"), got
    assert got[2] == (b"$-1\r\n" * len(keys), False), got


def test_resp3_watch_then_unsubscribe(cluster_proxy, one_node_cluster):
    batches = [b"HELLO 3\r\n", b"WATCH {k}a\r\n", b"PUNSUBSCRIBE\r\n", b"UNWATCH\r\n", b"PING after\r\n"]
    expected = exchange_batches(one_node_cluster.port, batches)
    assert expected[-1] == (b"$5\r\nafter\r\n", False)
    assert exchange_batches(cluster_proxy.port, batches)[1:] == expected[1:]  # (HELLO replies hold the id)


def test_hello_while_watching(cluster_proxy, one_node_cluster):
    batches = [b"WATCH {k}a\r\n", b"HELLO 3\r\n", b"UNWATCH\r\nGET {k}nokey\r\n"]
    expected = exchange_batches(one_node_cluster.port, batches)
    assert expected[-1] == (b"+OK\r\n_\r\n", False)
    assert exchange_batches(cluster_proxy.port, batches)[-1] == expected[-1]


@pytest.mark.parametrize("batches", [
    [b"MULTI\r\nHELLO 3\r\nEXEC\r\n", b"GET {k}nokey\r\nCLIENT GETNAME\r\n"],
    [b"MULTI\r\nGET {k}a\r\nHELLO 3\r\nEXEC\r\nGET {k}nokey\r\nCLIENT GETNAME\r\n"],  # one pipeline
    [b"HELLO 3\r\n", b"MULTI\r\nHELLO 2\r\nEXEC\r\n", b"GET {k}nokey\r\n"],
    [b"MULTI\r\nHELLO 3\r\nDISCARD\r\n", b"GET {k}nokey\r\n"],  # discarded: no change
    [b"MULTI\r\nHELLO 3\r\nNOSUCHCMD\r\nEXEC\r\n", b"GET {k}nokey\r\n"],  # aborted: no change
], ids=["exec", "exec-pipelined", "back-to-resp2", "discard", "execabort"])
def test_hello_queued_in_multi(cluster_proxy, one_node_cluster, batches):
    """The protocol a HELLO queued in MULTI leaves is the client's after EXEC (seeds 215307440
    and 932020052), and the transaction's connection does not go back to other clients in it."""
    expected = exchange_batches(one_node_cluster.port, batches)
    got = exchange_batches(cluster_proxy.port, batches)
    tail = len(b"$-1\r\n" * 2)  # the replies after EXEC's (which holds the connection's id)
    assert got[-1][0][-tail:] == expected[-1][0][-tail:], (got, expected)
    assert exchange_batches(cluster_proxy.port, [b"GET {k}nokey\r\n"] * 3) == [(b"$-1\r\n", False)] * 3


@pytest.mark.parametrize("batches", [
    [b"CLIENT SETNAME nm\r\n", b"WATCH {k}a\r\n", b"CLIENT GETNAME\r\n"],
    [b"CLIENT SETNAME nm\r\n", b"MULTI\r\nCLIENT GETNAME\r\nEXEC\r\n"],
    [b"MULTI\r\nCLIENT SETNAME nm\r\nEXEC\r\n", b"CLIENT GETNAME\r\n"],
    [b"MULTI\r\nCLIENT SETNAME nm\r\nGET {k}a\r\nEXEC\r\n", b"CLIENT GETNAME\r\n"],
], ids=["getname-watching", "getname-in-multi", "setname-in-multi", "setname-in-keyed-multi"])
def test_client_name_in_transaction(cluster_proxy, one_node_cluster, batches):
    expected = exchange_batches(one_node_cluster.port, batches)
    assert b"nm" in expected[-1][0]
    assert exchange_batches(cluster_proxy.port, batches) == expected


@pytest.mark.parametrize("batches, name", [
    ([b"MULTI\r\nHELLO 2 SETNAME nm\r\nEXEC\r\n", b"CLIENT GETNAME\r\n"], b"nm"),
    ([b"MULTI\r\nHELLO 2 SETNAME nm\r\nCLIENT SETNAME other\r\nEXEC\r\n", b"CLIENT GETNAME\r\n"], b"other"),
    ([b"MULTI\r\nCLIENT SETNAME other\r\nHELLO 3 SETNAME nm\r\nEXEC\r\n", b"CLIENT GETNAME\r\n"], b"nm"),
    ([b"MULTI\r\nHELLO 4 SETNAME nm\r\nEXEC\r\n", b"CLIENT GETNAME\r\n"], None),  # refused: no name
    ([b"MULTI\r\nHELLO 2 SETNAME nm\r\nDISCARD\r\n", b"CLIENT GETNAME\r\n"], None),
], ids=["exec", "setname-after", "setname-before", "refused", "discard"])
def test_a_name_hello_sets_in_a_transaction(cluster_proxy, one_node_cluster, batches, name):
    """EXEC's reply holds connection ids, which differ: only the name asked after it is compared."""
    expected = exchange_batches(one_node_cluster.port, batches)[-1]
    assert expected[0] == (b"$%d\r\n%s\r\n" % (len(name), name) if name else b"$-1\r\n")
    assert exchange_batches(cluster_proxy.port, batches)[-1] == expected


@pytest.mark.parametrize("batches", [
    [b"MULTI\r\nCLIENT SETNAME nm\r\nDISCARD\r\n", b"CLIENT GETNAME\r\n"],
    [b"MULTI\r\nCLIENT SETNAME nm\r\nGET {k}a\r\nDISCARD\r\n", b"CLIENT GETNAME\r\n"],  # seed 410691102
    [b"MULTI\r\nCLIENT SETNAME nm\r\nGET {k}a\r\nNOSUCHCMD\r\nEXEC\r\n", b"CLIENT GETNAME\r\n"],
    [b"WATCH {k}a\r\n", b"SET {k}a 1\r\n", b"MULTI\r\nCLIENT SETNAME nm\r\nEXEC\r\n", b"CLIENT GETNAME\r\n"],
    [b"CLIENT SETNAME old\r\nMULTI\r\nCLIENT SETNAME nm\r\nDISCARD\r\n", b"CLIENT GETNAME\r\n"],
    # Nor by the next transaction's EXEC (seed 2179049): keyless, keyed, and through HELLO.
    [b"MULTI\r\nCLIENT SETNAME nm\r\nDISCARD\r\n", b"MULTI\r\nPING\r\nEXEC\r\n", b"CLIENT GETNAME\r\n"],
    [b"MULTI\r\nCLIENT SETNAME nm\r\nDISCARD\r\n", b"MULTI\r\nGET {k}a\r\nEXEC\r\n", b"CLIENT GETNAME\r\n"],
    [b"MULTI\r\nHELLO 2 SETNAME nm\r\nDISCARD\r\nMULTI\r\nPING\r\nEXEC\r\n", b"CLIENT GETNAME\r\n"],
], ids=["discard", "keyed-discard", "execabort", "watch-failed", "discard-keeps-old", "discard-then-exec",
        "discard-then-keyed-exec", "hello-discard-then-exec"])
def test_a_name_set_in_a_transaction_that_did_not_run_is_not_taken(cluster_proxy, one_node_cluster, batches):
    expected = exchange_batches(one_node_cluster.port, batches)
    assert b"nm" not in expected[-1][0]
    assert exchange_batches(cluster_proxy.port, batches) == expected


def test_failed_hello_keeps_name(cluster_proxy, one_node_cluster):
    batches = [b"HELLO 4 SETNAME nm\r\n", b"CLIENT GETNAME\r\n"]
    expected = exchange_batches(one_node_cluster.port, batches)
    assert expected[0][0].startswith(b"-") and expected[1] == (b"$-1\r\n", False)
    assert exchange_batches(cluster_proxy.port, batches) == expected

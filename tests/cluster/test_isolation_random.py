"""The randomized isolation test (tests/integration/randomclients.py) on a smaller scale, through the
proxy in front of a Redis Cluster (3 masters x 1 replica), as installed and in pure Python: 8
clients, RESP2 and RESP3, all keys of a client in one slot (its namespace is a hash tag); the
expected replies come from a one-node cluster that owns every slot, so that cluster-mode errors
(SELECT, SORT BY...) are Redis's own.
Replay a failure with RG_ISOLATION_SEED; RG_ISOLATION_STEPS sets the steps per client.
"""

import os

import pytest
import redis

from proxy.commands import CommandTable
from proxy.session.behaviour import CLUSTER, REFUSE, STREAM, Behaviour
from tests.cluster.start import proxy_for
from tests.commands.arguments import CommandDocs
from tests.integration import randomclients
from tests.integration.randomclients import Mode, Planner
from tests.integration.test_isolation_random import run_and_compare, seed_for_run

CLIENTS = 8
STEPS = int(os.environ.get("RG_ISOLATION_STEPS", "150"))

# Sent through the cluster but not compared with one node, each for its reason.
NOT_COMPARED = {
    "wait": "the proxy asks every master, which have replicas: 1 where one node says 0",
    "role": "the masters have replicas, the one node none",
    "client|tracking": "invalidations come from the node the tracking connection is on, not the keys' owner",
    "client|getredir": "follows CLIENT TRACKING",
    "client|trackinginfo": "follows CLIENT TRACKING",
    "client|caching": "follows CLIENT TRACKING",
}
# Refused inside MULTI in front of a cluster (EXEC aborts), where one node queues them: the
# transaction's node would answer them naming itself (cluster/presented.py, issue 52).
IN_MULTI_REFUSED = {name: "refused inside MULTI: one node would answer it, naming itself" for name in
                    ("info", "role", "config|get", "client|info", "client|list", "acl|log")}
# Not sent: the cluster bus delivers PUBLISH to every node a moment later, so a message's place
# among a client's replies, and PUBLISH's count (receivers on one node), are not one node's.
LEFT_OUT = {
    "publish": "delivered by the cluster bus, asynchronously",
    "subscribe": "messages arrive through the cluster bus, asynchronously",
    "psubscribe": "messages arrive through the cluster bus, asynchronously",
}


# The one-node reference is a cluster: READONLY, READWRITE and ASKING answer +OK there. The proxy's
# standalone face (the default, as this test's proxy) answers them as one server without cluster
# support: alone, that server's error; inside MULTI refused (EXEC aborts) as CLUSTER's subcommands,
# where a server queues them (docs/cluster-face.md).
NO_CLUSTER_SUPPORT = b"-ERR This instance has cluster support disabled\r\n"


def without_cluster_support(messages: list) -> list:
    """One node's +OK as a server without cluster support answers (its arity errors are the same)."""
    return [(NO_CLUSTER_SUPPORT, (b"-", NO_CLUSTER_SUPPORT[1:-2])) if raw == b"+OK\r\n" else (raw, value)
            for raw, value in messages]


CLUSTER_ONLY = ("readonly", "readwrite", "asking")
STANDALONE_FACE = {
    "presented": {name: without_cluster_support for name in CLUSTER_ONLY},
    "not_in_groups": {name: "the standalone face refuses it inside MULTI (EXEC aborts) as CLUSTER's subcommands"
                      for name in CLUSTER_ONLY},
}


def with_action(behaviour: Behaviour, wanted: int) -> set[str]:
    """Every command and subcommand whose cluster action is `wanted`."""
    found = {f"{container}|{sub}" for container, subs in behaviour.subcommands[CLUSTER].items()
             for sub, action in subs.items() if action == wanted}
    return found | {name for name, action in behaviour.actions[CLUSTER].items() if action == wanted}


def cluster_mode(face: str = "standalone") -> Mode:
    """What differs from the one-node reference through the proxy with `face` (the default: standalone)."""
    behaviour = Behaviour(CommandTable.from_snapshot())
    not_compared = {**NOT_COMPARED, **{name: "the proxy refuses it by design (no connection of the client's own "
                                             "in a cluster)" for name in with_action(behaviour, REFUSE)}}
    # A stream is a connection of the client's own on one master (docs/differences.md):
    # keys of the others get -MOVED, where one node answers them. (A RESP3 client's subscriptions
    # make no stream, but this test's subscribers are RESP2 ones too.)
    known = {name: "a stream is tied to one master" for name in with_action(behaviour, STREAM)}
    presented = STANDALONE_FACE if face != "cluster" else {"presented": {}, "not_in_groups": {}}
    return Mode("cluster", left_out={**LEFT_OUT, **known}, not_compared=not_compared,
                not_in_groups={**IN_MULTI_REFUSED, **presented["not_in_groups"]}, presented=presented["presented"])


@pytest.fixture(scope="module", params=["compiled", "pure"])
def prepared_proxy(redis_cluster, request):
    """The proxy as installed, and with the pure-Python modules that are its reference (the
    cluster's route, parts and run entries are compiled too)."""
    proxy = proxy_for(redis_cluster, env={"REDIS_GUARD_PURE_PYTHON": "1"} if request.param == "pure" else None)
    expected = ("hot path pure Python" if request.param == "pure" else
                "hot path compiled" if os.environ.get("REDIS_GUARD_EXPECT_COMPILED") else "hot path ")
    assert expected in proxy.log, proxy.log
    for node in redis_cluster.masters():
        randomclients.prepare(node.port)
    yield proxy
    proxy.stop()


def test_random_clients_through_cluster_proxy(prepared_proxy, redis_cluster, one_node_cluster):
    # Each way starts from empty servers on both sides: the second does not meet the first's keys.
    for node in redis_cluster.masters():
        redis_cluster.command(node, "FLUSHALL")
    redis.Redis(port=one_node_cluster.port).flushall()
    randomclients.prepare(one_node_cluster.port)
    seed = seed_for_run()
    print(f"seed {seed}")
    planner = Planner(CommandDocs.from_snapshot(), cluster_mode())
    run_and_compare(prepared_proxy.port, one_node_cluster.port, planner, seed, CLIENTS, STEPS)

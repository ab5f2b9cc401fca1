"""Production events in front of a Redis Cluster (issue 50): a hung master (SIGSTOP) answers the
request_timeout error and its node's connection is replaced; a master restarted without
persistence, which loses the policy's ACL users, is ridden out (they are applied again)."""

from __future__ import annotations

import signal
import time

import hiredis
import pytest
import redis
from redis.backoff import ConstantBackoff
from redis.retry import Retry

from tests.cluster.start import start_cluster
from tests.integration.test_restarts import ask
from tests.servers import PASSTHROUGH, ProxyProcess, wait_for


@pytest.fixture
def lone_masters():
    """Three masters and no replica: a paused or killed master is not failed over."""
    cluster = start_cluster(masters=3, replicas=0)
    yield cluster
    for node in cluster.nodes:
        if node.paused and node.running:
            cluster.resume(node)
    cluster.close()


def test_a_hung_master_answers_the_timeout_error(lone_masters, tmp_path):
    cluster = lone_masters
    config = tmp_path / "config.yaml"
    config.write_text(open(PASSTHROUGH).read() + "\nupstream_options:\n  request_timeout: 1\n")
    proxy = ProxyProcess(None, str(config), "--upstream-cluster", cluster.seeds)
    try:
        with redis.Redis(port=proxy.port) as client:
            client.set("{a}k", "v")
            client.set("{b}k", "w")
        owner = cluster.master_for_key("{a}k")
        assert owner is not cluster.master_for_key("{b}k")
        cluster.pause(owner)
        reply, took = ask(proxy.port, "GET", "{a}k")
        assert isinstance(reply, hiredis.ReplyError) and "request_timeout 1s" in str(reply), reply
        assert took < 5, took
        wait_for(lambda: f"upstream {owner.address} is down: no reply within request_timeout" in proxy.log, 5,
                 "the down line")
        cluster.resume(owner)
        wait_for(lambda: ask(proxy.port, "GET", "{a}k")[0] == b"v", 15, "the master to answer again")
    finally:
        proxy.stop()


def test_a_master_restart_is_ridden_out(lone_masters, tmp_path):
    cluster = lone_masters
    policy = tmp_path / "policy.yaml"
    policy.write_text("name: shop\nrules:\n  C2: {}\n")
    proxy = ProxyProcess(None, PASSTHROUGH, "--upstream-cluster", cluster.seeds, "--policy", str(policy))
    try:
        assert "upstream ACL users: 1 applied on 3 nodes" in proxy.log
        owner = cluster.master_for_key("{a}k")
        client = redis.Redis(port=proxy.port, socket_timeout=10, retry=Retry(ConstantBackoff(0.1), 50),
                             retry_on_error=[redis.ConnectionError, redis.TimeoutError])
        assert client.set("{a}k", "1")
        cluster.kill(owner, signal.SIGKILL)
        cluster.restart(owner)  # waits for the cluster to be ready again; the node's users are gone
        names = {n if isinstance(n, str) else n.decode() for n in cluster.command(owner, "ACL", "USERS")}
        assert "redis-guard:shop" not in names
        time.sleep(0.5)  # past the proxy's memory of the failed connects
        for count in range(100):
            assert client.set("{a}k", count)
        assert client.get("{a}k") == b"99"
        names = {n if isinstance(n, str) else n.decode() for n in cluster.command(owner, "ACL", "USERS")}
        assert "redis-guard:shop" in names
        assert "restarted without them" in proxy.log
        client.close()
    finally:
        proxy.stop()

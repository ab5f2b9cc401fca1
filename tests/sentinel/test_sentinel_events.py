"""Production events (issue 50) in front of a Sentinel-managed master: the master restarted
with and without persistence under redis-py traffic with Retry (the policy's ACL users, lost with the
server's memory, applied again on the master the proxy follows: `upstream_acl.following`), also
after a failover moved the master away from the start-up address; /ready probing the master the
sentinels name now; a client half-closing during BLPOP; request_timeout with the master stopped."""

import os
import signal
import socket
import time
import urllib.error
import urllib.request

import hiredis
import pytest
import redis

from tests.integration.test_restarts import Writer, reapplied
from tests.sentinel.group import MASTER_NAME
from tests.servers import free_port, policy_proxy, wait_for

POLICY = "name: shop\nrules:\n  C2: {}\n"


def get(port: int, path: str) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as answer:
            return answer.status
    except urllib.error.HTTPError as error:
        return error.code


def acl_names(port: int) -> set[str]:
    with redis.Redis(port=port, socket_timeout=2) as admin:
        return {name if isinstance(name, str) else name.decode() for name in admin.acl_users()}


def slow_failover(group) -> None:
    """No failover for a master down a few seconds (a restart, a SIGSTOP) in this test."""
    for sentinel in group.sentinels:
        with sentinel.client() as client:
            client.execute_command("SENTINEL", "SET", MASTER_NAME, "down-after-milliseconds", "60000")


def proxy_for(group, tmp_path, config: str = ""):
    metrics = free_port()
    proxy = policy_proxy(tmp_path, POLICY, None, "--upstream-sentinel", group.spec,
                         config=f"metrics: 127.0.0.1:{metrics}\n" + config)
    return proxy, metrics


def restart(server, persistence: bool = False) -> float:
    """The server killed (without persistence) or stopped (with its AOF) and started again on its
    port, as a master."""
    server.stop(signal.SIGTERM if persistence else signal.SIGKILL)
    time.sleep(0.3)
    server.extra = ("--appendonly", "yes") if persistence else ()  # a promoted replica comes back as a master
    server.start()
    return time.monotonic()


def aof_on(server) -> None:
    with redis.Redis(port=server.port, socket_timeout=5) as admin:
        admin.config_set("appendonly", "yes")
        wait_for(lambda: admin.info("persistence")["aof_rewrite_in_progress"] == 0
                 and admin.info("persistence")["aof_enabled"] == 1, 20, "the AOF to be written")


def ridden_out(writer, proxy, restarted: float) -> None:
    before = writer.written
    wait_for(lambda: writer.written > before + 200, 30, "writes after the restart")
    late = [(round(at - restarted, 2), error) for at, error in writer.errors if at > restarted + 0.5]
    assert not late, (late, proxy.log)


@pytest.mark.parametrize("persistence", [False, True], ids=["no-persistence", "aof"])
def test_master_restarted_is_ridden_out(sentinel_group, tmp_path, persistence):
    group = sentinel_group
    slow_failover(group)
    if persistence:
        aof_on(group.master)
    proxy, metrics = proxy_for(group, tmp_path)
    writer = Writer(proxy.port, seconds=90, count=300_000, retries=60)
    try:
        assert "redis-guard:shop" in acl_names(group.master.port)
        writer.start()
        wait_for(lambda: writer.written > 50, 10, "writes before the restart")
        restarted = restart(group.master, persistence)
        ridden_out(writer, proxy, restarted)
        assert "redis-guard:shop" in acl_names(group.master.port)
        assert reapplied(proxy.log) == 1, proxy.log
        wait_for(lambda: get(metrics, "/ready") == 200, 10, "/ready to say 200")
        if persistence:
            with redis.Redis(port=group.master.port) as direct:
                assert direct.dbsize() > 0  # the data came back from the AOF; the users did not
    finally:
        writer.stop()
        proxy.stop()


def test_new_master_restarted_after_a_failover_is_ridden_out(sentinel_group, tmp_path):
    """The users go to the master the proxy follows now, not to the one of start-up (dead)."""
    group = sentinel_group
    proxy, metrics = proxy_for(group, tmp_path)
    writer = Writer(proxy.port, seconds=90, count=300_000, retries=60)
    try:
        writer.start()
        wait_for(lambda: writer.written > 50, 10, "writes before the failover")
        old = group.kill_master()
        new_port = group.wait_for_failover(old.port)
        wait_for(lambda: f"is now 127.0.0.1:{new_port}" in proxy.log, 20, "the proxy to follow the failover")
        before = writer.written
        wait_for(lambda: writer.written > before + 50, 20, "writes to the new master")
        wait_for(lambda: get(metrics, "/ready") == 200, 10, "/ready 200 on the new master")
        restarted = restart(group.master)  # the old master stays down: no replica to promote
        ridden_out(writer, proxy, restarted)
        assert "redis-guard:shop" in acl_names(new_port)
        assert reapplied(proxy.log) == 1, proxy.log
        with redis.Redis(port=new_port) as direct:
            assert direct.get("shop:k1") is not None  # the writes after the restart are there
        time.sleep(1.1)  # past the probe's cached answer
        wait_for(lambda: get(metrics, "/ready") == 200, 10, "/ready to say 200 after the restart")
    finally:
        writer.stop()
        proxy.stop()


def test_idle_proxy_is_ready_again_after_the_new_master_restarted(sentinel_group, tmp_path):
    """No client: /ready finds the users missing on the master the sentinels name now and applies
    them there."""
    group = sentinel_group
    proxy, metrics = proxy_for(group, tmp_path)
    try:
        assert get(metrics, "/ready") == 200
        old = group.kill_master()
        new_port = group.wait_for_failover(old.port)
        restart(group.master)
        time.sleep(1.1)
        wait_for(lambda: get(metrics, "/ready") == 200, 15, "/ready to say 200")
        assert "redis-guard:shop" in acl_names(new_port)
    finally:
        proxy.stop()


def test_half_closed_client_during_blpop_pops_nothing(sentinel_group, tmp_path):
    group = sentinel_group
    proxy, _metrics = proxy_for(group, tmp_path)
    direct = redis.Redis(port=group.master.port, socket_timeout=5)
    try:
        direct.delete("shop:q")
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=5) as sock:
            sock.sendall(hiredis.pack_command(("BLPOP", "shop:q", "0")))
            wait_for(lambda: direct.info("clients")["blocked_clients"] == 1, 10, "the server to block BLPOP")
            sock.shutdown(socket.SHUT_WR)
            wait_for(lambda: direct.info("clients")["blocked_clients"] == 0, 10, "the server to free it")
            with redis.Redis(port=proxy.port, socket_timeout=5) as other:
                assert other.lpush("shop:q", "job") == 1
            time.sleep(0.2)
            assert direct.llen("shop:q") == 1
    finally:
        direct.close()
        proxy.stop()


def test_stopped_master_answers_the_request_timeout(sentinel_group, tmp_path):
    group = sentinel_group
    slow_failover(group)
    proxy, metrics = proxy_for(group, tmp_path, "upstream_options:\n  request_timeout: 1\n")
    pid = group.master.process.pid
    try:
        with redis.Redis(port=proxy.port, socket_timeout=10) as client:
            client.set("shop:k", "v")
        os.kill(pid, signal.SIGSTOP)
        began = time.monotonic()
        with redis.Redis(port=proxy.port, socket_timeout=20) as client:
            with pytest.raises(redis.ResponseError, match="request_timeout 1s"):
                client.get("shop:k")
        assert time.monotonic() - began < 5
        assert get(metrics, "/ready") == 503
        os.kill(pid, signal.SIGCONT)

        def answers():
            try:
                with redis.Redis(port=proxy.port, socket_timeout=5) as client:
                    return client.get("shop:k") == b"v"
            except redis.RedisError:
                return False

        wait_for(answers, 15, "GET to answer again")
        wait_for(lambda: get(metrics, "/ready") == 200, 10, "/ready to say 200")
    finally:
        if group.master.process.poll() is None:
            os.kill(pid, signal.SIGCONT)
        proxy.stop()

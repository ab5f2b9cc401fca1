"""The proxy's own ACL users come and go with it (upstream_acl.py): a renamed policy's users are
deleted on reload, a clean exit deletes the users no other proxy uses and keeps those a second
proxy on the same upstream still uses, and users the proxy did not create are never deleted (all
checked with ACL LIST on the server itself). And the baseline guard holds through a running proxy
for a policy that does not name C2, unless it says `C2: {baseline: false}`."""

from __future__ import annotations

import signal

import pytest
import redis

from tests.servers import RedisServer, policy_proxy, wait_for

POLICY = "name: {name}\nrules:\n  K2: {{style: lowercase}}\n"


@pytest.fixture
def server():
    process = RedisServer()
    yield process
    process.close()


def users(port: int) -> set[str]:
    admin = redis.Redis(port=port)
    try:
        return {name if isinstance(name, str) else name.decode() for name in admin.acl_users()}
    finally:
        admin.close()


def operator_users(port: int) -> None:
    """Users the proxy did not create: one of no policy, one named like an application the policy
    does not have (a stale name to the proxy) but made by an operator with their own password."""
    admin = redis.Redis(port=port)
    admin.execute_command("ACL", "SETUSER", "redis-guard:life:ops", "on", ">operator-pw", "~*", "+@all")
    admin.execute_command("ACL", "SETUSER", "redis-guard:someone-else", "on", ">operator-pw", "~*", "+@all")
    admin.close()


OPERATORS = {"redis-guard:life:ops", "redis-guard:someone-else"}


def test_renamed_policy_reloaded_deletes_the_old_user(server, tmp_path):
    operator_users(server.port)
    proxy = policy_proxy(tmp_path, POLICY.format(name="life"), server.url)
    try:
        assert "redis-guard:life" in users(server.port)
        client = redis.Redis(port=proxy.port)
        assert client.set("a:b", "1") is True  # a connection that outlives the reload
        (tmp_path / "policy.yaml").write_text(POLICY.format(name="renamed"))
        proxy.process.send_signal(signal.SIGHUP)
        wait_for(lambda: "redis-guard:life" not in users(server.port), 20, "the old policy's user to be deleted")
        assert "redis-guard:renamed" in users(server.port)
        assert OPERATORS <= users(server.port)
        # the clients go on, as the new policy's user
        assert client.set("a:c", "2") is True
        fresh = redis.Redis(port=proxy.port)
        assert fresh.get("a:c") == b"2"
        admin = redis.Redis(port=server.port)
        listing = admin.execute_command("CLIENT", "LIST").decode()
        admin.close()
        assert "user=redis-guard:renamed" in listing and "user=redis-guard:life " not in listing
        fresh.close()
        client.close()
    finally:
        assert proxy.stop() == 0
    assert "redis-guard:renamed" not in users(server.port)  # no other proxy: gone at exit
    assert OPERATORS <= users(server.port)


def test_exit_keeps_the_users_a_second_proxy_uses(server, tmp_path):
    operator_users(server.port)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = policy_proxy(tmp_path / "a", POLICY.format(name="life"), server.url)
    second = policy_proxy(tmp_path / "b", POLICY.format(name="life"), server.url)
    try:
        assert "redis-guard:life" in users(server.port)
        assert first.stop() == 0
        assert "redis-guard:life" in users(server.port)  # the second proxy's connections run as it
        assert "kept, in use by another connection (redis-guard:life)" in first.log
        client = redis.Redis(port=second.port)
        assert client.set("a:b", "1") is True
        client.close()
    finally:
        first.stop()
        assert second.stop() == 0
    assert "redis-guard:life" not in users(server.port)
    assert OPERATORS <= users(server.port)


def test_workers_stopping_together_delete_their_users(server, tmp_path):
    """Each worker sees its siblings' connections until they close: it waits for them (bounded)."""
    proxy = policy_proxy(tmp_path, POLICY.format(name="life"), server.url, "--workers", "2")
    try:
        assert "redis-guard:life" in users(server.port)
    finally:
        assert proxy.stop() == 0
    assert "redis-guard:life" not in users(server.port)


def test_a_user_an_operator_changed_is_not_deleted(server, tmp_path):
    proxy = policy_proxy(tmp_path, POLICY.format(name="life"), server.url)
    try:
        admin = redis.Redis(port=server.port)
        admin.execute_command("ACL", "SETUSER", "redis-guard:life", ">operator-pw")  # a second password
        admin.close()
    finally:
        assert proxy.stop() == 0
    assert "redis-guard:life" in users(server.port)


@pytest.mark.parametrize("rules, keys, flushall", [
    ("rules: {}", "C2", "C2"),
    ("rules:\n  K2: {style: lowercase}", "C2", "C2"),
    ("rules:\n  C2: {baseline: false}", None, "C2"),  # `deny` left alone: FLUSHALL, FLUSHDB
    ("rules:\n  C2: {baseline: false, deny: []}", None, None),
])
def test_a_policy_without_c2_keeps_the_baseline(server, tmp_path, rules, keys, flushall):
    proxy = policy_proxy(tmp_path, f"name: nc2\n{rules}\n", server.url)
    client = redis.Redis(port=proxy.port)
    try:
        client.set("a:b", "1")
        for command, rule in ((("KEYS", "*"), keys), (("FLUSHALL",), flushall)):
            if rule is None:
                client.execute_command(*command)
            else:
                with pytest.raises(redis.ResponseError, match=f"breaks rule {rule}"):
                    client.execute_command(*command)
        assert (redis.Redis(port=server.port).dbsize() == 0) is (flushall is None)
    finally:
        client.close()
        proxy.stop()


def test_workers_reloaded_one_by_one_delete_the_renamed_policys_user(server, tmp_path):
    """Each worker reloads on its own; the first to try finds its sibling's connections still
    logged in as the old user and keeps it; its retries (every second, up to 30 s) close its own
    idle ones, so once both have reloaded the old user goes, while the proxy keeps serving."""
    operator_users(server.port)
    proxy = policy_proxy(tmp_path, POLICY.format(name="life"), server.url, "--workers", "2")
    try:
        clients = [redis.Redis(port=proxy.port) for _ in range(6)]  # connections on both workers
        for number, client in enumerate(clients):
            assert client.set(f"a:{number}", "1") is True
        assert "redis-guard:life" in users(server.port)
        (tmp_path / "policy.yaml").write_text(POLICY.format(name="renamed"))
        wait_for(lambda: "redis-guard:renamed" in users(server.port), 20, "the new policy's user")
        wait_for(lambda: "redis-guard:life" not in users(server.port), 40, "the old policy's user to be deleted")
        assert OPERATORS <= users(server.port)
        for number, client in enumerate(clients):  # the clients go on, as the new policy's user
            assert client.get(f"a:{number}") == b"1"
            assert client.set(f"a:{number}", "2") is True
        admin = redis.Redis(port=server.port)
        listing = admin.execute_command("CLIENT", "LIST").decode()
        admin.close()
        assert "user=redis-guard:life " not in listing
        for client in clients:
            client.close()
    finally:
        assert proxy.stop() == 0
    assert "redis-guard:renamed" not in users(server.port)
    assert OPERATORS <= users(server.port)

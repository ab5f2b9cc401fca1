"""Rule C6 `scripts: approved` with a real Redis behind the proxy: redis-py's `Lock` works through
every shipped preset, a script that is not approved is refused before Redis runs it, the approved
library is loaded upstream at start (scripts and functions), and an emptied script cache (SCRIPT
FLUSH by an operator, an upstream restart) never shows a client NOSCRIPT."""

from __future__ import annotations

import hashlib
import os
import time

import hiredis
import pytest
import redis

from tests.integration.test_isolation import Raw
from tests.policy.test_c6_approved import LOCK_KEYS, PRESETS, RELEASE_SHA
from tests.servers import REPO, ProxyProcess, policy_proxy, wait_for

BYPASS = "redis.call('SET', 'BadKey NoTTL', 'x') return 1"


def client_for(name, process):
    if name == "applications":  # clients authenticate as an application (AUTH checkout checkout-secret)
        return redis.Redis(port=process.port, username="checkout", password="checkout-secret", socket_timeout=10)
    return redis.Redis(port=process.port, socket_timeout=10)


@pytest.mark.parametrize("name", PRESETS)
def test_redis_py_lock_through_every_preset(name, own_redis, tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text(f"policy: {os.path.join(REPO, 'configs', 'policies', name + '.yaml')}\n")
    process = ProxyProcess(own_redis.url, str(config))
    direct = redis.Redis(port=own_redis.port)
    client = client_for(name, process)
    try:
        key = LOCK_KEYS[name]
        assert "approved scripts: 3 scripts and 0 function libraries loaded" in process.log
        assert direct.script_exists(RELEASE_SHA) == [True]  # loaded at start, by the proxy
        direct.script_flush()  # the operator empties the cache: no NOSCRIPT for the client
        lock = client.lock(key, timeout=10)
        assert lock.acquire(blocking=False)
        assert lock.extend(5)
        assert 10_000 < direct.pttl(key) <= 16_600  # extended (T2 may have spread the first TTL)
        assert lock.reacquire()
        assert lock.owned()
        lock.release()
        assert direct.exists(key) == 0
        with pytest.raises(redis.exceptions.NoPermissionError, match=r"rule C6 \(approved scripts only\)"):
            client.eval(BYPASS, 0)
        with pytest.raises(redis.exceptions.NoPermissionError, match="rule C6"):
            client.evalsha(hashlib.sha1(BYPASS.encode()).hexdigest(), 0)
        with pytest.raises(redis.exceptions.NoPermissionError, match="rule C6"):
            client.script_load(BYPASS)
        assert direct.exists("BadKey NoTTL") == 0
    finally:
        client.close()
        direct.close()
        process.stop()


GOOD = "return redis.call('SET', KEYS[1], ARGV[1], 'EX', 60)\n"
FUNCTIONS = "#!lua name=mylib\nredis.register_function('hello', function(keys, args) return 'hi' end)\n"
NEWER = "return 'newer'\n"


def test_the_library_is_loaded_upstream_and_noscript_never_reaches_the_client(own_redis, tmp_path):
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "good.lua").write_text(GOOD)
    (tmp_path / "scripts" / "mylib.lua").write_text(FUNCTIONS)
    policy = "name: lib\nrules:\n  C6: {scripts: approved, library: scripts}\n"
    # upstream_acl off: the ACL users the proxy creates do not survive the restart below (a
    # restarted upstream gets them again with the next policy reload only)
    process = policy_proxy(tmp_path, policy, own_redis.url, config="upstream_acl: off\n")
    direct = redis.Redis(port=own_redis.port, decode_responses=True)
    client = redis.Redis(port=process.port, decode_responses=True, socket_timeout=10)
    sha = hashlib.sha1(GOOD.encode()).hexdigest()
    try:
        assert "approved scripts: 4 scripts and 1 function libraries loaded" in process.log
        assert direct.script_exists(sha) == [True]
        assert client.fcall("hello", 0) == "hi"  # nobody but the proxy loaded the library
        assert client.evalsha(sha, 1, "k", "v") == "OK"
        assert 0 < direct.ttl("k") <= 60
        direct.script_flush()
        assert client.evalsha(sha, 1, "k", "w") == "OK"  # not NOSCRIPT
        assert client.eval(GOOD, 1, "k", "x") == "OK"
        assert client.script_load(GOOD) == sha
        with pytest.raises(redis.exceptions.NoPermissionError, match="rule C6"):
            client.fcall("other", 0)
        with pytest.raises(redis.exceptions.NoPermissionError, match="rule C[26]"):  # (the baseline's too)
            client.script_flush()
        own_redis.stop()  # an upstream restart empties every cache
        own_redis.start()

        def runs():
            try:
                return client.evalsha(sha, 1, "k", "y") == "OK"
            except redis.exceptions.ConnectionError:
                return False

        wait_for(runs, 20, "EVALSHA after the upstream restarted")
        assert direct.get("k") == "y"
        # a script added to the library runs once the policy is reloaded
        (tmp_path / "scripts" / "newer.lua").write_text(NEWER)
        with pytest.raises(redis.exceptions.NoPermissionError, match="rule C6"):
            client.eval(NEWER, 0)
        (tmp_path / "policy.yaml").write_text(policy + "# the library changed\n")

        def approved():
            try:
                return client.eval(NEWER, 0) == "newer"
            except redis.exceptions.NoPermissionError:
                return False

        wait_for(approved, 20, "the new script approved after the reload")
        wait_for(lambda: direct.script_exists(hashlib.sha1(NEWER.encode()).hexdigest()) == [True], 10,
                 "the new script loaded upstream by the reload")

        def function_runs():
            try:
                return client.fcall("hello", 0) == "hi"
            except redis.exceptions.ResponseError:  # "Function not found": its load comes after the scripts'
                return False

        wait_for(function_runs, 10, "the reload loaded the functions again")
    finally:
        client.close()
        direct.close()
        process.stop()


SPIN = "while true do end\n"


def test_an_approved_evalsha_keeps_a_connection_of_its_own(own_redis, tmp_path):
    """Sent as EVAL, an approved EVALSHA still runs on a connection of the client's own (as every
    script does): one that does not end gives BUSY to the others, and SCRIPT KILL stops it."""
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "spin.lua").write_text(SPIN)
    process = policy_proxy(tmp_path, "name: lib\nrules:\n  C6: {scripts: approved, library: scripts}\n",
                           own_redis.url)
    redis.Redis(port=own_redis.port).config_set("lua-time-limit", 100)
    runner, other, killer = Raw(process.port, 10), Raw(process.port), Raw(process.port)
    try:
        runner.send("EVALSHA", hashlib.sha1(SPIN.encode()).hexdigest(), "0")
        time.sleep(0.3)
        started = time.monotonic()
        reply = other.call("GET", "k")
        assert isinstance(reply, hiredis.ReplyError) and str(reply).startswith("BUSY"), reply
        assert time.monotonic() - started < 5
        assert killer.call("SCRIPT", "KILL") == b"OK"
        killed = runner.reply()
        assert isinstance(killed, hiredis.ReplyError) and "killed" in str(killed).lower()
        assert other.call("PING") == b"PONG"
    finally:
        for client in (runner, other, killer):
            client.close()
        process.stop()


def test_functions_come_back_after_an_upstream_restart(own_redis, tmp_path):
    """With the proxy's ACL users (the default), the restart that lost them lost the approved
    function libraries too: they are loaded again with the users, without a policy reload."""
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "mylib.lua").write_text(FUNCTIONS)
    process = policy_proxy(tmp_path, "name: fnlib\nrules:\n  C6: {scripts: approved, library: scripts}\n",
                           own_redis.url)
    client = redis.Redis(port=process.port, decode_responses=True, socket_timeout=10)
    try:
        assert client.fcall("hello", 0) == "hi"
        own_redis.stop()  # no persistence: users and functions gone
        own_redis.start()

        def runs():
            try:
                return client.fcall("hello", 0) == "hi"
            except (redis.exceptions.ConnectionError, redis.exceptions.ResponseError):
                return False

        wait_for(runs, 20, "FCALL after the upstream restarted")
        assert process.log.count("function libraries loaded") >= 2  # at start, then after the restart
    finally:
        client.close()
        process.stop()

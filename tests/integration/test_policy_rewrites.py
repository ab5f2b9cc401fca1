"""Rules that change what is sent, on live traffic: TTL injection, DEL→UNLINK, atomic caps."""

import json
import threading
import time

import pytest
import redis

from tests.servers import ProxyProcess, RedisServer, exchange

POLICY = """
name: rewrites
rules:
  C3: {commands: {HGETALL: {action: limit, max: 3}, LRANGE: {action: limit, max: 10}}}
  C4: {}
  T1: {action: inject, default_ttl: 300, persistent: ["config:*"]}
  T2: {jitter: 0.1}
  V1: {max_bytes: 64}
  V2: {max_elements: 20, per_type: {hash: 5}}
"""

REJECT_POLICY = """
name: ttl-required
rules:
  T1: {action: reject}
"""


@pytest.fixture(scope="module")
def server():
    process = RedisServer()
    yield process
    process.close()


def start(tmp_path, server, text):
    policy = tmp_path / "policy.yaml"
    policy.write_text(text)
    config = tmp_path / "config.yaml"
    config.write_text("policy: policy.yaml\n")
    return ProxyProcess(server.url, str(config))


@pytest.fixture
def proxy(tmp_path, server):
    process = start(tmp_path, server, POLICY)
    yield process
    process.stop()


@pytest.mark.parametrize("protocol", [2, 3])
def test_ttl_injected_and_hidden(proxy, server, protocol):
    client = redis.Redis(port=proxy.port, protocol=protocol)
    direct = redis.Redis(port=server.port)
    direct.delete("inj:s", "inj:h", "config:flag")
    assert client.set("inj:s", "v") is True
    assert client.hset("inj:h", "f", "v") == 1  # the hidden EXPIRE's reply never shows
    assert client.set("config:flag", "on") is True
    assert 270 <= direct.ttl("inj:s") <= 330  # 300 s ± 10 % jitter
    assert 270 <= direct.ttl("inj:h") <= 330
    assert direct.ttl("config:flag") == -1  # declared persistent
    # The next command's reply is still its own.
    assert client.hget("inj:h", "f") == b"v"


def test_injection_inside_a_transaction_keeps_exec_reply(proxy, server):
    direct = redis.Redis(port=server.port)
    direct.delete("inj:tx")
    reply, _ = exchange(proxy.port, b"MULTI\r\nHSET inj:tx f v\r\nHGET inj:tx f\r\nEXEC\r\nPING\r\n")
    assert reply == b"+OK\r\n+QUEUED\r\n+QUEUED\r\n*2\r\n:1\r\n$1\r\nv\r\n+PONG\r\n"
    assert 270 <= direct.ttl("inj:tx") <= 330


def test_del_becomes_unlink(proxy, server):
    client = redis.Redis(port=proxy.port)
    client.set("del:a", "1")
    client.set("del:b", "1")
    stats = redis.Redis(port=server.port).info("commandstats")
    calls = lambda stats, name: stats.get(f"cmdstat_{name}", {}).get("calls", 0)
    assert client.delete("del:a", "del:b", "del:none") == 2
    after = redis.Redis(port=server.port).info("commandstats")
    assert calls(after, "unlink") == calls(stats, "unlink") + 1
    assert calls(after, "del") == calls(stats, "del")


def test_string_size_and_append(proxy, server):
    client = redis.Redis(port=proxy.port)
    with pytest.raises(redis.exceptions.NoPermissionError, match="rule V1"):
        client.set("big:s", "x" * 65)
    client.set("big:a", "x" * 60)
    with pytest.raises(redis.exceptions.NoPermissionError, match="V1"):
        client.append("big:a", "y" * 10)  # 70 bytes once appended
    assert redis.Redis(port=server.port).get("big:a") == b"x" * 60


def test_collection_cap_is_atomic_under_concurrent_writers(proxy, server):
    direct = redis.Redis(port=server.port)
    direct.delete("cap:set", "cap:hash")
    errors = []

    def writer(n):
        client = redis.Redis(port=proxy.port)
        for i in range(15):
            try:
                client.sadd("cap:set", f"{n}-{i}")
            except redis.exceptions.NoPermissionError:
                errors.append(n)
        client.close()

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert direct.scard("cap:set") == 20  # exactly the cap: 120 attempts, 100 refused
    assert len(errors) == 100
    client = redis.Redis(port=proxy.port)
    client.hset("cap:hash", mapping={f"f{i}": i for i in range(5)})
    with pytest.raises(redis.exceptions.NoPermissionError, match="V2"):
        client.hset("cap:hash", "f5", 5)
    assert client.hset("cap:hash", "f0", 9) == 0  # updating a field adds nothing: allowed
    assert direct.hlen("cap:hash") == 5
    # Refusals made by the server-side script are logged and counted like the proxy's own (the
    # decision log gathers them per interval: the last one's lines are written on the way out).
    proxy.stop()
    lines = [json.loads(line.split(": ", 1)[1]) for line in proxy.lines if '"rule": "V2"' in line]
    assert sum(line["count"] for line in lines if line["command"] == "SADD") == 100


def test_onread_guard(proxy, server):
    client = redis.Redis(port=proxy.port)
    client.delete("big:hash", "big:list")
    client.hset("big:hash", mapping={"a": 1, "b": 2})
    assert client.hgetall("big:hash") == {b"a": b"1", b"b": b"2"}
    client.hset("big:hash", mapping={"c": 3, "d": 4})
    with pytest.raises(redis.exceptions.NoPermissionError, match="C3"):
        client.hgetall("big:hash")
    client.rpush("big:list", *range(5))
    assert client.lrange("big:list", 0, 4) == [b"0", b"1", b"2", b"3", b"4"]
    with pytest.raises(redis.exceptions.NoPermissionError, match="C3"):
        client.lrange("big:list", 0, 50)


def test_ttl_required_unless_the_pipeline_sets_it(tmp_path, server):
    process = start(tmp_path, server, REJECT_POLICY)
    try:
        client = redis.Redis(port=process.port)
        with pytest.raises(redis.exceptions.NoPermissionError, match="rule T1"):
            client.hset("ttl:h", "f", "v")
        pipe = client.pipeline(transaction=False)
        pipe.hset("ttl:h", "f", "v")
        pipe.expire("ttl:h", 60)
        assert pipe.execute() == [1, True]
        pipe = client.pipeline(transaction=True)
        pipe.hset("ttl:h2", "f", "v")
        pipe.expire("ttl:h2", 60)
        assert pipe.execute() == [1, True]
        assert client.set("ttl:s", "v", ex=60) is True
        # A transaction sent command by command: the EXPIRE may come later, before EXEC.
        reply, _ = exchange(process.port, b"MULTI\r\nHSET ttl:t f v\r\n")
        assert reply == b"+OK\r\n+QUEUED\r\n"
        sock_reply, _ = exchange(process.port, b"MULTI\r\nHSET ttl:t f v\r\nEXPIRE ttl:t 60\r\nEXEC\r\n")
        assert sock_reply == b"+OK\r\n+QUEUED\r\n+QUEUED\r\n*2\r\n:1\r\n:1\r\n"
        sock_reply, _ = exchange(process.port, b"MULTI\r\nHSET ttl:u f v\r\nEXEC\r\nEXISTS ttl:u\r\n")
        assert sock_reply.startswith(b"+OK\r\n+QUEUED\r\n-NOPERM key 'ttl:u' breaks rule T1")
        assert sock_reply.endswith(b":0\r\n")
    finally:
        process.stop()


SCRIPT_POLICY = """
name: scripts
rules:
  K2: {style: lowercase}
  C6: {scripts: %s}
"""


@pytest.mark.parametrize("mode", ["declared", "deny"])
def test_scripts_are_no_way_around_the_rules(tmp_path, server, mode):
    process = start(tmp_path, server, SCRIPT_POLICY % mode)
    try:
        client = redis.Redis(port=process.port)
        script = "return redis.call('SET', KEYS[1], ARGV[1])"
        with pytest.raises(redis.exceptions.NoPermissionError, match="rule (K2|C6)"):
            client.eval(script, 1, "Bad:Key", "v")
        if mode == "declared":
            assert client.eval(script, 1, "good:key", "v") == b"OK"
        else:
            with pytest.raises(redis.exceptions.NoPermissionError, match="rule C6"):
                client.eval(script, 1, "good:key", "v")
            with pytest.raises(redis.exceptions.NoPermissionError, match="rule C6"):
                client.script_load(script)
        assert redis.Redis(port=server.port).exists("Bad:Key") == 0
    finally:
        process.stop()


def test_audit_mode_never_changes_what_runs(tmp_path, server):
    """A dry run logs what would be refused, inside transactions too, and changes nothing."""
    process = start(tmp_path, server, "name: dry\nmode: audit\n" + REJECT_POLICY.split("\n", 2)[2] +
                    "  C4: {}\n  V2: {max_elements: 1}\n")
    evals = lambda: redis.Redis(port=server.port).info("commandstats").get("cmdstat_eval", {}).get("calls", 0)
    try:
        before = evals()
        reply, _ = exchange(process.port, b"MULTI\r\nHSET audit:h f v\r\nEXEC\r\nSADD audit:s a b c\r\nDEL audit:s\r\n")
        assert reply == b"+OK\r\n+QUEUED\r\n*1\r\n:1\r\n:3\r\n:1\r\n"
        assert evals() == before  # no script was sent in place of SADD
        deadline = time.monotonic() + 5
        while '"outcome": "audited"' not in process.log and time.monotonic() < deadline:
            time.sleep(0.05)
        assert '"rule": "T1"' in process.log and '"outcome": "rejected"' not in process.log
    finally:
        process.stop()

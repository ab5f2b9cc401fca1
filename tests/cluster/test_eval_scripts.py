"""In front of a real cluster, scripts as one Redis caches them: EVAL on one master makes EVALSHA
of its body run on any master (the proxy kept the body and loads it where NOSCRIPT is answered),
SCRIPT FLUSH forgets it, and EVALSHA/FCALL queued in MULTI run at EXEC on a master that lacked
them (loaded before EXEC, replies unseen)."""

import hashlib

import pytest

from tests.cluster.start import proxy_for

redis = pytest.importorskip("redis")

BODY = "return {KEYS[1], redis.call('GET', KEYS[1])}"
LIBRARY = "#!lua name=txlib\nredis.register_function('txget', function(keys) return redis.call('GET', keys[1]) end)"


def key_on(redis_cluster, node, prefix: str) -> str:
    for i in range(5000):
        key = f"{prefix}:{i}"
        if redis_cluster.master_for_key(key).port == node.port:
            return key
    raise AssertionError(f"no key for {node}")


def sha_of(body: str) -> str:
    return hashlib.sha1(body.encode()).hexdigest()


def test_evalsha_of_a_body_seen_in_eval_runs_on_every_master(redis_cluster, cluster_proxy):
    client = redis.Redis(port=cluster_proxy.port, socket_timeout=20)
    client.script_flush()
    masters = redis_cluster.masters()
    keys = [key_on(redis_cluster, node, "evalseen") for node in masters]
    for key in keys:
        client.set(key, key)
    # EVAL on the first master only: the others never saw it.
    assert client.eval(BODY, 1, keys[0]) == [keys[0].encode(), keys[0].encode()]
    sha = sha_of(BODY)
    assert [redis_cluster.client(node).script_exists(sha) for node in masters] == [[True], [False], [False]]
    assert client.script_exists(sha, "0" * 40) == [True, False]  # as one Redis: EVALSHA would run it
    for key in keys:  # as one Redis: EVALSHA runs wherever the key lives
        assert client.evalsha(sha, 1, key) == [key.encode(), key.encode()]
        assert client.evalsha_ro(sha.upper(), 1, key) == [key.encode(), key.encode()]
    assert all(redis_cluster.client(node).script_exists(sha) == [True] for node in masters)
    # redis-py's Script object: EVALSHA first, and it works after an EVAL elsewhere.
    other = "return redis.call('STRLEN', KEYS[1])"
    assert client.eval(other, 1, keys[1]) == len(keys[1])
    script = client.register_script(other)
    assert script(keys=[keys[2]]) == len(keys[2])
    # Pipelined, among other commands.
    redis_cluster.client(masters[2]).script_flush()
    pipe = client.pipeline(transaction=False)
    pipe.get(keys[2]).evalsha(sha, 1, keys[2]).get(keys[2])
    assert pipe.execute() == [keys[2].encode(), [keys[2].encode()] * 2, keys[2].encode()]
    # SCRIPT FLUSH through the proxy forgets them: NOSCRIPT, as one Redis says.
    client.eval(BODY, 1, keys[0])
    assert client.script_flush() is True
    for key in keys:
        with pytest.raises(redis.exceptions.NoScriptError):
            client.evalsha(sha, 1, key)
    client.close()


def test_an_unknown_sha_still_answers_noscript(redis_cluster, cluster_proxy):
    client = redis.Redis(port=cluster_proxy.port, socket_timeout=20)
    client.eval("return 1", 0)
    with pytest.raises(redis.exceptions.NoScriptError):
        client.evalsha("0" * 40, 0)
    client.close()


def test_eval_bodies_are_bounded_least_recently_run_dropped(redis_cluster, tmp_path):
    config = tmp_path / "proxy.yaml"
    config.write_text("policy: none\nupstream_options:\n  eval_scripts_memory: 700\n")
    proxy = proxy_for(redis_cluster, "--config", str(config))
    try:
        client = redis.Redis(port=proxy.port, socket_timeout=20)
        client.script_flush()
        masters = redis_cluster.masters()
        first_key = key_on(redis_cluster, masters[0], "bounded")
        other_key = key_on(redis_cluster, masters[1], "bounded")
        bodies = [f"return {n} -- {'x' * 60}" for n in range(4)]  # ~70 bytes (+256 counted) each: two fit
        for body in bodies:
            client.eval(body, 1, first_key)
        assert client.evalsha(sha_of(bodies[3]), 1, other_key) == 3
        with pytest.raises(redis.exceptions.NoScriptError):
            client.evalsha(sha_of(bodies[0]), 1, other_key)  # dropped: over the budget
        client.close()
    finally:
        proxy.stop()


def test_evalsha_and_fcall_queued_in_multi_run_on_a_master_that_lacked_them(redis_cluster, cluster_proxy):
    client = redis.Redis(port=cluster_proxy.port, socket_timeout=20, single_connection_client=True)
    client.script_flush()
    client.function_flush()
    masters = redis_cluster.masters()
    first = key_on(redis_cluster, masters[0], "txscript")
    key = key_on(redis_cluster, masters[1], "txscript")
    client.set(key, "v")
    client.eval(BODY, 1, first)  # cached on the first master only
    loaded = client.script_load("return 'loaded'")
    assert client.function_load(LIBRARY) in (b"txlib", "txlib")
    direct = redis_cluster.client(masters[1])
    direct.script_flush()  # as a restart would: the master lacks them all
    direct.function_flush()
    with client.pipeline(transaction=True) as pipe:
        pipe.evalsha(sha_of(BODY), 1, key).get(key).evalsha(loaded, 1, key).fcall("txget", 1, key)
        assert pipe.execute() == [[key.encode(), b"v"], b"v", b"loaded", b"v"]
    # Keys watched, commands sent one by one (the EXEC alone in its read).
    direct.script_flush()
    client.execute_command("WATCH", key)
    client.execute_command("MULTI")
    assert client.execute_command("EVALSHA", sha_of(BODY), 1, key) in (b"QUEUED", "QUEUED")
    assert client.execute_command("EXEC") == [[key.encode(), b"v"]]
    # A transaction whose first command has no key (deferred) and an EVALSHA with none either.
    direct_all = [redis_cluster.client(node) for node in masters]
    for node in direct_all:
        node.script_flush()
    with client.pipeline(transaction=True) as pipe:
        pipe.evalsha(loaded, 0).evalsha(loaded, 0)
        assert pipe.execute() == [b"loaded", b"loaded"]
    # A script the proxy does not know: NOSCRIPT inside EXEC's reply, as Redis answers it.
    with client.pipeline(transaction=True) as pipe:
        pipe.evalsha("0" * 40, 1, key).get(key)
        replies = pipe.execute(raise_on_error=False)
        assert isinstance(replies[0], redis.exceptions.NoScriptError) and replies[1] == b"v"
    # DISCARD: nothing runs, nothing is left for the next transaction.
    client.execute_command("MULTI")
    client.execute_command("EVALSHA", loaded, 1, key)
    assert client.execute_command("DISCARD") in (b"OK", "OK", True)
    with client.pipeline(transaction=True) as pipe:
        pipe.get(key)
        assert pipe.execute() == [b"v"]
    client.close()


def test_a_resp3_transaction_gets_its_script_too(redis_cluster, cluster_proxy):
    client = redis.Redis(port=cluster_proxy.port, socket_timeout=20, protocol=3)
    masters = redis_cluster.masters()
    key = key_on(redis_cluster, masters[2], "resp3tx")
    client.set(key, "w")
    body = "return (redis.call('GET', KEYS[1]) or '') .. '!'"
    assert client.eval(body, 1, key_on(redis_cluster, masters[0], "resp3tx")) == b"!"
    redis_cluster.client(masters[2]).script_flush()
    with client.pipeline(transaction=True) as pipe:
        pipe.evalsha(sha_of(body), 1, key).evalsha_ro(sha_of(body), 1, key)
        assert pipe.execute() == [b"w!", b"w!"]
    client.close()


def test_script_load_queued_in_multi_reaches_the_other_masters_when_needed(redis_cluster, cluster_proxy):
    client = redis.Redis(port=cluster_proxy.port, socket_timeout=20)
    client.script_flush()
    masters = redis_cluster.masters()
    first = key_on(redis_cluster, masters[0], "txload")
    other = key_on(redis_cluster, masters[1], "txload")
    client.set(other, "o")
    body = "return redis.call('GET', KEYS[1]) or 'none'"
    with client.pipeline(transaction=True) as pipe:
        pipe.get(first).script_load(body)
        assert pipe.execute()[1] in (sha_of(body), sha_of(body).encode())  # loaded on the first master only
    assert redis_cluster.client(masters[1]).script_exists(sha_of(body)) == [False]
    assert client.evalsha(sha_of(body), 1, other) == b"o"
    client.close()

"""Applications (K7) through a running proxy, in front of a redis-server that has a password of
its own: the proxy authenticates clients itself, and their credentials never reach Redis."""

import asyncio
import signal
import socket
import time
import urllib.request

import pytest
import redis
import redis.asyncio
from redis.backoff import NoBackoff
from redis.retry import Retry

from proxy.policy.passwords import hash_password
from tests.servers import (
    ProxyProcess,
    RedisServer,
    exchange,
    exchange_batches,
    free_port,
    read_until_quiet,
    redis_server_version,
    wait_for,
)

UPSTREAM_PASSWORD = "upstream-only"
PASSWORDS = {"checkout": "checkout-pw", "rep": "reports-pw", "catalog": "catalog-pw"}

POLICY = """
name: shop
auth: required
applications:
  checkout:
    password_hash: "{checkout}"
    prefixes: ["shop:order:", "shop:cart:"]
    rules:
      T3: {{max_ttl: 60}}
  reports:
    user: rep
    password_hash: "{rep}"
    prefixes: ["shop:"]
    read_only: true
{extra}rules:
  K7: {{}}
  T3: {{max_ttl: 3600}}
"""
CATALOG = """  catalog:
    password_hash: "{catalog}"
    prefixes: ["shop:product:"]
"""


def policy_text(with_catalog: bool, hashes: dict) -> str:
    return POLICY.format(extra=CATALOG.format(**hashes) if with_catalog else "", **hashes)


@pytest.fixture(scope="module")
def hashes():
    # Cheaper than the default cost, except checkout's, which takes the real slow path.
    return {"checkout": hash_password(PASSWORDS["checkout"].encode()),
            "rep": hash_password(PASSWORDS["rep"].encode(), log_n=10),
            "catalog": hash_password(PASSWORDS["catalog"].encode(), log_n=10)}


@pytest.fixture(scope="module")
def shop(tmp_path_factory, hashes):
    directory = tmp_path_factory.mktemp("apps")
    server = RedisServer(None, "--requirepass", UPSTREAM_PASSWORD)
    policy = directory / "policy.yaml"
    policy.write_text(policy_text(True, hashes))
    metrics_port = free_port()
    config = directory / "config.yaml"
    config.write_text(f"policy: policy.yaml\nmetrics: 127.0.0.1:{metrics_port}\n")
    process = ProxyProcess(f"redis://:{UPSTREAM_PASSWORD}@127.0.0.1:{server.port}", str(config))
    yield server, process, metrics_port
    process.stop()
    server.close()


@pytest.fixture
def admin(shop):
    client = redis.Redis(port=shop[0].port, password=UPSTREAM_PASSWORD)
    yield client
    client.close()


def as_app(proxy_port, user, protocol=2):
    return redis.Redis(port=proxy_port, username=user, password=PASSWORDS[user], protocol=protocol)


def test_before_auth_the_replies_are_those_of_redis_with_a_password(shop):
    """Every reply a client gets before it authenticates, byte for byte as from the redis-server
    behind (which has a password of its own, that no client here knows)."""
    server, process, _ = shop
    payload = (b"PING\r\nGET shop:order:1\r\nSET shop:order:1 v\r\nHELLO\r\nHELLO 3\r\nHELLO 3 SETNAME x\r\n"
               b"MULTI\r\nCLIENT ID\r\nAUTH\r\nAUTH a b c\r\nAUTH nope\r\nAUTH checkout nope\r\n"
               b"HELLO 4\r\nHELLO x\r\nHELLO 3 FOO\r\nHELLO 3 AUTH checkout\r\nHELLO 3 AUTH checkout nope\r\n"
               b"RESET\r\nPING\r\nQUIT\r\nPING\r\n")
    if (redis_server_version() or (0,)) >= (8,):
        # Redis 8.2 leaves unanswered a failed AUTH pipelined after another error or AUTH (the proxy
        # answers each one, as 7.0 does): there each AUTH and HELLO ... AUTH goes in a batch of its own.
        batches = []
        for line in payload.split(b"\r\n")[:-1]:
            if not batches or b"AUTH" in line or b"AUTH" in batches[-1]:
                batches.append(b"")
            batches[-1] += line + b"\r\n"
        assert b"".join(batches) == payload and len(batches) == 9
        replies = exchange_batches(process.port, batches, settle=1.0)
        assert replies == exchange_batches(server.port, batches, settle=1.0)
        reply = (b"".join(data for data, _ in replies), replies[-1][1])
    else:
        reply = exchange(process.port, payload, timeout=5, settle=0.5)
        assert reply == exchange(server.port, payload, timeout=5, settle=0.5)
    assert reply[0].count(b"-NOAUTH") == 9 and reply[0].count(b"-WRONGPASS") == 3 and reply[1]


def test_wrong_password_and_unknown_user(shop):
    for user, password in (("checkout", "wrong"), ("nobody", PASSWORDS["checkout"]),
                           ("default", UPSTREAM_PASSWORD)):  # the upstream's password is not a client's
        # No retries: redis-py retries a refused AUTH, and each failure slows this address down
        client = redis.Redis(port=shop[1].port, username=user, password=password, retry=Retry(NoBackoff(), 0))
        with pytest.raises(redis.exceptions.AuthenticationError, match="invalid username-password"):
            client.ping()
    refusals = []
    for port in (shop[1].port, shop[0].port):  # no credentials: as from the redis-server behind
        with pytest.raises(redis.exceptions.AuthenticationError) as caught:
            redis.Redis(port=port).get("shop:order:1")
        refusals.append(str(caught.value))
    assert refusals[0] == refusals[1] and "authenticated" in refusals[0]


@pytest.mark.parametrize("protocol", [2, 3])  # RESP3: redis-py authenticates with HELLO 3 AUTH
def test_application_uses_its_prefixes_only(shop, admin, protocol):
    client = as_app(shop[1].port, "checkout", protocol)
    assert client.set("shop:order:1", "o", ex=30) is True
    assert client.get("shop:order:1") == b"o"
    assert admin.get("shop:order:1") == b"o"
    admin.set("shop:product:1", "p")
    for call in (lambda: client.get("shop:product:1"), lambda: client.set("shop:product:1", "x", ex=30),
                 lambda: client.mget("shop:order:1", "shop:product:1"),
                 lambda: client.rename("shop:order:1", "shop:product:2")):
        with pytest.raises(redis.exceptions.NoPermissionError,
                           match=r"key 'shop:product:\d' breaks rule K7 \(namespace\): application 'checkout' "
                                 r"may use keys under 'shop:order:', 'shop:cart:' only"):
            call()
    assert admin.get("shop:product:1") == b"p" and admin.exists("shop:product:2") == 0


def test_read_only_application(shop, admin):
    admin.set("shop:order:7", "seven")
    client = as_app(shop[1].port, "rep")
    assert client.get("shop:order:7") == b"seven"
    for call in (lambda: client.set("shop:order:7", "x", ex=30), lambda: client.delete("shop:order:7"),
                 lambda: client.eval("return 1", 1, "shop:order:7")):
        with pytest.raises(redis.exceptions.NoPermissionError, match="breaks rule K7 .* 'reports' is read-only"):
            call()
    assert client.eval_ro("return redis.call('GET', KEYS[1])", 1, "shop:order:7") == b"seven"
    with pytest.raises(redis.exceptions.NoPermissionError, match="rule K7"):
        client.get("other:1")
    assert admin.get("shop:order:7") == b"seven"


def test_read_only_rejects_eval_even_when_it_reads(shop):
    # EVAL may write (its key spec says so): a read-only application uses EVAL_RO.
    client = as_app(shop[1].port, "rep")
    with pytest.raises(redis.exceptions.NoPermissionError, match="command EVAL breaks rule K7"):
        client.eval("return 1", 1, "shop:order:7")


def test_per_application_ttl_override(shop):
    checkout, catalog = as_app(shop[1].port, "checkout"), as_app(shop[1].port, "catalog")
    with pytest.raises(redis.exceptions.NoPermissionError, match=r"rule T3 .*1 min \(got 2 min\)"):
        checkout.set("shop:cart:1", "c", ex=120)
    assert checkout.set("shop:cart:1", "c", ex=60) is True
    assert catalog.set("shop:product:9", "p", ex=120) is True  # the policy's own T3: up to 1 h


def test_asyncio_client_resp3(shop):
    async def main():
        client = redis.asyncio.Redis(port=shop[1].port, username="checkout", password=PASSWORDS["checkout"],
                                     protocol=3)
        try:
            await client.set("shop:cart:async", "a", ex=30)
            value = await client.get("shop:cart:async")
            with pytest.raises(redis.exceptions.NoPermissionError, match="rule K7"):
                await client.get("shop:product:1")
            return value
        finally:
            await client.aclose()

    assert asyncio.run(main()) == b"a"


def test_client_credentials_never_reach_redis(shop, admin):
    """Authenticated clients stay on the proxy's shared, already authenticated connections: new
    client connections that AUTH add no AUTH on the server, and Redis logs no failed login."""
    as_app(shop[1].port, "checkout").ping()  # the shared connection exists
    admin.acl_log_reset()
    before = admin.info("commandstats")
    connections_before = len(admin.client_list())
    clients = [as_app(shop[1].port, "checkout", protocol=2) for _ in range(10)]
    for index, client in enumerate(clients):
        assert client.set(f"shop:order:c{index}", "v", ex=30) is True
    after = admin.info("commandstats")
    for command in ("cmdstat_auth", "cmdstat_hello"):
        assert after.get(command, {}).get("calls", 0) == before.get(command, {}).get("calls", 0), command
    assert admin.acl_log() == []
    assert len(admin.client_list()) == connections_before  # no dedicated connections either
    for client in clients:
        client.close()


def test_hello_setname_and_reset_on_a_dedicated_connection(shop):
    """HELLO 3 AUTH ... SETNAME takes a connection of the client's own; RESET then logs the
    client out of the proxy, and the proxy's connection back in to Redis."""
    reply, _ = exchange(shop[1].port,
                        b"HELLO 3 AUTH checkout checkout-pw SETNAME shopper\r\nCLIENT GETNAME\r\n"
                        b"SET shop:order:r v EX 30\r\nRESET\r\nGET shop:order:r\r\nCLIENT GETNAME\r\n"
                        b"AUTH checkout checkout-pw\r\nGET shop:order:r\r\nCLIENT GETNAME\r\n", timeout=5, settle=0.5)
    assert reply.startswith(b"%7\r\n$6\r\nserver\r\n")
    assert reply.endswith(b"$7\r\nshopper\r\n+OK\r\n+RESET\r\n-NOAUTH Authentication required.\r\n"
                          b"-NOAUTH Authentication required.\r\n+OK\r\n$1\r\nv\r\n$-1\r\n")


def test_transaction_and_pipeline(shop, admin):
    client = as_app(shop[1].port, "checkout")
    pipe = client.pipeline(transaction=True)
    pipe.set("shop:order:tx", "1", ex=30).incr("shop:order:tx").get("shop:product:1")
    with pytest.raises(redis.exceptions.NoPermissionError, match="Command # 3 .*rule K7"):
        pipe.execute()  # EXECABORT: nothing of the transaction ran
    assert admin.exists("shop:order:tx") == 0
    pipe = client.pipeline(transaction=False)
    pipe.set("shop:order:p", "1", ex=30).get("shop:product:1").get("shop:order:p")
    results = pipe.execute(raise_on_error=False)
    assert results[0] is True and isinstance(results[1], redis.exceptions.NoPermissionError) and results[2] == b"1"


def test_metrics_and_decision_log_carry_the_application(shop):
    _, process, metrics_port = shop
    with pytest.raises(redis.exceptions.NoPermissionError):
        as_app(shop[1].port, "catalog").get("shop:order:secret")
    wait_for(lambda: "shop:order:secret" in process.log, 5, "the decision log line")
    line = next(line for line in process.lines if "shop:order:secret" in line)
    assert '"app": "catalog"' in line and '"rule": "K7"' in line
    body = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5).read().decode()
    assert ('redis_guard_policy_findings_total{app="catalog",mode="enforce",outcome="rejected",'
            'policy="shop",rule="K7"}') in body


def test_reload_keeps_applications_by_name_and_locks_out_removed_ones(tmp_path, hashes):
    server = RedisServer()
    policy = tmp_path / "policy.yaml"
    policy.write_text(policy_text(True, hashes))
    config = tmp_path / "config.yaml"
    config.write_text("policy: policy.yaml\n")
    process = ProxyProcess(server.url, str(config))
    try:
        checkout = as_app(process.port, "checkout")
        assert checkout.set("shop:order:r", "v", ex=30)
        catalog = socket.create_connection(("127.0.0.1", process.port), timeout=5)
        catalog.sendall(b"AUTH catalog catalog-pw\r\nSET shop:product:r v EX 30\r\n")
        assert read_until_quiet(catalog, 5, 0.5) == (b"+OK\r\n+OK\r\n", False)
        policy.write_text(policy_text(False, hashes).replace("max_ttl: 60", "max_ttl: 10"))
        process.process.send_signal(signal.SIGHUP)
        wait_for(lambda: "policy reloaded (SIGHUP)" in process.log, 5, "the reload")
        # Same connections: checkout has the new policy's override, catalog no longer exists.
        with pytest.raises(redis.exceptions.NoPermissionError, match=r"rule T3 .*10 s"):
            checkout.set("shop:order:r", "v", ex=30)
        catalog.sendall(b"GET shop:product:r\r\n")  # its open connection: NOAUTH from now on
        assert read_until_quiet(catalog, 5, 0.5) == (b"-NOAUTH Authentication required.\r\n", False)
        catalog.close()
        with pytest.raises(redis.exceptions.AuthenticationError, match="invalid username-password"):
            as_app(process.port, "catalog").ping()
    finally:
        process.stop()
        server.close()


def test_auth_optional_lets_anonymous_clients_in_under_k7(tmp_path, hashes):
    server = RedisServer()
    policy = tmp_path / "policy.yaml"
    policy.write_text(policy_text(False, hashes).replace("auth: required", "auth: optional")
                      .replace("K7: {}", "K7: {mode: audit, anonymous: reject}"))
    process = ProxyProcess(server.url, "configs/passthrough.yaml", "--policy", str(policy))
    try:
        anonymous = redis.Redis(port=process.port)
        assert anonymous.set("legacy:key", "v", ex=30) is True  # K7 in audit: logged, not refused
        wait_for(lambda: "legacy:key" in process.log, 5, "the audit line")
        line = next(line for line in process.lines if "legacy:key" in line)
        assert '"rule": "K7"' in line and '"outcome": "audited"' in line and '"app": null' in line
        assert as_app(process.port, "checkout").get("legacy:key") == b"v"  # audit for apps too
    finally:
        process.stop()
        server.close()


def test_many_connections_authenticating_at_once(shop):
    """A client pool's connections arrive together: right and wrong passwords mixed, each gets its
    own answer, in order with its other commands."""
    payloads = {True: b"AUTH checkout checkout-pw\r\nGET shop:order:none\r\n",
                False: b"AUTH checkout wrong\r\nGET shop:order:none\r\n"}
    expected = {True: b"+OK\r\n$-1\r\n",
                False: b"-WRONGPASS invalid username-password pair or user is disabled.\r\n"
                       b"-NOAUTH Authentication required.\r\n"}
    sockets = []
    for index in range(24):
        sock = socket.create_connection(("127.0.0.1", shop[1].port), timeout=10)
        sockets.append((index % 3 != 0, sock))
    for good, sock in sockets:
        sock.sendall(payloads[good])
    for good, sock in sockets:
        assert read_until_quiet(sock, 10, 1.0) == (expected[good], False)
        sock.close()


# -- what an application reaches beside the keys it names (issue 14) ---------------------------

@pytest.mark.parametrize("protocol", [2, 3])
def test_scan_lists_only_the_applications_keys(shop, admin, protocol):
    admin.flushdb()
    mine = {f"shop:order:{i}".encode() for i in range(40)} | {b"shop:cart:1"}
    others = {f"other:{i}".encode() for i in range(40)} | {b"shop:product:1", b"shop:orders:x"}
    for key in mine | others:
        admin.set(key, "v")
    checkout = as_app(shop[1].port, "checkout", protocol)
    found = set(checkout.scan_iter(match="shop:order:*", count=7)) | set(checkout.scan_iter(match="shop:cart:*"))
    assert found == mine
    for call in (lambda: list(checkout.scan_iter()), lambda: checkout.scan(0, match="shop:*"),
                 lambda: checkout.scan(0, match="*")):
        with pytest.raises(redis.exceptions.NoPermissionError,
                           match="rule K7 .*(one SCAN per prefix|the pattern must start with an owned prefix)"):
            call()
    # One prefix: the proxy adds MATCH <prefix>*, and the reply keeps SCAN's shape (cursor, keys).
    reports = as_app(shop[1].port, "rep", protocol)
    _, keys = reports.scan(0, count=1000)
    assert isinstance(keys, list) and set(keys) <= mine | {b"shop:product:1", b"shop:orders:x"}
    assert set(reports.scan_iter(count=5)) == mine | {b"shop:product:1", b"shop:orders:x"}
    raw, _ = exchange(shop[1].port, b"AUTH rep reports-pw\r\nSCAN 0 COUNT 1000\r\n")
    assert raw.startswith(b"+OK\r\n*2\r\n$1\r\n0\r\n*") and b"other:" not in raw, raw
    admin.flushdb()


@pytest.mark.parametrize("command", [["RANDOMKEY"], ["SWAPDB", "0", "1"], ["MOVE", "shop:order:1", "1"],
                                     ["SELECT", "1"]])
def test_commands_that_reach_other_keys_are_refused(shop, admin, command):
    admin.flushdb()
    admin.set("shop:order:1", "mine")
    admin.set("other:1", "theirs")
    client = as_app(shop[1].port, "checkout")
    with pytest.raises(redis.exceptions.NoPermissionError, match=r"breaks rule (K7|C2)"):
        client.execute_command(*command)
    assert admin.get("shop:order:1") == b"mine" and admin.get("other:1") == b"theirs"
    assert admin.dbsize() == 2
    admin.flushdb()


def test_sort_patterns_stay_under_the_prefixes(shop, admin):
    admin.flushdb()
    admin.rpush("shop:order:ids", "1", "2")
    admin.set("shop:order:w:1", "2")
    admin.set("shop:order:w:2", "1")
    admin.set("shop:product:secret:1", "s1")
    client = as_app(shop[1].port, "checkout")
    # Past K7, Redis's ACL (the application's upstream user, limited to its prefixes) refuses
    # SORT BY/GET patterns whatever they name.
    with pytest.raises(redis.exceptions.ResponseError, match="BY option of SORT denied due to insufficient ACL"):
        client.sort("shop:order:ids", by="shop:order:w:*")
    assert client.sort("shop:order:ids") == [b"1", b"2"]
    with pytest.raises(redis.exceptions.NoPermissionError, match="pattern 'shop:product:secret:\\*' breaks rule K7"):
        client.sort("shop:order:ids", get="shop:product:secret:*")
    admin.flushdb()


def test_wrong_passwords_slow_down_per_address(tmp_path, hashes):
    """Guesses sent together over many connections from one address as one user: each failure
    answered twice as late as the one before (0.05, 0.1, 0.2 ... s: counted per address and user,
    issue 49); counted and logged (issue 14)."""
    server = RedisServer()
    policy = tmp_path / "policy.yaml"
    policy.write_text(policy_text(False, hashes))
    metrics_port = free_port()
    process = ProxyProcess(server.url, "configs/passthrough.yaml", "--policy", str(policy),
                           "--metrics", f"127.0.0.1:{metrics_port}")
    try:
        sockets = [socket.create_connection(("127.0.0.1", process.port), timeout=15) for _ in range(6)]
        started = time.monotonic()
        for index, sock in enumerate(sockets):
            sock.sendall(b"AUTH rep guess-%d\r\n" % index)
        for sock in sockets:
            reply = b""
            while not reply.endswith(b"\r\n"):
                reply += sock.recv(1024)
            assert reply == b"-WRONGPASS invalid username-password pair or user is disabled.\r\n"
            sock.close()
        assert time.monotonic() - started >= 0.05 + 0.1 + 0.2 + 0.4 + 0.8  # the sixth guess's turn
        page = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5).read().decode()
        assert "redis_guard_auth_failures_total 6.0" in page
        wait_for(lambda: "failed AUTH attempt" in process.log, 5, "the log line")
        assert as_app(process.port, "rep").get("shop:x") is None  # the right password still works
    finally:
        process.stop()
        server.close()

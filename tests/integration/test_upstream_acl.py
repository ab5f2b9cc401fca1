"""The second wall (policy/acl.py, upstream_acl.py) on a real redis-server: the proxy creates the
policy's ACL users at start and on reload, and a client connected AS one of them (as the proxy's
upstream connections for an application's clients are: the last test checks it through the proxy) cannot leave
its application's keys or run a denied command, in scripts and functions too; the proxy's own scripts still run."""

from __future__ import annotations

import asyncio

import pytest
import redis

from proxy import errors
from proxy.config import Address, Upstream
from proxy.policy.acl import compile_users
from proxy.policy.decision import SessionState
from proxy.policy.engine import Engine
from proxy.policy.loader import load_policy
from proxy.policy.passwords import hash_password
from proxy.upstream_acl import apply
from tests.servers import ProxyProcess, RedisServer, exchange, policy_proxy, server_command_table, wait_for

UPSTREAM_PASSWORD = "up-secret"
HASH = hash_password(b"pw", log_n=4)
POLICY = f"""
name: shop
auth: required
applications:
  checkout:
    password_hash: "{HASH}"
    prefixes: ["shop:order:", "shop:cart:"]
  reports:
    password_hash: "{HASH}"
    prefixes: ["shop:"]
    read_only: true
{{catalog}}rules:
  K7: {{{{}}}}
  C2: {{{{}}}}
  C6: {{{{scripts: declared}}}}
  C3: {{{{commands: {{{{HGETALL: {{{{action: limit, max: 100}}}}}}}}}}}}
  T1: {{{{action: inject, default_ttl: 600}}}}
  V1: {{{{max_bytes: 100}}}}
  V2: {{{{max_elements: 3, per_type: {{{{}}}}}}}}
"""
CATALOG = f"""  catalog:
    password_hash: "{HASH}"
    prefixes: ["shop:product:"]
"""
FUNCTIONS = """#!lua name=ops
redis.register_function('read', function(keys, args) return redis.call('GET', keys[1]) end)
redis.register_function('read_any', function(keys, args) return redis.call('GET', args[1]) end)
redis.register_function('write', function(keys, args) return redis.call('SET', keys[1], args[1]) end)
"""


def policy_text(catalog: bool = True) -> str:
    return POLICY.format(catalog=CATALOG if catalog else "")


@pytest.fixture(scope="module")
def upstream(tmp_path_factory):
    server = RedisServer(None, "--requirepass", UPSTREAM_PASSWORD)
    folder = tmp_path_factory.mktemp("acl")
    policy = folder / "policy.yaml"
    process = policy_proxy(folder, policy_text(), f"redis://:{UPSTREAM_PASSWORD}@127.0.0.1:{server.port}")
    admin = redis.Redis(port=server.port, password=UPSTREAM_PASSWORD)
    admin.function_load(FUNCTIONS)
    engine = Engine(load_policy(str(policy)), server_command_table())
    users = compile_users(engine, UPSTREAM_PASSWORD)
    yield server, process, admin, engine, users, policy
    admin.close()
    process.stop()
    server.close()


def acl_users(admin) -> set[str]:
    return {name if isinstance(name, str) else name.decode() for name in admin.acl_users()}


def as_user(upstream, app):
    server, _, _, _, users, _ = upstream
    name, password = users.credentials_for(app)
    return redis.Redis(port=server.port, username=name, password=password)


def test_users_applied_at_start(upstream):
    _, process, admin, _, users, _ = upstream
    assert "upstream ACL users: 4 applied" in process.log
    assert {user.name for user in users.users} <= acl_users(admin)
    assert as_user(upstream, "checkout").ping() is True


def test_applying_again_changes_nothing(upstream):
    server, _, admin, _, users, _ = upstream
    before = admin.acl_list()
    admin.execute_command("ACL", "SETUSER", users.users[1].name, "~extra:*", "+flushall")  # drift
    node = Upstream(Address("127.0.0.1", server.port), None, UPSTREAM_PASSWORD)
    for _ in range(2):
        status = asyncio.run(apply(users, [node]))
        assert status.ok and status.line() == "upstream ACL users: 4 applied"
    assert admin.acl_list() == before  # `reset` first: what the policy says, nothing left over


@pytest.mark.parametrize("script", [
    "return redis.call('GET', 'shop:product:1')",  # another application's key, undeclared
    "return redis.call('SET', 'shop:product:1', 'stolen')",
    "return redis.call('FLUSHALL')",  # the baseline guard
    "return redis.call('SWAPDB', 0, 1)",
    "return redis.call('CONFIG', 'SET', 'maxmemory', '1')",
    "return redis.call('MOVE', 'shop:order:1', 1)",
    "return redis.call('RANDOMKEY')",
])
@pytest.mark.parametrize("command", ["EVAL", "EVAL_RO"])
def test_scripts_stay_inside_the_application(upstream, script, command):
    _, _, admin, _, _, _ = upstream
    admin.set("shop:product:1", "secret")
    admin.set("shop:order:1", "mine")
    client = as_user(upstream, "checkout")
    with pytest.raises(redis.exceptions.ResponseError):
        client.execute_command(command, script, 0)
    assert admin.get("shop:product:1") == b"secret" and admin.get("shop:order:1") == b"mine"
    assert admin.dbsize() >= 2 and admin.config_get("maxmemory")["maxmemory"] == "0"


def test_declared_keys_and_functions(upstream):
    _, _, admin, _, _, _ = upstream
    admin.set("shop:product:1", "secret")
    admin.set("shop:order:1", "mine")
    client = as_user(upstream, "checkout")
    assert client.eval("return redis.call('GET', KEYS[1])", 1, "shop:order:1") == b"mine"
    with pytest.raises(redis.exceptions.NoPermissionError):
        client.eval("return redis.call('GET', KEYS[1])", 1, "shop:product:1")
    assert client.fcall("read", 1, "shop:order:1") == b"mine"
    with pytest.raises(redis.exceptions.NoPermissionError):
        client.fcall("read", 1, "shop:product:1")
    with pytest.raises(redis.exceptions.ResponseError):
        client.fcall("read_any", 0, "shop:product:1")  # the function reaches for it itself
    for call in (lambda: client.function_load(FUNCTIONS.replace("ops", "mine"), replace=True),
                 lambda: client.function_flush(), lambda: client.function_delete("ops"),
                 lambda: client.execute_command("SCRIPT", "DEBUG", "YES")):
        with pytest.raises(redis.exceptions.NoPermissionError):
            call()
    assert admin.fcall("read", 1, "shop:order:1") == b"mine"  # the operator's functions are still there


def test_sort_by_and_get_are_refused_to_an_application(upstream):
    _, _, admin, _, _, _ = upstream
    admin.delete("shop:order:ids")
    admin.rpush("shop:order:ids", "1", "2")
    admin.set("shop:product:w:1", "1")
    client = as_user(upstream, "checkout")
    assert client.sort("shop:order:ids") == [b"1", b"2"]
    for kwargs in ({"by": "shop:product:w:*"}, {"get": "shop:product:w:*"}, {"by": "shop:order:w:*"}):
        with pytest.raises(redis.exceptions.ResponseError, match="option of SORT denied due to insufficient ACL"):
            client.sort("shop:order:ids", **kwargs)


def test_read_only_application_scripts_cannot_write(upstream):
    _, _, admin, _, _, _ = upstream
    admin.set("shop:order:1", "mine")
    client = as_user(upstream, "reports")
    assert client.eval_ro("return redis.call('GET', KEYS[1])", 1, "shop:order:1") == b"mine"
    assert client.get("shop:order:1") == b"mine"
    for call in (lambda: client.eval("return redis.call('SET', KEYS[1], 'x')", 1, "shop:order:1"),
                 lambda: client.eval("return redis.call('DEL', 'shop:order:1')", 0),
                 lambda: client.fcall("write", 1, "shop:order:1", "x"),
                 lambda: client.set("shop:order:1", "x")):
        with pytest.raises(redis.exceptions.ResponseError):
            call()
    assert admin.get("shop:order:1") == b"mine"


SENT_BY_THE_PROXY = [
    # (application, the client's command): the proxy sends what the verdict says, as the user
    ("checkout", "HSET shop:cart:1 a 1"),  # V2's capping script, T1's hidden EXPIRE
    ("checkout", "APPEND shop:cart:s abc"),  # V1's script
    ("checkout", "HGETALL shop:cart:1"),  # C3's measuring script
    ("checkout", "SET shop:order:9 v"),  # T1 inject: SET ... EX
    ("checkout", "SADD shop:order:set a b c"),
    ("reports", "HGETALL shop:cart:1"),  # read-only, and C3's script is an EVAL_RO
    ("checkout", "SUNIONSTORE shop:cart:u shop:cart:a shop:cart:b"),  # _write_check: counted by SUNION
    ("checkout", "COPY shop:cart:1 shop:cart:c"),  # measured first
    ("checkout", "PFADD shop:cart:h x y"),  # run, measured, undone when too big
    ("checkout", "XADD shop:cart:s * f v"),
]


@pytest.mark.parametrize("app, command", SENT_BY_THE_PROXY)
def test_the_proxys_own_scripts_run_as_the_applications_user(upstream, app, command):
    _, _, admin, engine, _, _ = upstream
    admin.delete("shop:cart:1", "shop:cart:s", "shop:order:9", "shop:order:set", "shop:cart:c", "shop:cart:u",
                 "shop:cart:h", "shop:cart:a", "shop:cart:b")
    admin.hset("shop:cart:1", "x", "1")
    admin.sadd("shop:cart:a", "1")
    admin.sadd("shop:cart:b", "2")
    app_engine = engine.tenants.engine(app)
    args = [word.encode() for word in command.split()]
    verdict = app_engine.decide(app_engine.plan_for(args), args, (), SessionState())
    assert verdict is not None and verdict.reject is None and verdict.commands, command
    client = as_user(upstream, app)
    for sent in verdict.commands:
        client.execute_command(*sent)  # raises on an ACL refusal
    if app == "checkout" and command.startswith(("HSET", "SADD", "SET")):
        assert admin.ttl(command.split()[1]) > 0


def test_a_cap_refusal_by_the_proxys_script_still_comes_back(upstream):
    _, _, admin, engine, _, _ = upstream
    admin.delete("shop:order:set")
    admin.sadd("shop:order:set", "a", "b", "c")
    app_engine = engine.tenants.engine("checkout")
    args = [b"SADD", b"shop:order:set", b"d"]
    script = app_engine.decide(app_engine.plan_for(args), args, (), SessionState()).commands[0]
    with pytest.raises(redis.exceptions.NoPermissionError, match="rule V2"):
        as_user(upstream, "checkout").execute_command(*script)
    assert admin.scard("shop:order:set") == 3


def test_reload_removes_the_user_of_a_removed_application(upstream):
    _, _, admin, _, _, policy = upstream
    policy.write_text(policy_text(catalog=False))
    try:
        wait_for(lambda: "redis-guard:shop:catalog" not in acl_users(admin), 15, "the catalog user to be removed")
        assert "redis-guard:shop:checkout" in acl_users(admin)
    finally:
        policy.write_text(policy_text())
        wait_for(lambda: "redis-guard:shop:catalog" in acl_users(admin), 15, "the catalog user to be back")


def test_without_acl_setuser_the_proxy_warns_and_serves(upstream, tmp_path):
    server, _, admin, engine, users, policy = upstream
    admin.execute_command("ACL", "SETUSER", "limited", "reset", "on", ">limited-pw", "~*", "&*", "+@all", "-@admin")
    url = f"redis://limited:limited-pw@127.0.0.1:{server.port}"
    node = Upstream(Address("127.0.0.1", server.port), None, UPSTREAM_PASSWORD)
    process = ProxyProcess(url, str(policy.parent / "config.yaml"))
    try:  # the users upstream have passwords derived from another upstream password: no login
        assert "upstream ACL users: not applied (127.0.0.1" in process.log and "not permitted" in process.log
        assert "found upstream" not in process.log
        client = redis.Redis(port=process.port, username="checkout", password="pw")
        assert client.set("shop:order:2", "v", ex=60) is True
        client.close()
    finally:
        process.stop()
    # An operator made them for this proxy (redis-guard policy acl --upstream its URL): they are used.
    assert asyncio.run(apply(compile_users(engine, "limited-pw"), [node])).ok
    process = ProxyProcess(url, str(policy.parent / "config.yaml"))
    try:
        assert "not permitted); the 4 users found upstream are used" in process.log
    finally:
        process.stop()
        admin.execute_command("ACL", "DELUSER", "limited")
        assert asyncio.run(apply(users, [node])).ok


def test_upstream_acl_off(upstream):
    """Off: nothing is created, and the users made upstream by operators are used when they log in."""
    server, _, admin, _, users, policy = upstream
    url = f"redis://:{UPSTREAM_PASSWORD}@127.0.0.1:{server.port}"
    process = ProxyProcess(url, str(policy.parent / "config.yaml"), "--upstream-acl", "off")
    try:
        assert "upstream ACL users: off (upstream_acl: off); the 4 users found upstream are used" in process.log
    finally:
        process.stop()
    admin.execute_command("ACL", "DELUSER", users.users[1].name)
    process = ProxyProcess(url, str(policy.parent / "config.yaml"), "--upstream-acl", "off")
    try:
        assert "upstream ACL users: off (upstream_acl: off)" in process.log
        assert "found upstream" not in process.log  # one missing: none used
    finally:
        process.stop()
        node = Upstream(Address("127.0.0.1", server.port), None, UPSTREAM_PASSWORD)
        assert asyncio.run(apply(users, [node])).ok


def test_passthrough_creates_no_user(redis_server):
    admin = redis.Redis(port=redis_server.port)
    before = acl_users(admin)  # the session's server: other tests' proxies made theirs
    process = ProxyProcess(redis_server.url)  # configs/passthrough.yaml: policy: none
    try:
        assert "upstream ACL users: none" in process.log
        assert acl_users(admin) == before
    finally:
        process.stop()
        admin.close()


@pytest.mark.parametrize("where", ["shared", "transaction"])
def test_through_the_proxy_an_applications_connections_run_as_its_user(upstream, where):
    """The wiring: a client that authenticated as `checkout` reaches Redis as checkout's ACL user
    (on the shared connections and on a connection lent for a transaction), so a script cannot
    read another application's key even though the proxy lets the EVAL through (C6 declared)."""
    _, process, admin, _, users, _ = upstream
    admin.set("shop:product:1", "secret")
    client = redis.Redis(port=process.port, username="checkout", password="pw")
    script = "return redis.call('GET', 'shop:product:1')"
    if where == "shared":
        with pytest.raises(redis.exceptions.ResponseError, match="can.t access at least one of the keys|No permissions to access a key"):
            client.eval(script, 0)
    else:
        pipe = client.pipeline(transaction=True)
        pipe.set("shop:order:1", "v", ex=60).eval(script, 0)
        replies = pipe.execute(raise_on_error=False)
        assert replies[0] is True and isinstance(replies[1], redis.exceptions.ResponseError)
    assert client.set("shop:order:2", "v", ex=60) is True
    name = users.credentials_for("checkout")[0]
    assert name in {entry["user"] for entry in admin.client_list()}
    client.close()


def test_a_client_that_changes_application_keeps_its_order(upstream):
    """AUTH as another application moves the client's later commands to that user's connections
    only once the commands before it are answered: a read after it sees a write before it."""
    import socket

    _, process, admin, _, _, _ = upstream
    sock = socket.create_connection(("127.0.0.1", process.port), timeout=5)
    try:
        sock.sendall(b"AUTH checkout pw\r\nSET shop:order:7 before EX 60\r\nAUTH reports pw\r\nGET shop:order:7\r\n"
                     b"SET shop:order:7 after EX 60\r\n")
        expected = b"+OK\r\n+OK\r\n+OK\r\n$6\r\nbefore\r\n-NOPERM"
        data = b""
        while not data.startswith(expected) or not data.endswith(b"\r\n"):
            chunk = sock.recv(4096)
            assert chunk, data
            data += chunk
        assert admin.get("shop:order:7") == b"before"  # reports is read-only: the proxy refused
    finally:
        sock.close()


@pytest.mark.parametrize("login", [b"AUTH reports pw", b"HELLO 2 AUTH reports pw"])
def test_a_streaming_client_cannot_change_application(upstream, login):
    """On a stream the connection is the client's own, logged in as its application's user; a
    login as another application there would put AUTH's reply among the stream's. It is refused
    with a clear error, and the client goes on as before (it used to wait for good)."""
    _, process, _, _, _, _ = upstream
    reply, closed = exchange(process.port, b"AUTH checkout pw\r\nCLIENT REPLY SKIP\r\nPING\r\n" + login + b"\r\nPING\r\n",
                             settle=0.5)  # (SKIP streams; PING takes the skip)
    assert (reply, closed) == (b"+OK\r\n" + errors.RELOGIN_ON_STREAM + b"+PONG\r\n", False)

"""The proxy alone decides who its upstream connections are (issue 49): without applications a
client's AUTH / HELLO AUTH is checked by the proxy against its upstream URL's credentials and
never reaches Redis, so `AUTH default anything` in front of a Redis whose `default` user has no
password does not make the client `default`; each effect checked on the server directly. And the
AUTH brake: the failing connection waits and is closed after ten failures, never a neighbour."""

import os
import socket
import time

import pytest

redis = pytest.importorskip("redis")

from tests.servers import (  # noqa: E402
    PASSTHROUGH,
    REPO,
    ProxyProcess,
    RedisServer,
    exchange,
    read_until_quiet,
    wait_for,
)

POLICY = os.path.join(REPO, "configs", "policies", "lowercase-colon.yaml")
POLICY_USER = b"redis-guard:lowercase-colon"
FLUSH = b'EVAL "return redis.call(\'FLUSHALL\')" 0\r\n'
WHOAMI = b"ACL WHOAMI\r\n"
SECRET = "s3cret"


@pytest.fixture(scope="module")
def guarded():
    """A Redis whose `default` user has no password (the quick start), behind the proxy with a
    policy: its connections run as the policy's ACL user."""
    server = RedisServer()
    process = ProxyProcess(server.url, PASSTHROUGH, "--policy", POLICY)
    yield server, process
    process.stop()
    server.close()


@pytest.fixture(scope="module")
def locked():
    """A Redis with a password, the proxy given it in its URL (no policy)."""
    server = RedisServer(None, "--requirepass", SECRET)
    process = ProxyProcess(f"redis://:{SECRET}@127.0.0.1:{server.port}")
    yield server, process
    process.stop()
    server.close()


def seeded(server, password=None):
    admin = redis.Redis(port=server.port, password=password)
    admin.flushall()
    admin.set("guard:key", "v")
    return admin


@pytest.mark.parametrize("login", [
    b"AUTH default anything\r\n",
    b"HELLO 2 AUTH default x\r\n",
    b"HELLO 3 AUTH default x\r\n",
    b"CLIENT SETNAME pinned\r\nAUTH default x\r\n",  # on a connection of the client's own
    b"CLIENT SETNAME pinned\r\nHELLO 3 AUTH default x SETNAME other\r\n",
    b"BLPOP guard:none 0.01\r\nAUTH default x\r\n",  # right after a lent connection
    b"HELLO 3\r\nSUBSCRIBE guard:ch\r\nAUTH default x\r\n",  # on a RESP3 subscriber's stream
    b"HELLO 3\r\nSUBSCRIBE guard:ch\r\nHELLO 3 AUTH default x\r\n",
    b"MULTI\r\nAUTH default x\r\nEXEC\r\n",  # queued, would run at EXEC
], ids=["auth", "hello2", "hello3", "pinned", "pinned-hello", "lent", "stream", "stream-hello", "multi"])
def test_auth_as_default_does_not_make_the_client_default(guarded, login):
    server, process = guarded
    admin = seeded(server)
    reply, closed = exchange(process.port, login + WHOAMI + FLUSH + WHOAMI, timeout=5, settle=0.5)
    assert not closed
    assert b"$7\r\ndefault\r\n" not in reply, reply
    assert reply.count(b"$%d\r\n%s\r\n" % (len(POLICY_USER), POLICY_USER)) == 2, reply
    assert b"can't run this command" in reply or b"rule C" in reply, reply  # FLUSHALL refused inside
    assert admin.get("guard:key") == b"v" and admin.dbsize() == 1  # nothing flushed
    assert b"WRONGPASS" not in reply  # Redis's answer: the default user takes any password


def test_an_upstream_user_the_proxy_does_not_manage_is_refused(guarded):
    server, process = guarded
    admin = seeded(server)
    admin.execute_command("ACL", "SETUSER", "alice", "on", ">pw", "~*", "&*", "+@all")
    try:
        for login in (b"AUTH alice pw\r\n", b"HELLO 2 AUTH alice pw\r\n"):
            reply, _ = exchange(process.port, login + WHOAMI + FLUSH, timeout=5, settle=0.5)
            assert reply.startswith(b"-WRONGPASS invalid username-password pair or user is disabled.\r\n"), reply
            assert b"alice" not in reply and POLICY_USER in reply
        assert admin.get("guard:key") == b"v"
        # Redis itself never saw alice log in.
        assert b"alice" not in b"".join(str(entry).encode() for entry in admin.acl_log())
    finally:
        admin.execute_command("ACL", "DELUSER", "alice")


@pytest.mark.parametrize("command", [
    b"AUTH secret\r\n",  # the one-argument form, and the default user has no password
    b"AUTH default secret\r\n",  # any password passes
    b"AUTH someone secret\r\n",
    b"AUTH\r\n",
    b"AUTH a b c\r\n",
    b"HELLO 3 AUTH someone secret\r\n",
    b"HELLO 4 AUTH default secret\r\n",
    b"HELLO 3 AUTH default\r\n",
])
def test_replies_are_redis_own_without_a_password(guarded, command):
    server, process = guarded
    direct, _ = exchange(server.port, command + b"PING\r\n")
    through, closed = exchange(process.port, command + b"PING\r\n")
    assert through == direct and not closed


@pytest.mark.parametrize("command", [
    b"AUTH s3cret\r\n", b"AUTH default s3cret\r\n", b"AUTH wrong\r\n", b"AUTH default wrong\r\n",
    b"AUTH someone s3cret\r\n", b"HELLO 3 AUTH default wrong\r\n",
])
def test_replies_are_redis_own_with_a_password(locked, command):
    """(Only the login's reply: through the proxy a client needs no AUTH, so what follows differs.)"""
    server, process = locked
    direct, _ = exchange(server.port, command)
    through, closed = exchange(process.port, command)
    assert through == direct and not closed


def test_with_a_password_the_proxys_credentials_log_in_and_others_do_not(locked):
    server, process = locked
    seeded(server, SECRET)
    assert redis.Redis(port=process.port).get("guard:key") == b"v"  # no AUTH needed: the proxy's own
    assert redis.Redis(port=process.port, password=SECRET, protocol=3).get("guard:key") == b"v"
    with pytest.raises(redis.exceptions.AuthenticationError):
        redis.Redis(port=process.port, password="wrong").ping()


def test_others_failures_do_not_delay_a_correct_login(locked):
    """Ten wrong attempts in flight from 127.0.0.1 on other connections; a fresh connection's
    correct login from the same address is answered at once."""
    _, process = locked
    guessers = [socket.create_connection(("127.0.0.1", process.port), timeout=10) for _ in range(10)]
    try:
        for index, sock in enumerate(guessers):
            sock.sendall(b"AUTH default wrong-%d\r\n" % index)
        time.sleep(0.1)  # the failures counted, their replies held
        sock = socket.create_connection(("127.0.0.1", process.port), timeout=10)
        started = time.monotonic()
        sock.sendall(b"AUTH default s3cret\r\nPING\r\n")
        reply = b""
        while not reply.endswith(b"+PONG\r\n"):
            chunk = sock.recv(1024)
            assert chunk, reply
            reply += chunk
        took = time.monotonic() - started
        sock.close()
        assert reply == b"+OK\r\n+PONG\r\n" and took < 0.5, took
        # The guessers' replies came late (0.05 s for the first, doubling: up to 2 s).
        replies = [read_until_quiet(guesser, 5, 3)[0] for guesser in guessers]
        assert all(r == b"-WRONGPASS invalid username-password pair or user is disabled.\r\n" for r in replies)
    finally:
        for guesser in guessers:
            guesser.close()


def test_a_connection_pipelining_guesses_is_slowed_then_closed(locked):
    """100 pipelined wrong passwords then the right one: each failure is answered late (0.05,
    0.1 ... 2 s), the tenth closes the connection; the right one is never tried."""
    _, process = locked
    sock = socket.create_connection(("127.0.0.1", process.port), timeout=30)
    try:
        started = time.monotonic()
        sock.sendall(b"".join(b"AUTH mallory guess-%d\r\n" % i for i in range(100)) + b"AUTH s3cret\r\nPING\r\n")
        early, _ = read_until_quiet(sock, 3, 3)  # what came in the first three seconds
        assert early.count(b"-WRONGPASS") < 7 and b"+OK" not in early
        rest, closed = read_until_quiet(sock, 20, 20)
        took = time.monotonic() - started
    finally:
        sock.close()
    reply = early + rest
    assert closed and reply.count(b"-WRONGPASS") == 10 and b"+OK" not in reply and b"PONG" not in reply, reply
    assert took >= 8, took  # 0.05 + 0.1 + ... + 1.6 + 2 * 4
    wait_for(lambda: "failed AUTH attempts on one connection: closing it" in process.log, 5, "the log line")
    # Another connection from the same address logs in at once.
    started = time.monotonic()
    assert redis.Redis(port=process.port, password=SECRET).ping() is True
    assert time.monotonic() - started < 0.5


def test_the_start_up_line_warns_of_a_default_user_without_password(guarded, locked):
    assert "the upstream's `default` user has no password" in guarded[1].log
    assert "the upstream's `default` user has no password" not in locked[1].log


def test_upstream_acl_off_says_what_it_leaves_open(tmp_path):
    server = RedisServer()
    (tmp_path / "config.yaml").write_text(f"policy: {POLICY}\nupstream_acl: off\n")
    process = ProxyProcess(server.url, str(tmp_path / "config.yaml"))
    try:
        assert "upstream ACL users: off (upstream_acl: off): scripts (EVAL, FCALL) run as the proxy's own" \
            in process.log
        # Still: a client's AUTH never makes its connection another upstream user.
        admin = seeded(server)
        admin.execute_command("ACL", "SETUSER", "alice", "on", ">pw", "~*", "&*", "+@all")
        reply, _ = exchange(process.port, b"AUTH alice pw\r\n" + WHOAMI)
        assert reply == b"-WRONGPASS invalid username-password pair or user is disabled.\r\n$7\r\ndefault\r\n"
    finally:
        process.stop()
        server.close()

"""Proxy bugs found by the randomized isolation test, by the random damaged requests
(test_protocol_random.py) and by Redis's own test suite run through the proxy
(tests/conformance/redis_suite.py): each case replayed by hand against the same redis-server
directly and through the passthrough proxy. All are fixed; they stay as regression tests.
"""

import os
import socket
import time

import hiredis
import pytest

from proxy import errors
from tests.servers import PASSTHROUGH, REPO, ProxyProcess, RedisServer, exchange, exchange_batches, read_until_quiet

BUSY_SCRIPT = hiredis.pack_command(("EVAL", "while true do end", "0"))


def connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=5)


def say(sock: socket.socket, payload: bytes, settle: float = 0.3) -> tuple[bytes, bool]:
    """Send, then (reply bytes, closed) once the peer is quiet for `settle` seconds."""
    try:
        sock.sendall(payload)
    except OSError:
        return b"", True
    return read_until_quiet(sock, 3, settle)


def both(server, proxy, scenario):
    """`scenario(port)` once directly and once through the proxy, each on a fresh FLUSHALL;
    a list of bytes is a scenario too: those batches on one connection (`exchange_batches`)."""
    if isinstance(scenario, list):
        batches = scenario

        def scenario(port):
            return exchange_batches(port, batches)

    results = []
    for port in (server.port, proxy.port):
        admin = connect(server.port)
        say(admin, b"FLUSHALL\r\nSCRIPT FLUSH\r\n")
        admin.close()
        results.append(scenario(port))
    return results


class BusyScript:
    """A script that does not end, run on a direct connection, until `kill()`."""

    def __init__(self, server):
        self.admin = connect(server.port)
        assert say(self.admin, b"CONFIG SET lua-time-limit 10\r\n")[0] == b"+OK\r\n"
        self.runner = connect(server.port)
        self.runner.sendall(BUSY_SCRIPT)
        time.sleep(0.2)
        probe = connect(server.port)
        assert say(probe, b"PING\r\n")[0].startswith(b"-BUSY")
        probe.close()

    def kill(self) -> None:
        say(self.admin, b"SCRIPT KILL\r\n")
        read_until_quiet(self.runner, 2, 0.2)
        self.admin.close()
        self.runner.close()


def test_select_during_busy_script_waits_for_it(own_redis, own_proxy):
    """Redis refuses a SELECT during a script past lua-time-limit (-BUSY, the client stays in
    database 0). The proxy moves a client to another database by a connection there, and a new
    connection cannot start while the script runs: the SELECT waits for the script's end, then
    succeeds. A difference in timing, never in state: the reply and the database agree."""
    def scenario(port):
        client = connect(port)
        script = BusyScript(own_redis)
        refused = say(client, b"SELECT 9\r\n")
        script.kill()
        written = say(client, b"SET k v\r\n")
        client.close()
        where = exchange_batches(own_redis.port, [b"EXISTS k\r\nSELECT 9\r\nEXISTS k\r\n"])[0]
        return refused[0] + written[0], where

    direct, through = both(own_redis, own_proxy, scenario)
    assert direct[0].startswith(b"-BUSY") and direct[1][0] == b":1\r\n+OK\r\n:0\r\n"
    assert through == (b"+OK\r\n+OK\r\n", (b":0\r\n+OK\r\n:1\r\n", False))


def test_multi_during_busy_script(own_redis, own_proxy):
    """Redis accepts MULTI during a busy script. Through the proxy a MULTI that needs a new
    connection (its start-up is refused with BUSY) waits for the script's end: the same replies,
    later, and no client is dropped."""
    def scenario(port):
        clients = [connect(port) for _ in range(3)]
        for client in clients:
            say(client, b"SELECT 9\r\nPING\r\n")
        script = BusyScript(own_redis)
        opened = [say(client, b"MULTI\r\n") for client in clients]
        script.kill()
        done = [say(client, b"EXEC\r\n") for client in clients]
        for client in clients:
            client.close()
        return [(first[0] + last[0], first[1] or last[1]) for first, last in zip(opened, done)]

    direct, through = both(own_redis, own_proxy, scenario)
    assert direct == [(b"+OK\r\n*0\r\n", False)] * 3
    assert through == direct


def test_client_kill_without_arguments(own_redis, own_proxy):
    direct, through = both(own_redis, own_proxy, [b"CLIENT KILL\r\n"])
    assert direct == [(b"-ERR wrong number of arguments for 'client|kill' command\r\n", False)]
    assert through == direct


def test_publish_after_punsubscribe_is_not_delivered(own_redis, own_proxy):
    """Redis's own 'PUBLISH/PSUBSCRIBE after PUNSUBSCRIBE without arguments' (unit/pubsub)."""

    def scenario(port):
        publisher = connect(port)
        say(publisher, b"SELECT 9\r\n")
        delivered = 0
        for _ in range(30):
            subscriber = connect(port)
            say(subscriber, b"SELECT 9\r\nPSUBSCRIBE chan1.* chan2.* chan3.*\r\n", settle=0.05)
            subscriber.sendall(b"PUNSUBSCRIBE\r\n")
            publisher.sendall(b"PUBLISH chan1.hi hello\r\n")
            delivered += publisher.recv(64) != b":0\r\n"
            subscriber.close()
        publisher.close()
        return delivered

    direct, through = both(own_redis, own_proxy, scenario)
    assert direct == 0
    assert through == direct


def test_paused_write_does_not_hold_other_clients_reads(own_redis, own_proxy):
    """Redis's own 'Test write commands are paused by RO' and three more of unit/pause hang so."""

    def scenario(port):
        admin = connect(port)
        reader, writer = connect(port), connect(port)
        assert say(admin, b"CLIENT PAUSE 3000 WRITE\r\n")[0] == b"+OK\r\n"
        writer.sendall(b"SET foo bar\r\n")
        time.sleep(0.1)
        started = time.monotonic()
        read = say(reader, b"GET foo\r\n", settle=0.2)
        waited = time.monotonic() - started
        say(admin, b"CLIENT UNPAUSE\r\n")
        written = read_until_quiet(writer, 3, 0.2)
        for sock in (admin, reader, writer):
            sock.close()
        return read, written, waited < 1.0

    direct, through = both(own_redis, own_proxy, scenario)
    assert direct == ((b"$-1\r\n", False), (b"+OK\r\n", False), True)
    assert through == direct


@pytest.mark.parametrize("hello", [b"HELLO 3 AUTH nosuchuser pw", b"HELLO 4 AUTH default pw"])
def test_failed_hello_auth_keeps_resp3(own_redis, own_proxy, hello):
    direct, through = both(own_redis, own_proxy, [b"HELLO 3\r\n", hello + b"\r\nGET nokey\r\n"])
    assert direct[1][0].endswith(b"\r\n_\r\n")  # RESP3's null: the client is still in RESP3
    assert through[1] == direct[1]  # (HELLO's reply holds the connection id)


def test_auth_inside_multi_is_refused_and_exec_aborts(own_redis, own_proxy):
    """The proxy answers AUTH itself, so it cannot be queued for EXEC: refused with the reason,
    and EXEC aborts as after any command refused at queue time (it used to answer +OK, then abort)."""
    direct, through = both(own_redis, own_proxy, [b"MULTI\r\nAUTH default pw\r\nSET k v\r\nEXEC\r\nGET k\r\n"])
    assert direct[0][0] == b"+OK\r\n+QUEUED\r\n+QUEUED\r\n*2\r\n+OK\r\n+OK\r\n$1\r\nv\r\n"
    assert through[0][0] == (b"+OK\r\n" + errors.AUTH_IN_TRANSACTION + b"+QUEUED\r\n"
                             b"-EXECABORT Transaction discarded because of previous errors.\r\n$-1\r\n")


def test_multi_reply_command_in_transaction(own_redis, own_proxy):
    direct, through = both(own_redis, own_proxy, [b"MULTI\r\nUNSUBSCRIBE a b\r\nEXEC\r\nPING one\r\nPING two\r\n"])
    assert direct[0][1] is False
    assert through == direct


def test_client_pause_queued_in_a_transaction_holds_writes_only(own_redis, own_proxy):
    """Redis's 'Test that client pause starts at the end of a transaction' (unit/pause): a CLIENT
    PAUSE WRITE queued in MULTI pauses at EXEC. The proxy learns of it from EXEC's reply, so a
    write sent after it waits on a connection of its own client and the readers go on."""
    pauser, writer = connect(own_proxy.port), connect(own_proxy.port)
    try:
        assert say(pauser, b"MULTI\r\nSET foo1 bar\r\nCLIENT PAUSE 60000 WRITE\r\nSET foo2 bar\r\nEXEC\r\n")[0] == (
            b"+OK\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n*3\r\n+OK\r\n+OK\r\n+OK\r\n")
        writer.sendall(b"SET foo3 bar\r\n")
        assert say(pauser, b"GET foo1\r\nGET foo2\r\nGET foo3\r\n")[0] == b"$3\r\nbar\r\n$3\r\nbar\r\n$-1\r\n"
        assert say(pauser, b"CLIENT UNPAUSE\r\n")[0] == b"+OK\r\n"
        assert read_until_quiet(writer, 3, 0.3)[0] == b"+OK\r\n"
    finally:
        say(connect(own_redis.port), b"CLIENT UNPAUSE\r\n")
        pauser.close()
        writer.close()


@pytest.mark.parametrize("login", [b"HELLO 3 AUTH alice pw", b"AUTH alice pw"])
def test_login_on_a_lent_connection_keeps_it_from_other_clients(own_redis, own_proxy, login):
    """A client's AUTH (or HELLO 3 AUTH) while a blocking command holds a connection lent to it
    goes to that connection, which then holds the client's user (and protocol): the client keeps
    it for good. It used to go back to the spares when the blocking command was answered, and the
    next client's blocking command ran on it as the first client's user and in its protocol
    (found by the random isolation test, seed 159309165: a RESP2 client's BLMOVE answered in RESP3)."""
    admin = connect(own_redis.port)
    assert say(admin, b"ACL SETUSER alice on >pw ~* &* +@all\r\n")[0] == b"+OK\r\n"
    admin.close()

    def scenario(port):
        first, second = connect(port), connect(port)
        logged = say(first, b"BLPOP {t}:none 0.05\r\n" + login + b"\r\n", settle=0.4)[0]
        after = say(second, b"BLPOP {t}:none 0.05\r\nACL WHOAMI\r\n", settle=0.4)[0]
        first.close()
        second.close()
        return logged.startswith(b"*-1\r\n"), after

    direct, through = both(own_redis, own_proxy, scenario)
    assert direct == (True, b"*-1\r\n$7\r\ndefault\r\n")
    assert through == direct


def test_a_request_after_a_bulk_ended_by_any_two_bytes_keeps_its_place(own_redis):
    """Redis skips the two bytes after a bulk whatever they are; hiredis stops there and the exact
    parser reads the rest (here inline requests). The reader counted the rest's ends from the
    rest's own start, so with a command refused after them the run before it was sent as half the
    GET, on the shared connection: Redis read the next bytes there as the GET's end and closed the
    connection, failing every client's requests in flight on it. Found by test_protocol_random.py
    in front of a cluster, where a stretch goes out by the same ends."""
    proxy = ProxyProcess(own_redis.url, PASSTHROUGH, "--policy",
                         os.path.join(REPO, "configs", "policies", "lowercase-colon.yaml"))
    try:
        request = b"*2\r\n$3\r\nGET\r\n$1\r\na\r\r-1\nKEYS x\n"
        direct, _ = exchange(own_redis.port, request)
        reply, closed = exchange(proxy.port, request)
        answered = direct[:direct.rindex(b"*0\r\n")]  # GET's and -1's replies, then KEYS's
        assert reply.startswith(answered) and not closed, reply
        assert reply[len(answered):].startswith(b"-NOPERM command KEYS breaks rule C2"), reply
        assert exchange(proxy.port, b"PING\r\n") == (b"+PONG\r\n", False)
        assert "closed by the server" not in proxy.log, proxy.log
    finally:
        proxy.stop()


APPLICATIONS = os.path.join(REPO, "configs", "policies", "applications.yaml")


@pytest.mark.parametrize("requests,expected", [
    # RESET logs the stream's connection out upstream: the proxy logs it back in, unseen.
    # (CLIENT REPLY SKIP streams; the PING after it takes the skip.)
    (b"AUTH checkout checkout-secret\r\nCLIENT REPLY SKIP\r\nPING\r\nRESET\r\nPING\r\nAUTH checkout checkout-secret\r\n"
     b"PING\r\nGET shop:order:1\r\n", b"+OK\r\n+RESET\r\n-NOAUTH Authentication required.\r\n+OK\r\n+PONG\r\n$-1\r\n"),
    # A login's HELLO that changes the protocol waited for replies a stream never finishes.
    (b"AUTH checkout checkout-secret\r\nCLIENT REPLY SKIP\r\nPING\r\nHELLO 3 AUTH checkout checkout-secret\r\nPING\r\n",
     None),
], ids=["reset", "hello switching protocol"])
def test_a_streaming_client_of_an_application_keeps_being_served(tmp_path, requests, expected):
    server = RedisServer(None, "--requirepass", "up-secret")
    (tmp_path / "config.yaml").write_text(f"policy: {APPLICATIONS}\nupstream_acl: off\n")
    proxy = ProxyProcess(f"redis://:up-secret@127.0.0.1:{server.port}", str(tmp_path / "config.yaml"))
    try:
        reply, closed = exchange(proxy.port, requests, settle=0.5)
        assert not closed
        if expected is not None:
            assert reply == expected
        else:
            # (HELLO's modules: none on 7.0, Redis 8's built-in vectorset on 8.x)
            assert reply.startswith(b"+OK\r\n%7\r\n") and b"$7\r\nmodules\r\n*" in reply, reply
            assert reply.endswith(b"\r\n+PONG\r\n") and reply.count(b"+PONG") == 1, reply
    finally:
        proxy.stop()
        server.close()

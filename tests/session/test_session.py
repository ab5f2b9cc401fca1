"""The session without a network: a client session over a standalone backend whose upstream
connections are fakes (no sockets), fed reply bytes by hand, so that the order of requests and
replies, every move between shared and own connections, waiting, flow control and failures can be
checked byte for byte (tests/cluster/test_scatter.py is the same rig in front of a cluster)."""

import asyncio

import hiredis
import pytest

from proxy.commands.table import CommandTable
from proxy.config import Address, Config, Limits, Upstream
from proxy.monitor import live
from proxy.policy.building import build_engine
from proxy.server import Proxy
from proxy.session.session import Session
from proxy.session.states import CLOSING, LEASED, OPEN, PINNED, SHARED, STREAMING, WAITING
from proxy.upstream.connection import UpstreamConnection
from tests.servers import parse_all
from tests.session.fakes import Transport, open_fakes

ADDRESS = Address("127.0.0.1", 7100)


class Rig:
    """A session, its client transport, and the fake connections the backend hands out."""

    def __init__(self, policy=None, **limits):
        self.loop = asyncio.new_event_loop()
        config = Config(upstream=Upstream(ADDRESS), limits=Limits(**limits))
        table = CommandTable.from_snapshot()
        table.from_server = True
        engine = build_engine(str(policy), table) if policy is not None else None
        self.proxy = Proxy(self.loop, config, table, engine=engine)
        self.backend = self.proxy.backend
        self.opened: list[UpstreamConnection] = []
        open_fakes(self.backend, self.loop, ADDRESS, self.opened)
        self.session = self.new_client()
        self.client = self.session.transport

    def new_client(self) -> Session:
        session = Session(self.proxy)
        session.connection_made(Transport())
        return session

    def close(self):
        self.loop.close()

    def send(self, *commands, session=None) -> None:
        (session or self.session).data_received(b"".join(hiredis.pack_command(tuple(c)) for c in commands))

    def run(self) -> None:
        """Run what the loop has scheduled (resumes after waiting, coalesced writes)."""
        self.loop.run_until_complete(asyncio.sleep(0))
        self.loop.run_until_complete(asyncio.sleep(0))

    @staticmethod
    def sent(conn) -> list:
        data = conn.transport.taken() + b"".join(conn.out)
        conn.out = []
        return parse_all(data)

    @staticmethod
    def answer(conn, data: bytes) -> None:
        conn.data_received(data)

    def shared(self) -> UpstreamConnection:
        return self.session.route.connection()


@pytest.fixture
def rig():
    rig = Rig()
    yield rig
    rig.close()


def replies(rig, session=None) -> list:
    return parse_all((session or rig.session).transport.taken())


def test_a_pipeline_is_one_slice_on_the_shared_connection_and_replies_come_back_in_order(rig):
    rig.send([b"SET", b"a", b"1"], [b"GET", b"a"], [b"ECHO", b"e"])
    conn = rig.shared()
    assert rig.sent(conn) == [[b"SET", b"a", b"1"], [b"GET", b"a"], [b"ECHO", b"e"]]
    assert len(rig.session.queue) == 1 and rig.session.inflight == 1
    rig.answer(conn, b"+OK\r\n$1\r\n1\r\n$1\r\ne\r\n")
    assert replies(rig) == [b"OK", b"1", b"e"]
    assert not rig.session.queue and rig.session.state.lane is SHARED


def test_a_blocking_command_waits_for_what_is_in_flight_then_takes_a_lent_connection(rig):
    rig.send([b"LPUSH", b"q", b"x"], [b"BLPOP", b"q", b"0"], [b"GET", b"after"])
    shared = rig.shared()
    assert rig.sent(shared) == [[b"LPUSH", b"q", b"x"]]  # the BLPOP waits for the LPUSH's reply
    assert rig.session.state.life is WAITING and not rig.client.reading
    rig.answer(shared, b":1\r\n")
    rig.run()
    lent = rig.session.own
    assert rig.session.state.lane is LEASED and lent is not shared
    assert rig.sent(lent) == [[b"BLPOP", b"q", b"0"], [b"GET", b"after"]]  # what follows goes there too
    rig.answer(lent, b"*2\r\n$1\r\nq\r\n$1\r\nx\r\n$-1\r\n")
    assert replies(rig) == [1, [b"q", b"x"], None]
    assert rig.session.state.lane is SHARED and rig.session.own is None  # given back once answered
    assert lent in rig.backend.spare_pool((rig.backend.default_identity, 0, 2)).idle


def test_a_transaction_keeps_its_lent_connection_until_exec_is_answered(rig):
    rig.send([b"MULTI"], [b"SET", b"k", b"v"])
    lent = rig.session.own
    assert rig.sent(lent) == [[b"MULTI"], [b"SET", b"k", b"v"]]
    rig.answer(lent, b"+OK\r\n+QUEUED\r\n")
    assert rig.session.state.lane is LEASED and rig.session.state.txn == "queueing"  # idle, but MULTI is open
    rig.send([b"EXEC"])
    assert rig.sent(lent) == [[b"EXEC"]]
    rig.answer(lent, b"*1\r\n+OK\r\n")
    assert replies(rig) == [b"OK", b"QUEUED", [b"OK"]]
    assert rig.session.state.lane is SHARED and rig.session.state.txn == "none"


def test_state_left_on_a_lent_connection_pins_it(rig):
    rig.send([b"WATCH", b"k"])
    lent = rig.session.own
    rig.send([b"SELECT", b"3"])
    assert rig.session.state.lane is PINNED and rig.session.own is lent
    assert rig.sent(lent) == [[b"WATCH", b"k"], [b"SELECT", b"3"]]
    rig.answer(lent, b"+OK\r\n+OK\r\n")
    assert rig.session.state.lane is PINNED  # never given back


def test_replconf_makes_the_connection_a_stream_of_its_own(rig):
    rig.send([b"REPLCONF", b"ACK", b"0"], [b"PING"])
    own = rig.session.own
    assert rig.session.state.lane is STREAMING and own is not rig.backend.pool((rig.backend.default_identity, 0, 2)).connections[0]
    assert rig.sent(own) == [[b"REPLCONF", b"ACK", b"0"], [b"PING"]]
    rig.answer(own, b"+PONG\r\n")  # Redis said nothing to REPLCONF ACK: every byte is the client's
    assert replies(rig) == [b"PONG"]


def test_control_commands_go_to_the_control_connection_at_once(rig):
    rig.send([b"EVAL", b"while true do end", b"0"])
    lent = rig.session.own
    other = rig.new_client()
    rig.send([b"SCRIPT", b"KILL"], session=other)
    control = rig.backend.control.conn
    assert control is not None and control is not lent
    assert rig.sent(control) == [[b"SCRIPT", b"KILL"]]
    rig.answer(control, b"+OK\r\n")
    assert replies(rig, other) == [b"OK"]


def test_client_kill_is_answered_for_the_proxys_own_connections(rig):
    rig.send([b"GET", b"k"])
    shared = rig.shared()
    rig.sent(shared)
    rig.answer(shared, b"$-1\r\n")
    replies(rig)
    rig.send([b"CLIENT", b"KILL", shared.sockname], [b"CLIENT", b"KILL", b"ID", b"5", b"TYPE", b"x"])
    assert [str(reply) for reply in replies(rig)] == ["ERR No such client", "ERR Unknown client type 'x'"]
    # By ID: the proxy asks Redis (on its control connection, never a shared one) who that is,
    # checks Redis's own syntax first, and kills only what is not its own.
    rig.send([b"CLIENT", b"KILL", b"ID", b"7"])
    rig.run()
    control = rig.backend.control.conn
    assert rig.sent(shared) == [] and rig.sent(control) == [
        [b"CLIENT", b"KILL", b"ID", b"7", b"ID", b"9223372036854775807"]]
    rig.answer(control, b":0\r\n")
    rig.run()
    assert rig.sent(control) == [[b"CLIENT", b"LIST"]]
    listing = (b"id=7 addr=%s laddr=127.0.0.1:6379 flags=N\nid=8 addr=10.0.0.9:4000 laddr=127.0.0.1:6379 flags=N\n"
               % shared.sockname)
    rig.answer(control, b"$%d\r\n%s\r\n" % (len(listing), listing))
    rig.run()
    assert rig.sent(control) == []  # id 7 is the proxy's shared connection: nothing to kill
    assert replies(rig) == [0]


def test_a_client_that_does_not_read_is_disconnected_past_its_output_limit_and_never_pauses_the_shared_connection():
    rig = Rig(client_output_buffer=1000)
    try:
        reader = rig.new_client()
        rig.send([b"GET", b"big"], [b"GET", b"big"])
        rig.send([b"GET", b"small"], session=reader)
        shared = rig.shared()
        rig.client.buffered = 1100  # the client has stopped reading
        rig.session.pause_writing()
        rig.answer(shared, b"$200\r\n" + b"x" * 200 + b"\r\n")
        assert rig.client.closed and not shared.read_paused_by
        rig.answer(shared, b"$200\r\n" + b"x" * 200 + b"\r\n$1\r\ns\r\n")
        assert replies(rig, reader) == [b"s"]
    finally:
        rig.close()


def test_a_failed_connection_gives_the_replies_before_its_requests_then_closes_the_client(rig):
    rig.send([b"GET", b"a"])
    rig.send([b"BLPOP", b"q", b"0"])
    shared = rig.shared()
    rig.answer(shared, b"$1\r\n1\r\n")
    rig.run()
    lent = rig.session.own
    lent.fail("connection reset")
    assert replies(rig) == [b"1"] and rig.client.closed


def test_while_the_server_refuses_the_proxys_start_up_that_refusal_is_the_answer(rig):
    opener = rig.backend._opener(rig.backend.default_identity, 0, 3)
    opener.refusal = b"-NOAUTH HELLO must be called with the client already authenticated\r\n"
    opener.failed_at = 1e18  # down for good
    rig.send([b"HELLO", b"3"])
    assert [str(reply) for reply in replies(rig)] == ["NOAUTH HELLO must be called with the client already authenticated"]


def test_a_paused_write_takes_a_lent_connection_and_readers_stay_on_the_shared_one(rig):
    rig.backend.pauses.paused("write", 10)
    try:
        writer, reader = rig.session, rig.new_client()
        rig.send([b"SET", b"k", b"v"], session=writer)
        rig.send([b"GET", b"k"], session=reader)
        assert writer.state.lane is LEASED and reader.state.lane is SHARED
        assert rig.sent(writer.own) == [[b"SET", b"k", b"v"]]
        assert rig.sent(reader.route.connection()) == [[b"GET", b"k"]]
    finally:
        rig.backend.pauses.unpaused()
    assert rig.session.dispatch is not None


def test_eof_answers_what_came_before_then_closes(rig):
    rig.send([b"GET", b"a"])
    rig.session.eof_received()
    assert rig.session.state.life is CLOSING and not rig.client.closed
    rig.answer(rig.shared(), b"$1\r\n1\r\n")
    assert replies(rig) == [b"1"] and rig.client.closed


def test_quit_is_answered_here_and_nothing_after_it_runs(rig):
    rig.send([b"QUIT"], [b"SET", b"after", b"quit"])
    assert replies(rig) == [b"OK"] and rig.client.closed
    assert rig.session.state.life is not OPEN and rig.sent(rig.shared()) == []


@pytest.mark.parametrize("reads", [
    [[[b"GET", b"a"]], [[b"get", b"b"]], [[b"Get", b"c"]], [[b"ECHO", b"e"]]],  # one command a read
    [[[b"GET", b"a"], [b"get", b"b"], [b"Get", b"c"], [b"ECHO", b"e"]]],  # one read: the dispatch loop
], ids=["alone", "pipelined"])
def test_commands_passed_on_are_forwarded_and_counted_alike_alone_or_pipelined(rig, reads):
    counts = {name: live.tally(name).n for name in (b"get", b"echo")}
    for commands in reads:
        rig.send(*commands)
    conn = rig.shared()
    assert rig.sent(conn) == [[b"GET", b"a"], [b"get", b"b"], [b"Get", b"c"], [b"ECHO", b"e"]]
    rig.answer(conn, b"$-1\r\n$1\r\nx\r\n$-1\r\n$1\r\ne\r\n")
    assert replies(rig) == [None, b"x", None, b"e"]
    assert live.tally(b"get").n - counts[b"get"] == 3 and live.tally(b"echo").n - counts[b"echo"] == 1
    assert not rig.session.queue and rig.session.inflight == 0


def pings() -> int:
    """PINGs counted (by name, as every command the loop handles)."""
    return live.tally(b"ping").n + sum(n for name, n in live.NAMES.items() if name.lower() == b"ping")


def test_ping_goes_to_redis_like_any_read(rig):
    """Alone in its read or in a pipeline, with or without its argument: on the shared
    connection, its reply Redis's (BUSY during a long script), in its place."""
    count = pings()
    rig.send([b"PING"])
    conn = rig.shared()
    assert rig.sent(conn) == [[b"PING"]] and replies(rig) == []
    rig.answer(conn, b"+PONG\r\n")
    assert replies(rig) == [b"PONG"]
    rig.send([b"GET", b"a"])
    for ping in ([b"ping", b"hello"], [b"PING"], [b"PING", b"a", b"b"]):  # one read each, behind GET a
        rig.send(ping)
    assert rig.sent(conn) == [[b"GET", b"a"], [b"ping", b"hello"], [b"PING"], [b"PING", b"a", b"b"]]
    rig.answer(conn, b"$1\r\n1\r\n$5\r\nhello\r\n-BUSY Redis is busy running a script.\r\n"
                     b"-ERR wrong number of arguments for 'ping' command\r\n")
    got = replies(rig)
    assert got[:2] == [b"1", b"hello"] and isinstance(got[2], hiredis.ReplyError) and "BUSY" in str(got[2])
    assert "wrong number" in str(got[3])
    rig.send([b"PING"], [b"GET", b"a"], [b"PING"])
    assert rig.sent(conn) == [[b"PING"], [b"GET", b"a"], [b"PING"]]
    rig.answer(conn, b"+PONG\r\n$1\r\n1\r\n+PONG\r\n")
    assert replies(rig) == [b"PONG", b"1", b"PONG"]
    assert pings() - count == 6
    assert not rig.session.queue and rig.session.inflight == 0 and rig.session.state.lane is SHARED


def test_ping_on_a_connection_of_the_clients_own_goes_there(rig):
    """Inside MULTI Redis queues it (EXEC's reply holds its PONG), as on any connection of its own."""
    rig.send([b"MULTI"], [b"PING"])
    lent = rig.session.own
    assert rig.sent(lent) == [[b"MULTI"], [b"PING"]]
    rig.answer(lent, b"+OK\r\n+QUEUED\r\n")
    rig.send([b"EXEC"])
    rig.answer(lent, b"*1\r\n+PONG\r\n")
    assert replies(rig) == [b"OK", b"QUEUED", [b"PONG"]]


def test_a_command_alone_under_a_policy_passes_or_is_refused_as_in_a_pipeline(tmp_path):
    policy = tmp_path / "policy.yaml"
    policy.write_text("name: alone\nrules:\n  K2: {style: lowercase}\n  T3: {min_ttl: 1, max_ttl: 60}\n")
    rig = Rig(policy)
    try:
        session = rig.session
        # Twice each: the second time the key's class and the command's shape are known (a
        # command alone that passed before goes without the engine's decision).
        alone = [[b"GET", b"user:1"], [b"GET", b"user:2"], [b"GET", b"UserProfile"], [b"GET", b"UserProfile"],
                 [b"SET", b"user:1", b"v", b"EX", b"30"], [b"SET", b"user:2", b"v", b"EX", b"30"],
                 [b"SET", b"user:3", b"v", b"EX", b"3600"], [b"SET", b"user:4", b"v", b"EX", b"3600"]]
        for command in alone:
            rig.send(command, session=session)
        conn = session.route.connection()
        assert rig.sent(conn) == [alone[0], alone[1], alone[4], alone[5]]
        rig.answer(conn, b"$-1\r\n$-1\r\n+OK\r\n+OK\r\n")
        got = parse_all(session.transport.taken())
        assert got[:2] == [None, None] and got[4:6] == [b"OK", b"OK"]
        assert all(isinstance(reply, hiredis.ReplyError) and "K2" in str(reply) for reply in got[2:4])
        assert all(isinstance(reply, hiredis.ReplyError) and "T3" in str(reply) for reply in got[6:])
    finally:
        rig.close()


@pytest.mark.parametrize("pipelined", [False, True], ids=["alone", "pipelined"])
def test_a_key_class_that_passed_is_decided_again_under_a_new_policy(tmp_path, pipelined):
    """The session keeps the last key class that passed (`_key_passes`): a reload must not let
    it vouch for a key the new policy refuses, alone or in a pipeline."""
    lenient, strict = tmp_path / "lenient.yaml", tmp_path / "strict.yaml"
    lenient.write_text("name: lenient\nrules:\n  K2: {style: lowercase}\n")
    strict.write_text("name: strict\nrules:\n  K2: {style: lowercase}\n  K1: {delimiter: ':', min_segments: 3}\n")
    rig = Rig(lenient)
    try:
        session = rig.session
        conn = session.route.connection()
        get = [b"GET", b"user:1"]
        rig.send(*([get, get] if pipelined else [get]))
        assert session.good_class is not None  # kept: the next key of its class goes without a lookup
        rig.answer(conn, b"$-1\r\n" * (2 if pipelined else 1))
        rig.sent(conn)
        session.transport.taken()
        rig.proxy.set_engine(build_engine(str(strict), rig.proxy.command_table))
        assert session.good_class is None
        rig.send(*([[b"GET", b"user:2"], [b"GET", b"user:3:name"]] if pipelined else [[b"GET", b"user:2"]]))
        got = parse_all(session.transport.taken())
        assert isinstance(got[0], hiredis.ReplyError) and "K1" in str(got[0])
        assert rig.sent(conn) == ([[b"GET", b"user:3:name"]] if pipelined else [])
    finally:
        rig.close()


def test_the_last_key_class_kept_is_only_a_shortcut(tmp_path):
    """A key of another class than the one kept is looked up or matched, never passed on the
    kept one's account: a bad key between good ones is refused, alone and in a pipeline."""
    policy = tmp_path / "policy.yaml"
    policy.write_text("name: lower\nrules:\n  K2: {style: lowercase}\n")
    rig = Rig(policy)
    try:
        session = rig.session
        conn = session.route.connection()
        keys = [b"user:1", b"User:1", b"user:2", b"order:7", b"USER:3", b"user:4"]
        for key in keys:  # alone
            rig.send([b"GET", key])
        rig.send(*([b"GET", key] for key in keys))  # and pipelined
        good = [[b"GET", key] for key in keys if key.islower()]
        assert rig.sent(conn) == good * 2
        rig.answer(conn, b"$-1\r\n" * len(good) * 2)
        got = parse_all(session.transport.taken())
        expected_bad = [not key.islower() for key in keys] * 2
        assert [isinstance(reply, hiredis.ReplyError) and "K2" in str(reply) for reply in got] == expected_bad
    finally:
        rig.close()


def test_pipelined_refusals_are_one_write_and_keep_their_place_among_forwarded_replies(tmp_path):
    """The proxy's own replies with nothing before them are collected over a read's dispatch and
    written in one write (not a system call each); one behind a forwarded command waits for its
    reply, in order; QUIT after refusals writes them before closing."""
    policy = tmp_path / "policy.yaml"
    policy.write_text("name: refusals\nrules:\n  K2: {style: lowercase}\n")
    rig = Rig(policy)
    try:
        session = rig.session
        bad = [[b"SET", b"Bad:%d" % i, b"v"] for i in range(16)]
        rig.send(*bad)
        assert len(session.transport.out) == 1  # sixteen refusals, one write
        got = replies(rig)
        assert len(got) == 16 and all(isinstance(r, hiredis.ReplyError) and "'Bad:%d'" % i in str(r)
                                      for i, r in enumerate(got))
        # refusals, forwarded commands, refusals: the first ones at once, the rest after the replies
        rig.send(bad[0], bad[1], [b"GET", b"ok:1"], bad[2], [b"GET", b"ok:2"], bad[3])
        assert len(session.transport.out) == 1
        assert [str(r) for r in replies(rig)] == [str(r) for r in got[:2]]
        conn = session.route.connection()
        assert rig.sent(conn) == [[b"GET", b"ok:1"], [b"GET", b"ok:2"]]
        rig.answer(conn, b"$1\r\na\r\n$1\r\nb\r\n")
        after = replies(rig)
        assert after[0] == b"a" and after[2] == b"b" and [str(after[1]), str(after[3])] == [str(got[2]), str(got[3])]
        assert not session.local_out and not session.queue
        rig.send(bad[4], [b"QUIT"])
        assert session.transport.closed or session.state.life is CLOSING
        end = replies(rig)
        assert str(end[0]) == str(got[4]) and end[1] == b"OK"
    finally:
        rig.close()

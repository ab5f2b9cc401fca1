"""The hot-path counts of `monitor.live`, without sockets: command names per batch, the timing
sampled from upstream reads against the connection's write stamps, the slow log, error replies
found in upstream reads, the bound on distinct names."""

import bisect
import collections

import hiredis
import pytest

from proxy.backends.cluster.connection import Part
from proxy.backends.cluster.connection import RoutedPending as RoutedSlot
from proxy.commands.table import CommandTable
from proxy.monitor import keys, live, snapshot
from proxy.pending import Pending
from proxy.resp.reader import RequestReader
from proxy.resp.replies import ReplySplitter
from proxy.upstream.connection import StartupPending

pytestmark = pytest.mark.compiled_twin  # run again with the pure modules (tests/conftest.py)

TABLE = CommandTable.from_snapshot()
NOW = 1000.0  # the clock upstream reads see: a run's time is exactly its stamp's age, however slow the machine


@pytest.fixture(autouse=True)
def fresh(monkeypatch):
    monkeypatch.setattr(live, "clock", lambda: NOW)
    live.setup(TABLE, (RoutedSlot, Part))
    live.reset()
    yield
    live.reset()


def batch_of(*commands):
    return RequestReader().feed_read(b"".join(hiredis.pack_command(tuple(cmd)) for cmd in commands))


class Conn:
    """What upstream_read reads of a connection: its pending slots, reply splitter and write
    stamps (each slot its own write, made `ago` seconds before)."""

    closed = False

    def __init__(self, *slots, ago: float = 0.0):
        self.pending = collections.deque(slots)
        self.splitter = ReplySplitter()
        self.stamps = collections.deque((NOW - ago, slot) for slot in slots)

    def answer(self, count: int) -> None:
        """What the connection does with the replies of a read: the runs they complete leave."""
        while count and self.pending:
            slot = self.pending[0]
            taken = min(count, slot.remaining)
            slot.remaining -= taken
            count -= taken
            if slot.remaining == 0:
                self.pending.popleft()


def slot_for(*commands):
    slot = Pending(None, len(commands))
    slot.sent = b"".join(hiredis.pack_command(tuple(cmd)) for cmd in commands)
    return slot


def sampled_read(slot, data=b"+OK\r\n", ago: float = 0.0):
    """An upstream read that times the oldest run (`slot`), written `ago` seconds before."""
    return live.upstream_read(Conn(slot, ago=ago), data)


@pytest.mark.parametrize("batches, names", [
    ([[("GET", "a")]], {"get": 1}),
    ([[("GET", "a"), ("get", "b"), ("Set", "c", "v")]], {"get": 2, "set": 1}),
    ([[("GET", "a")]] * 3 + [[("MULTI",), ("INCR", "n"), ("EXEC",)]], {"get": 3, "multi": 1, "incr": 1, "exec": 1}),
    ([[("NOSUCH", "x")], [("nosuch2",), ("PING",)]], {"unknown": 2, "ping": 1}),
])
def test_commands_counted_by_name_fold_into_the_tables_names_at_export(batches, names):
    for commands in batches:
        batch = batch_of(*commands)
        live.count_names(batch.commands, 0, len(batch.commands))
    assert snapshot.build()["names"] == names


def test_tallies_and_names_add_up_at_export():
    live.tally(b"GET").n += 5
    live.tally(b"get").n += 1  # one Tally for both cases
    live.tally(live.UNKNOWN).n += 2
    live.count_names([[b"GET", b"k"], [b"nosuch"]], 0, 2)
    assert live.tally(b"GET") is live.tally(b"get")
    assert snapshot.build()["names"] == {"get": 7, "unknown": 3}
    live.reset()
    assert snapshot.build()["names"] == {}


def test_writes_count_request_bytes():
    live.written(b"*1\r\n$4\r\nPING\r\n")
    live.written(b"abc" * 3, [b"abc"] * 3)
    assert live.TOTALS[0] == 14 + 9


def test_distinct_names_are_bounded():
    for index in range(live.MAX_NAMES * 3):
        live.count_names([[f"junk{index}".encode()], [b"GET", b"k"]], 0, 2)
    assert len(live.NAMES) <= live.MAX_NAMES + 2
    names = snapshot.build()["names"]
    assert names == {"unknown": live.MAX_NAMES * 3, "get": live.MAX_NAMES * 3}


@pytest.mark.parametrize("commands, first", [
    ([("GET", "a")], "get"),
    ([("SET", "k", "v"), ("GET", "k")], "set"),
    ([("HSET", "h" * 20, "f", "v")], "hset"),
    ([tuple(["MSET"] + ["k", "v"] * 6)], "mset"),  # 13 arguments: the header has two digits
    ([("CLIENT", "LIST")], "client"),
])
def test_a_slot_is_timed_once_under_its_first_command(commands, first):
    sampled_read(slot_for(*commands), ago=0.003)  # written 3 ms ago
    durations = snapshot.build()["durations"]
    assert list(durations) == [first]
    histogram = durations[first]
    assert sum(histogram[:-1]) == 1  # one sample; the exporter scales it to the commands answered
    assert histogram[live.BOUNDS.index(0.005)] == 1  # in the (2.5 ms, 5 ms] bucket
    assert histogram[-1] == pytest.approx(0.003)


def test_each_read_times_its_oldest_run():
    conn = Conn(slot_for(("GET", "k"), ("GET", "j")), slot_for(("SET", "k", "v")))
    for _ in range(5):
        live.upstream_read(conn, b"$1\r\nv\r\n")
    assert sum(live.DURATIONS[b"GET"][:-1]) == 5
    assert b"SET" not in live.DURATIONS  # not the oldest


def test_reads_in_turn_time_each_run_under_its_own_name_and_age():
    """The last name timed is kept and compared in the next request's bytes, not sliced and
    looked up: runs of other names, of a name the last one begins, of names of the same length,
    of either case, and of a name whose header has two digits each go to their own histogram, in the bucket of their own age;
    after a reset the kept name's histogram is not written to any more."""
    reads = [("GET", 0.00005), ("GETDEL", 0.0003), ("SET", 0.0002), ("get", 0.0004), ("TTL", 0.0009), ("GET", 0.002),
             ("HGETALL", 0.004), ("GET", 0.009), ("GET", 0.03), ("ZREVRANGEBYSCORE", 0.2), ("TTL", 0.7)]
    expected = {}
    for name, ago in reads:
        args = (name, "k", "0", "1") if name == "ZREVRANGEBYSCORE" else (name, "k")
        sampled_read(slot_for(args), ago=ago)
        histogram = expected.setdefault(name.encode(), [0] * (len(live.BOUNDS) + 1))
        histogram[bisect.bisect_left(live.BOUNDS, ago)] += 1
    assert {name: list(histogram[:-1]) for name, histogram in live.DURATIONS.items()} == expected
    kept = live.DURATIONS[b"TTL"]
    live.reset()
    sampled_read(slot_for(("TTL", "k")), ago=0.0002)
    assert sum(live.DURATIONS[b"TTL"][:-1]) == 1 and live.DURATIONS[b"TTL"] is not kept


def test_a_run_is_timed_from_its_writes_stamp():
    first, second = slot_for(("GET", "a")), slot_for(("SET", "k", "v"))
    conn = Conn(first, second)
    conn.stamps = collections.deque([(NOW - 0.003, first), (NOW - 0.0003, second)])
    live.upstream_read(conn, b"$1\r\nv\r\n")
    conn.answer(1)
    live.upstream_read(conn, b"+OK\r\n")
    assert live.DURATIONS[b"GET"][live.BOUNDS.index(0.005)] == 1  # 3 ms
    assert live.DURATIONS[b"SET"][live.BOUNDS.index(0.0005)] == 1  # 0.3 ms: its own write's stamp
    assert len(conn.stamps) == 1  # the answered write's stamp is gone


def test_runs_of_one_write_share_its_stamp():
    first, second = slot_for(("GET", "a")), slot_for(("SET", "k", "v"))
    conn = Conn(first, second)
    conn.stamps = collections.deque([(NOW - 0.003, second)])  # one write carried both
    live.upstream_read(conn, b"$1\r\nv\r\n")
    conn.answer(1)
    live.upstream_read(conn, b"+OK\r\n")
    assert live.DURATIONS[b"SET"][live.BOUNDS.index(0.005)] == 1


@pytest.mark.parametrize("slot", [
    Pending(None, 1),  # the proxy's own command (a Question, a hidden command): no request bytes
    Pending(None, 0),  # a reply the proxy wrote itself
    Pending(None, -1),  # a subscription
    StartupPending(None, 1),  # the connection's own start-up, run again (a busy script refused it)
], ids=["proxy's own", "local", "stream", "start-up"])
def test_what_is_not_a_clients_run_is_not_timed(slot):
    conn = Conn(slot, ago=1.0)
    slow = live.upstream_read(conn, b"+OK\r\n")
    assert live.DURATIONS == {} and sum(snapshot.build()["rtt"][:-1]) == 0
    if slow is not None:
        live.slow_runs(conn, slow)
    assert not keys.SLOW  # nor ever slow


def test_a_slow_run_enters_the_slow_log_with_its_key_and_no_value():
    slot = slot_for(("SET", "user:1", "secret value"), ("GET", "user:1"))
    assert sampled_read(slot) is None  # just written: not slow
    conn = Conn(slot, ago=0.05)
    slow = live.upstream_read(conn, b"+OK\r\n+OK\r\n")
    assert slow is not None
    conn.answer(2)
    live.slow_runs(conn, slow)
    (entry,) = snapshot.slow_log(snapshot.merge([snapshot.build()]))["entries"]
    assert (entry["command"], entry["key"], entry["args"], entry["pipelined"]) == ("set", "user:1", 3, 2)
    assert entry["seconds"] == pytest.approx(0.05)
    assert "secret" not in str(entry)


def test_a_slow_read_logs_every_run_it_completes_and_only_those():
    runs = [slot_for(("GET", f"k{index}")) for index in range(4)]
    conn = Conn(*runs)
    # two writes 50 ms ago (runs 0-1, then 2), one just now (run 3)
    conn.stamps = collections.deque([(NOW - 0.05, runs[1]), (NOW - 0.05, runs[2]), (NOW, runs[3])])
    slow = live.upstream_read(conn, b"$1\r\nv\r\n" * 2)
    conn.answer(2)  # runs 0 and 1 answered by this read; 2 and 3 still waiting
    live.slow_runs(conn, slow)
    assert [entry[3] for entry in keys.slow_log()] == [b"k0", b"k1"]
    slow = live.upstream_read(conn, b"$1\r\nv\r\n" * 2)
    conn.answer(2)
    live.slow_runs(conn, slow)
    assert [entry[3] for entry in keys.slow_log()] == [b"k0", b"k1", b"k2"]  # run 3's write is recent


@pytest.mark.parametrize("replies, expected", [
    ([b"+OK\r\n", b"$1\r\nv\r\n"], {}),
    ([b"+OK\r\n", b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"], {"lpush": 1}),
    ([b"-ERR unknown command 'nosuch'\r\n", b"+OK\r\n"], {"set": 1}),
    ([b"$7\r\nline\r\n-\r\n", b"+OK\r\n"], {}),  # "\r\n-" inside a bulk string is no error reply
    ([b"*2\r\n-ERR inner\r\n:1\r\n", b"+OK\r\n"], {}),  # an error inside an array: EXEC's, not the command's
    ([b"-MOVED 3999 127.0.0.1:7002\r\n", b"+OK\r\n"], {}),  # followed by the proxy, counted apart
])
def test_error_replies_are_counted_by_command(replies, expected):
    conn = Conn(slot_for(("SET", "k", "v"), ("LPUSH", "k", "x")))
    live.upstream_read(conn, b"".join(replies))
    assert snapshot.build()["errors"] == expected


def test_errors_across_slots_and_routed_slots():
    batch = batch_of(("GET", "a"), ("INCR", "a"), ("GET", "b"))
    routed = RoutedSlot(None, 2, None, batch, 1, 0)  # INCR a, GET b
    conn = Conn(slot_for(("SET", "x", "1")), routed)
    live.upstream_read(conn, b"+OK\r\n-ERR value is not an integer or out of range\r\n$-1\r\n")
    assert snapshot.build()["errors"] == {"incr": 1}


def test_errors_and_timing_of_a_stretchs_part_go_by_its_runs_commands():
    """A Scatter's part holds runs that are not next to each other in the client's batch: its
    k-th reply is the k-th command of its runs, in order."""
    # Of GET a, SET x 1, INCR a, SET y 2, LPUSH a v: the part holds GET, INCR and LPUSH.
    sent = b"".join(hiredis.pack_command(cmd) for cmd in (("GET", "a"), ("INCR", "a"), ("LPUSH", "a", "v")))
    part = Part(None, 3, None, sent, 0, bytearray([0, 1, 0, 1, 0]), 0)
    conn = Conn(part, ago=0.002)
    live.upstream_read(conn, b"$-1\r\n-ERR value is not an integer or out of range\r\n"
                             b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n")
    built = snapshot.build()
    assert built["errors"] == {"incr": 1, "lpush": 1}
    assert set(built["durations"]) == {"get"}


def test_a_read_that_starts_inside_a_reply_is_not_walked():
    conn = Conn(slot_for(("GET", "k")))
    conn.splitter.scan(b"$10\r\nabc", 0, 1)  # the splitter is inside a bulk string
    live.upstream_read(conn, b"-defghij\r\n")
    assert live.ERRORS == {}


def test_reply_bytes_and_round_trips_are_sampled():
    conn = Conn(slot_for(("GET", "k")), ago=0.002)
    for _ in range(3):
        live.upstream_read(conn, b"$1\r\nv\r\n")
    assert live.TOTALS[1] == 7 * 3
    assert sum(snapshot.build()["rtt"][:-1]) == 3


def test_big_requests_and_replies_are_kept_by_key():
    value = "x" * keys.BIG_BYTES
    run = batch_of(("SET", "big:1", value), ("GET", "small")).raw
    live.written(b"".join([b"*1\r\n$4\r\nPING\r\n", run]), [b"*1\r\n$4\r\nPING\r\n", run])
    live.written(b"*1\r\n$4\r\nPING\r\n" * 5000)  # big, of small requests only
    slot = slot_for(("GET", "big:1"))
    conn = Conn(slot)
    for data in (b"$%d\r\n" % (3 * keys.BIG_BYTES) + b"x" * keys.BIG_BYTES, b"x" * keys.BIG_BYTES):
        live.upstream_read(conn, data)
        conn.splitter.scan(data, 0, 1)  # what the connection does next
    found = snapshot.big_keys(snapshot.merge([snapshot.build()]))
    assert found["requests"] == 1
    assert {(entry["kind"], entry["command"], entry["key"]) for entry in found["keys"]} == {
        ("request", "set", "big:1"), ("reply", "get", "big:1")}
    reply = next(entry for entry in found["keys"] if entry["kind"] == "reply")
    assert reply["bytes"] >= 2 * keys.BIG_BYTES


def test_hot_keys_are_sampled_from_the_timed_runs():
    for index in range(live.KEY_SAMPLE_EVERY * 10):
        live.upstream_read(Conn(slot_for(("GET", "hot:1" if index % 2 else f"cold:{index}"))), b"+OK\r\n")
    table = snapshot.hot_keys(snapshot.merge([snapshot.build()]))
    assert table["samples"] == 10
    assert table["keys"][0]["key"] == "hot:1"


def test_a_read_of_many_small_replies_is_no_big_reply():
    conn = Conn(slot_for(*[("GET", f"k{i}") for i in range(20000)]))
    live.upstream_read(conn, b"$3\r\nxxx\r\n" * 20000)  # 180 KB of small replies
    assert keys.COUNTS["big_replies"] == 0 and not keys.big_now()


def test_a_run_sent_elsewhere_leaves_its_writes_stamp():
    from proxy.upstream.connection import UpstreamConnection

    conn = UpstreamConnection(None, "127.0.0.1:1", [])
    first, second, tail = Pending(None, 1), Pending(None, 2), Pending(None, 1)
    conn.stamps.extend([(1.0, first), (2.0, second)])
    conn.restamp(first, None)  # redirected, nothing of its write left here
    assert list(conn.stamps) == [(2.0, second)]
    conn.restamp(second, tail)  # cut: the rest of the run stays, and is the write's last entry now
    assert list(conn.stamps) == [(2.0, tail)]

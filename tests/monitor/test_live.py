"""The hot-path counts of `monitor.live`, without sockets: command names per batch, the timing
sampled from upstream reads, the slow log's cutoff, error replies found in upstream reads, the
bound on distinct names."""

import collections
import time

import hiredis
import pytest

from proxy.cluster.connection import RoutedPending as RoutedSlot
from proxy.commands.table import CommandTable
from proxy.monitor import keys, live, snapshot
from proxy.pending import Pending
from proxy.resp.reader import RequestReader
from proxy.resp.replies import ReplySplitter

TABLE = CommandTable.from_snapshot()


@pytest.fixture(autouse=True)
def fresh():
    live.setup(TABLE)
    live.reset()
    yield
    live.reset()


def batch_of(*commands):
    return RequestReader().feed_read(b"".join(hiredis.pack_command(tuple(cmd)) for cmd in commands))


def Slot(receiver, remaining):  # noqa: N802 - a client's run, timed from now
    return Pending(receiver, remaining, None, None, time.perf_counter())


class Conn:
    """What upstream_read reads of a connection: its pending slots and reply splitter."""

    def __init__(self, *slots):
        self.pending = collections.deque(slots)
        self.splitter = ReplySplitter()


def slot_for(*commands):
    slot = Slot(None, len(commands))
    slot.sent = b"".join(hiredis.pack_command(tuple(cmd)) for cmd in commands)
    return slot


def sampled_read(slot, data=b"+OK\r\n"):
    """An upstream read that times the oldest run (`slot`); the slow log's cutoff."""
    return live.upstream_read(Conn(slot), data)


@pytest.mark.parametrize("batches, names", [
    ([[("GET", "a")]], {"get": 1}),
    ([[("GET", "a"), ("get", "b"), ("Set", "c", "v")]], {"get": 2, "set": 1}),
    ([[("GET", "a")]] * 3 + [[("MULTI",), ("INCR", "n"), ("EXEC",)]], {"get": 3, "multi": 1, "incr": 1, "exec": 1}),
    ([[("NOSUCH", "x")], [("nosuch2",), ("PING",)]], {"unknown": 2, "ping": 1}),
])
def test_command_names_are_counted_per_batch_and_folded_at_export(batches, names):
    for commands in batches:
        live.count_batch(batch_of(*commands))
    assert snapshot.build()["names"] == names
    assert live.TOTALS[0] == sum(len(batch_of(*commands).raw) for commands in batches)


def test_distinct_names_are_bounded():
    for index in range(live.MAX_NAMES * 3):
        live.count_batch(batch_of((f"junk{index}",), ("GET", "k")))
        sampled_read(slot_for((f"junk{index}",), ("GET", "k")))  # the bound is checked at samples
    assert len(live.NAMES) <= live.MAX_NAMES + live.KEY_SAMPLE_EVERY + 1
    names = snapshot.build()["names"]
    assert names == {"unknown": live.MAX_NAMES * 3, "get": live.MAX_NAMES * 3}


@pytest.mark.parametrize("commands, first", [
    ([("GET", "a")], "get"),
    ([("SET", "k", "v"), ("GET", "k")], "set"),
    ([("HSET", "h" * 20, "f", "v")], "hset"),
    ([tuple(["MSET"] + ["k", "v"] * 6)], "mset"),  # 13 arguments: the header has two digits
    ([("CLIENT", "LIST")], "client"),
])
def test_a_slot_is_timed_under_its_first_command_once_per_command(commands, first):
    slot = slot_for(*commands)
    slot.started -= 0.003  # read 3 ms ago
    sampled_read(slot)
    durations = snapshot.build()["durations"]
    assert list(durations) == [first]
    histogram = durations[first]
    assert sum(histogram[:-1]) == len(commands)
    assert histogram[live.BOUNDS.index(0.005)] == len(commands)  # in the (2.5 ms, 5 ms] bucket
    assert histogram[-1] == pytest.approx(0.003 * len(commands), rel=0.2)


def test_each_read_times_its_oldest_run():
    conn = Conn(slot_for(("GET", "k"), ("GET", "j")), slot_for(("SET", "k", "v")))
    for _ in range(5):
        live.upstream_read(conn, b"$1\r\nv\r\n")
    assert sum(live.DURATIONS[b"GET"][:-1]) == 2 * 5
    assert b"SET" not in live.DURATIONS  # not the oldest


@pytest.mark.parametrize("slot", [
    Pending(None, 1),  # the proxy's own command (a Question, a hidden command): UNTIMED
    Slot(None, 0),  # a reply the proxy wrote itself
    Slot(None, -1),  # a subscription
], ids=["untimed", "local", "stream"])
def test_what_is_not_a_clients_run_is_not_timed(slot):
    cutoff = sampled_read(slot)
    assert live.DURATIONS == {} and sum(live.RTT[:-1]) == 0
    assert not slot.started < cutoff or slot.count <= 0  # nor ever slow


def test_a_slow_run_enters_the_slow_log_with_its_key_and_no_value():
    slot = slot_for(("SET", "user:1", "secret value"), ("GET", "user:1"))
    assert not slot.started < live.upstream_read(Conn(slot), b"+OK\r\n")  # just read: not slow
    slot.started -= 0.05
    cutoff = live.upstream_read(Conn(slot), b"+OK\r\n")
    assert slot.started < cutoff
    live.slow_done(slot, cutoff)
    (entry,) = snapshot.slow_log(snapshot.merge([snapshot.build()]))["entries"]
    assert (entry["command"], entry["key"], entry["args"], entry["pipelined"]) == ("set", "user:1", 3, 2)
    assert entry["seconds"] == pytest.approx(0.05, abs=0.02)
    assert "secret" not in str(entry)


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


def test_a_read_that_starts_inside_a_reply_is_not_walked():
    conn = Conn(slot_for(("GET", "k")))
    conn.splitter.scan(b"$10\r\nabc", 0, 1)  # the splitter is inside a bulk string
    live.upstream_read(conn, b"-defghij\r\n")
    assert live.ERRORS == {}


def test_reply_bytes_and_round_trips_are_sampled():
    slot = slot_for(("GET", "k"))
    slot.started -= 0.002
    conn = Conn(slot)
    for _ in range(3):
        live.upstream_read(conn, b"$1\r\nv\r\n")
    assert live.TOTALS[1] == 7 * 3
    assert sum(live.RTT[:-1]) == 3


def test_big_requests_and_replies_are_kept_by_key():
    value = "x" * keys.BIG_BYTES
    live.count_batch(batch_of(("SET", "big:1", value), ("GET", "small")))
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

"""The slow log of `monitor.live`/`monitor.keys` when many runs are slow at once (the process was
descheduled): recording a slow read parses no request; the log is parsed when it is read, and
reads as if every run had been parsed when it was recorded."""

import hiredis
import pytest

from proxy.backends.cluster.connection import RoutedPending as RoutedSlot
from proxy.monitor import keys, live, snapshot
from tests.monitor.test_live import Conn, batch_of, fresh, slot_for  # noqa: F401 (fresh: the same autouse fixture)

pytestmark = pytest.mark.compiled_twin  # run again with the pure modules (tests/conftest.py)


@pytest.fixture
def parsers(monkeypatch):
    """The hiredis Readers made (the monitor's request parses), counted."""
    made = []
    real = hiredis.Reader

    def counted(*args, **kwargs):
        made.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(hiredis, "Reader", counted)
    return made


def slow_read(*slots):
    """One upstream read that answers every slot, all written 50 ms before it."""
    conn = Conn(*slots, ago=0.05)
    replies = sum(slot.remaining for slot in slots)
    slow = live.upstream_read(conn, b"+OK\r\n" * replies)
    assert slow is not None
    conn.answer(replies)
    live.slow_runs(conn, slow)


def read_log() -> list:
    """/debug/slowlog's entries as (command, key, args, pipelined)."""
    entries = snapshot.slow_log(snapshot.merge([snapshot.build()]))["entries"]
    return [(entry["command"], entry["key"], entry["args"], entry["pipelined"]) for entry in entries]


def test_a_slow_read_of_many_runs_parses_no_request_until_the_log_is_read(parsers):
    slow_read(*[slot_for(("GET", f"k{index}")) for index in range(50)])
    assert parsers == []  # 50 runs recorded by name: no parser made
    assert keys.SLOW_BY_NAME == {b"get": 50}
    assert read_log() == [("get", f"k{index}", 2, 1) for index in reversed(range(50))]  # newest first
    assert len(parsers) == 50  # parsed when read


BIG_VALUE = "v" * (keys.SLOW_LAZY_BYTES + 1)


def test_every_kind_of_run_reads_as_if_parsed_when_recorded():
    batch = batch_of(("GET", "a"), ("INCR", "n"), ("GET", "b"))
    runs = [
        (slot_for(("GET", "k0")), ("get", "k0", 2, 1)),
        (slot_for(("Set", "user:1", "secret"), ("GET", "user:1"), ("INCR", "n")), ("set", "user:1", 3, 3)),
        (slot_for(("PING",)), ("ping", None, 1, 1)),
        (slot_for(("ZRANGEBYSCORE", "z", "0", "1")), ("zrangebyscore", "z", 4, 1)),  # name of two digits
        (slot_for(tuple(["MSET"] + ["m", "v"] * 6)), ("mset", "m", 13, 1)),  # 13 arguments
        (slot_for(("SET", "big", BIG_VALUE), ("GET", "big")), ("set", "big", 3, 2)),  # parsed at once
        (slot_for(("SET", "K" * 1000, "v")), ("set", "K" * keys.KEY_BYTES, 3, 1)),  # key cut
        (RoutedSlot(None, 2, None, batch, 1, 0), ("incr", "n", 2, 2)),  # a batch's commands 1 and 2
        (RoutedSlot(None, 1, None, hiredis.pack_command((b"HGET", b"h", b"f")), 0, None), ("hget", "h", 3, 1)),
    ]
    slow_read(*[slot for slot, _ in runs])
    expected = [entry for _, entry in runs]
    assert read_log() == expected[::-1]
    assert snapshot.build()["slow_by_name"] == {"get": 1, "set": 3, "ping": 1, "zrangebyscore": 1, "mset": 1,
                                                 "incr": 1, "hget": 1}
    # the big request was parsed when recorded (its value not kept); the four with one-digit headers wait
    kept = [entry[-1] for entry in keys.SLOW if entry[-1] is not None]
    assert len(kept) == 4 and all(len(request) <= keys.SLOW_LAZY_BYTES for request in kept)
    assert all(BIG_VALUE.encode() not in entry for entry in keys.SLOW)


def test_the_log_keeps_the_last_runs_and_counts_them_all(parsers):
    for read in range(3):
        slow_read(*[slot_for(("GET", f"r{read}k{index}")) for index in range(100)])
    assert keys.SLOW_BY_NAME == {b"get": 300}
    log = read_log()
    assert len(log) == keys.SLOW_CAPACITY and len(parsers) == keys.SLOW_CAPACITY
    assert log[0] == ("get", "r2k99", 2, 1) and log[-1] == ("get", f"r1k{100 - (keys.SLOW_CAPACITY - 100)}", 2, 1)


def test_workers_logs_merge_newest_first():
    slow_read(slot_for(("GET", "a")), slot_for(("GET", "b")))
    first = snapshot.build()
    live.reset()
    slow_read(slot_for(("GET", "c")))
    second = snapshot.build()
    second["slow"][0][0] += 1.0  # a second later
    merged = snapshot.slow_log(snapshot.merge([first, second]))["entries"]
    assert [entry["key"] for entry in merged] == ["c", "b", "a"]

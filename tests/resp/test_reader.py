"""The request reader: hiredis fast path, exact fallback, and the bytes it hands on; every test
runs on the pure-Python reader and on the one with the compiled split (test_reader_compiled.py
compares the two read by read)."""

import os
import random
import re
import time

import hiredis
import pytest

from proxy.resp import reader as reader_module
from proxy.resp.exact import ParseLimits
from proxy.resp.reader import RequestReader

COMPILED_SPLIT = reader_module._split


@pytest.fixture(autouse=True, params=["compiled", "pure"])
def reader_kind(request, monkeypatch):
    """Each test once with the compiled split of canonical requests and once without it."""
    if request.param == "pure":
        monkeypatch.setattr(reader_module, "_split", None)
    elif COMPILED_SPLIT is None:
        if os.environ.get("REDIS_GUARD_EXPECT_COMPILED"):
            pytest.fail("the compiled request split is not built (REDIS_GUARD_EXPECT_COMPILED is set)")
        pytest.skip("the compiled request split is not built")
    return request.param


def pack(*args):
    return hiredis.pack_command(args)


def read_all(reader, data=None):
    commands, raw, errors = [], b"", []
    batch = reader.feed_read(data) if data is not None else reader.read()
    while batch is not None:
        commands += batch.commands
        # Each command's span of raw is its RESP encoding.
        for i, cmd in enumerate(batch.commands):
            assert batch.span(i, i + 1) == pack(*cmd)
        raw += batch.raw
        if batch.error:
            errors.append(batch.error.message)
            break
        batch = reader.read()
    return commands, raw, errors


# (input, expected commands, expected error or None)
CASES = [
    (pack("GET", "k"), [(b"GET", b"k")], None),
    (pack("SET", "k", "v" * 200) * 3, [(b"SET", b"k", b"v" * 200)] * 3, None),
    (b"PING\r\n" + pack("ECHO", "x"), [(b"PING",), (b"ECHO", b"x")], None),
    (pack("ECHO", "x") + b"PING\r\n" + pack("ECHO", "y"), [(b"ECHO", b"x"), (b"PING",), (b"ECHO", b"y")], None),
    (b"*0\r\n*-1\r\n" + pack("PING"), [(b"PING",)], None),
    (pack("PING") + b"*1\r\n+PING\r\n", [(b"PING",)], "Protocol error: expected '$', got '+'"),
    (b"*2\r\n$4\r\nECHO\r\n=5\r\ntxt:a\r\n", [], "Protocol error: expected '$', got '='"),
    (b"*3000000000\r\n", [], "Protocol error: invalid multibulk length"),
    (b"*2000000\r\n$1\r\na\r\n*1\r\n", [], "Protocol error: expected '$', got '*'"),
    (b"*1\r\n*2000000000\r\n", [], "Protocol error: expected '$', got '*'"),
    (b"*2\r\n$4\r\nECHO\r\n$-1\r\n", [], "Protocol error: invalid bulk length"),
    # hiredis raises TypeError (not its ProtocolError) for a map or set keyed by an aggregate.
    (b"*1\r\n%1\r\n*0\r\n$0\r\n\r\n", [], "Protocol error: expected '$', got '%'"),
    (pack("PING") + b"*2\r\n$4\r\nECHO\r\n~1\r\n%0\r\n%1\r\n~1\r\n:1\r\n:2\r\n", [(b"PING",)],
     "Protocol error: expected '$', got '~'"),
]


@pytest.mark.parametrize("payload,commands,error", CASES)
@pytest.mark.parametrize("mode", ["whole", "bytewise", "trailing", "feed_read", "feed_read bytewise"])
def test_reader(payload, commands, error, mode):
    reader = RequestReader()
    got, raw, errors = [], b"", []
    pieces = [payload[i:i + 1] for i in range(len(payload))] if "bytewise" in mode else [payload]
    if mode == "trailing" and error is None:
        pieces.append(b"*2\r\n$4\r\nECHO")
    for piece in pieces:
        if mode.startswith("feed_read"):
            c, r, e = read_all(reader, piece)
        else:
            reader.feed(piece)
            c, r, e = read_all(reader)
        got += c
        raw += r
        errors += e
        if e:
            break
    assert got == commands
    assert errors == ([error] if error else [])
    if commands and error is None and not payload.startswith(b"PING") and b"PING\r\n" not in payload:
        assert raw == payload.replace(b"*0\r\n*-1\r\n", b"")  # the client's own bytes


def test_huge_count_never_reaches_hiredis():
    reader = RequestReader()
    started = time.monotonic()
    reader.feed(b"*30")
    assert reader.read() is None
    reader.feed(b"00000000\r\n")
    batch = reader.read()
    assert batch.error.message == "Protocol error: invalid multibulk length"
    assert time.monotonic() - started < 1


def test_large_value_in_many_reads_is_linear():
    value = b"x" * (8 * 1024 * 1024)
    payload = pack("SET", "big", value)
    reader = RequestReader()
    started = time.monotonic()
    for i in range(0, len(payload), 16 * 1024):
        reader.feed(payload[i:i + 16 * 1024])
        batch = reader.read()
        if batch is not None:
            break
    assert batch.commands == [(b"SET", b"big", value)] and batch.raw == payload
    assert time.monotonic() - started < 5


def test_malformed_header_after_large_argument_is_answered_at_once():
    reader = RequestReader()
    reader.feed(b"*3\r\n$4\r\nMSET\r\n$100000\r\n" + b"v" * 100000 + b"\r\n")
    assert reader.read() is None
    reader.feed(b"$-5\r\n")
    assert reader.read().error.message == "Protocol error: invalid bulk length"


@pytest.mark.parametrize("more", [pack("PING"), b"*1\r\n$4\r\nPI", b"garbage\r\n"])
def test_a_failed_reader_reads_nothing_more(more):
    reader = RequestReader()
    assert reader.feed_read(b"*1\r\n*1\r\n$1\r\na").error is not None  # a partial request found malformed
    assert reader.feed_read(more) is None
    reader.feed(more)
    assert reader.read() is None


def test_limits():
    reader = RequestReader(ParseLimits(max_args=3, max_request_bytes=100))
    reader.feed(pack("MSET", "a", "1", "b", "2"))
    assert "too many arguments" in reader.read().error.message
    reader = RequestReader(ParseLimits(max_args=10, max_request_bytes=100))
    reader.feed(pack("SET", "a", "x" * 200))
    assert "request too large" in reader.read().error.message


class GuardedHiredis:
    """hiredis as the reader uses it, except that a Reader fed a huge aggregate header fails the
    test where the real one would try to allocate the element list (and hang or exhaust memory)."""

    ProtocolError = hiredis.ProtocolError
    pack_command = staticmethod(hiredis.pack_command)

    class Reader:
        def __init__(self):
            self._reader = hiredis.Reader()
            self._fed = b""

        def feed(self, data):
            self._fed += data
            self._reader.feed(data)

        def gets(self):
            # A partial header line is harmless (the reader's next feed sees it whole); a
            # complete one is parsed, and allocated, by this very call.
            assert HUGE_HEADER.search(self._fed) is None, f"hiredis was fed {self._fed[-40:]!r}"
            return self._reader.gets()


HUGE_HEADER = re.compile(rb"[*~>|%][0-9]{7,}\r\n")
PREFIXES = [b"", pack("GET", "k"), pack("SET", "k", "v" * 30) * 2, b"PING\r\n"]
HUGE_CASES = [
    b"*3000000000\r\n",
    b"*1\r\n*2000000000\r\n",
    b"*2\r\n$4\r\nECHO\r\n%3000000000\r\n",
    b"*2\r\n$4\r\nECHO\r\n~2000000000\r\n",
    b"*2\r\n$4\r\nECHO\r\n>2000000000\r\n",
    b"*2\r\n$4\r\nECHO\r\n|2000000000\r\n",
    b"~3000000000\r\n",
]
# Only looks like a huge header: a value, which hiredis may well hold.
LOOKALIKE = pack("SET", "k", "*3000000000\r\n") + pack("GET", "k")


def read_in_pieces(payload, cuts):
    reader = RequestReader()
    commands, raw, errors = [], b"", []
    start = 0
    for stop in [*cuts, len(payload)]:
        c, r, e = read_all(reader, payload[start:stop])
        commands += c
        raw += r
        errors += e
        start = stop
        if e:
            break
    return commands, raw, errors


@pytest.mark.parametrize("prefix", PREFIXES, ids=["alone", "after GET", "after SETs", "after inline"])
@pytest.mark.parametrize("payload", [case[0] for case in CASES] + HUGE_CASES + [LOOKALIKE])
def test_any_cut_reads_the_same_and_never_hands_hiredis_a_huge_header(monkeypatch, prefix, payload):
    if payload != LOOKALIKE:
        monkeypatch.setattr(reader_module, "hiredis", GuardedHiredis)
    stream = prefix + payload
    whole = read_in_pieces(stream, [])
    rng = random.Random(stream)
    cut_sets = [list(range(1, len(stream)))]  # one byte at a time
    for _ in range(40):
        cuts, at = [], 0
        while True:
            at += rng.randint(1, 12)
            if at >= len(stream):
                break
            cuts.append(at)
        cut_sets.append(cuts)
    for cuts in cut_sets:
        assert read_in_pieces(stream, cuts) == whole, cuts
    if payload == LOOKALIKE:
        assert whole[0][-2:] == [(b"SET", b"k", b"*3000000000\r\n"), (b"GET", b"k")] and not whole[2]



@pytest.mark.parametrize("commands", [
    [(b"GET", b"k")],
    [(b"GET", b"a"), (b"SET", b"b", b"x" * 70000), (b"LPUSH", b"c", b"", b"\r\n*1\r\n")],
    [(b"MSET",) + (b"k", b"v") * 3000],
])
def test_requests_read_again_are_the_commands_they_were(commands):
    raw = b"".join(hiredis.pack_command(command) for command in commands)
    batch = reader_module.requests_again(raw)
    assert [tuple(args) for args in batch.commands] == commands
    assert batch.raw == raw and batch.error is None
    assert b"".join(batch.span(at, at + 1) for at in range(len(commands))) == raw


@pytest.mark.parametrize("raw", [b"*2\r\n$3\r\nGET\r\n", b"*1\r\n$3\r\nGET\r\n*1", b"GET k\r\n", b"*1\r\n$3\r\nGETX\r\n"])
def test_requests_read_again_must_be_whole_requests(raw):
    with pytest.raises(ValueError):
        reader_module.requests_again(raw)

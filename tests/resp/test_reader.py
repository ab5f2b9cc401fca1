"""The request reader: hiredis fast path, exact fallback, and the bytes it hands on."""

import time

import hiredis
import pytest

from proxy.resp.exact import ParseLimits
from proxy.resp.reader import RequestReader


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
    (pack("GET", "k"), [[b"GET", b"k"]], None),
    (pack("SET", "k", "v" * 200) * 3, [[b"SET", b"k", b"v" * 200]] * 3, None),
    (b"PING\r\n" + pack("ECHO", "x"), [[b"PING"], [b"ECHO", b"x"]], None),
    (pack("ECHO", "x") + b"PING\r\n" + pack("ECHO", "y"), [[b"ECHO", b"x"], [b"PING"], [b"ECHO", b"y"]], None),
    (b"*0\r\n*-1\r\n" + pack("PING"), [[b"PING"]], None),
    (pack("PING") + b"*1\r\n+PING\r\n", [[b"PING"]], "Protocol error: expected '$', got '+'"),
    (b"*2\r\n$4\r\nECHO\r\n=5\r\ntxt:a\r\n", [], "Protocol error: expected '$', got '='"),
    (b"*3000000000\r\n", [], "Protocol error: invalid multibulk length"),
    (b"*2000000\r\n$1\r\n", [], "Protocol error: too many arguments in request (limit 1048576)"),
    (b"*1\r\n*2000000000\r\n", [], "Protocol error: expected '$', got '*'"),
    (b"*2\r\n$4\r\nECHO\r\n$-1\r\n", [], "Protocol error: invalid bulk length"),
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
    assert batch.commands == [[b"SET", b"big", value]] and batch.raw == payload
    assert time.monotonic() - started < 5


def test_malformed_header_after_large_argument_is_answered_at_once():
    reader = RequestReader()
    reader.feed(b"*3\r\n$4\r\nMSET\r\n$100000\r\n" + b"v" * 100000 + b"\r\n")
    assert reader.read() is None
    reader.feed(b"$-5\r\n")
    assert reader.read().error.message == "Protocol error: invalid bulk length"


def test_limits():
    reader = RequestReader(ParseLimits(max_args=3, max_request_bytes=100))
    reader.feed(pack("MSET", "a", "1", "b", "2"))
    assert "too many arguments" in reader.read().error.message
    reader = RequestReader(ParseLimits(max_args=10, max_request_bytes=100))
    reader.feed(pack("SET", "a", "x" * 200))
    assert "request too large" in reader.read().error.message

"""The compiled split of canonical requests against the pure-Python reader, the reference: random
streams read by both, call by call."""

import os
import random

import hiredis
import pytest

from proxy.resp import reader as reader_module
from proxy.resp.exact import ParseLimits
from proxy.resp.reader import RequestReader

if reader_module._split is None:
    if os.environ.get("REDIS_GUARD_EXPECT_COMPILED"):
        raise RuntimeError("the compiled request split is not built (REDIS_GUARD_EXPECT_COMPILED is set)")
    pytest.skip("the compiled request split is not built", allow_module_level=True)


def pack(*args):
    return hiredis.pack_command(args)


PIECES = [
    pack("GET", "k"), pack("SET", "key:1", "v" * 120), pack("PING"), pack("MSET", *"abcdefghijkl"),
    pack("ECHO", ""), pack("SET", "k", "\r\n*3000000000\r\n"), b"PING\r\n", b"  \r\n", b"*0\r\n",
    b"*-1\r\n", b"*1\r\n$03\r\nabc\r\n", b"*01\r\n$3\r\nabc\r\n", b"*1\r\n$3\r\nabcXY", b"*1\r\n$+3\r\nabc\r\n",
    b"*1\r\n+PING\r\n", b"*2\r\n$4\r\nECHO\r\n$-1\r\n", b"*1\r\n$3\r\nabc\n\r", b"*1\r\n$4\r\nPING\n",
    b"*1 \r\n$4\r\nPING\r\n", b"*1000000\r\n$1\r\na\r\n", b"*999999\r\n", b"*3\r\n$1\r\na\r\n", b"$3\r\nabc\r\n",
    b"*1\r\n$1000000000\r\n", b"*1\r\n$99999999\r\n", b"*2\r\n$3\r\nGET\r\n*1\r\n", b"*1\r\n$0\r\n\r\n",
    b"*2\r\n$3\r\nGET\r\n$1\r\nk\r", b"\r\n", b"\n", b"*", b"\x00\xff",
]
LIMITS = [ParseLimits(), ParseLimits(max_args=3, max_request_bytes=64)]


def batch_view(batch):
    if batch is None:
        return None
    return batch.commands, batch.raw, list(batch.ends), batch.error.message if batch.error else None


@pytest.mark.parametrize("seed", range(60))
def test_the_compiled_split_reads_as_the_pure_reader(seed):
    """Random streams of canonical, inline, non-canonical and malformed requests, cut at random,
    read with feed_read (the session's call) and now and then feed + read: every call gives the
    same batch (commands, bytes, ends, error) and leaves as much buffered."""
    rng = random.Random(seed)
    stream = b"".join(rng.choice(PIECES[:6] if rng.random() < 0.6 else PIECES) for _ in range(rng.randint(1, 12)))
    limits = rng.choice(LIMITS)
    compiled, pure = RequestReader(limits), RequestReader(limits)
    at = 0
    while at < len(stream):
        size = rng.choice([1, 2, 5, 17, 64, len(stream)])
        piece, at = stream[at:at + size], at + size
        if rng.random() < 0.2:
            compiled.feed(piece)
            pure.feed(piece)
            got, want = compiled.read(), read_pure(pure, None)
        else:
            got, want = compiled.feed_read(piece), read_pure(pure, piece)
        assert batch_view(got) == batch_view(want), (stream, at)
        assert compiled.buffered == pure.buffered, (stream, at)
        if want is not None and want.error is not None:
            break


def read_pure(reader, data):
    """The reader with the compiled split left out (the module's, for this one call)."""
    split = reader_module._split
    reader_module._split = None
    try:
        return reader.feed_read(data) if data is not None else reader.read()
    finally:
        reader_module._split = split


def test_reads_that_are_not_bytes_go_to_the_python_reader():
    """A transport's bytearray (uvloop hands bytes, others may not) is read as the pure reader reads it."""
    data = bytearray(pack("GET", "k") + pack("SET", "k", "v"))
    commands = []
    assert reader_module._split(data, 10, 100, commands) == 0 and commands == []
    assert batch_view(RequestReader().feed_read(data)) == batch_view(read_pure(RequestReader(), data))


LONG = [pack("MSET", *(f"key:{i}" for i in range(n))) for n in (14, 15, 16, 17, 40)] + [
    pack("DEL", *("k" * i for i in range(1, 18))), pack("RPUSH", "q", *([""] * 20), "x" * 300),
    pack("MSET", *(f"key:{i}" for i in range(20)))[:-1]]  # the last one cut short


@pytest.mark.parametrize("cut", [None, 1, 7, 100])
def test_requests_with_more_arguments_than_the_check_keeps_split_as_the_pure_reader(cut):
    """The check keeps the places of a request's first 16 arguments (KEPT_ARGS) and the split
    finds the rest again: around that count, with empty and long arguments, whole and cut."""
    stream = b"".join(LONG)
    for limits in LIMITS + [ParseLimits(max_args=17)]:
        compiled, pure = RequestReader(limits), RequestReader(limits)
        for at in range(0, len(stream), cut or len(stream)):
            piece = stream[at:at + (cut or len(stream))]
            assert batch_view(compiled.feed_read(piece)) == batch_view(read_pure(pure, piece)), at
            assert compiled.buffered == pure.buffered
    commands = []
    assert reader_module._split(stream, 100, 10_000, commands) == len(stream) - len(LONG[-1])
    assert commands[4] == (b"MSET", *(f"key:{i}".encode() for i in range(40)))

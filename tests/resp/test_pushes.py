"""PushCutter, sans-IO: a top-level push cut out of a connection's bytes, whole, byte by byte and
with trailing data; malformed pushes refused."""

import random

import pytest

from proxy.resp.pushes import PushCutter
from proxy.resp.replies import ReplyStreamError

PUSHES = [
    ("invalidate one key", b">2\r\n$10\r\ninvalidate\r\n*1\r\n$3\r\nk:1\r\n"),
    ("invalidate everything (FLUSHALL)", b">2\r\n$10\r\ninvalidate\r\n_\r\n"),
    ("several keys, one with a CRLF", b">2\r\n$10\r\ninvalidate\r\n*2\r\n$1\r\na\r\n$4\r\nb\r\nc\r\n"),
    ("empty", b">0\r\n"),
    ("redirection broken", b">2\r\n$21\r\ntracking-redir-broken\r\n:17\r\n"),
    ("nested aggregates", b">3\r\n$7\r\nmessage\r\n%1\r\n+a\r\n*2\r\n:1\r\n,1.5\r\n*0\r\n"),
    ("a long key", b">2\r\n$10\r\ninvalidate\r\n*1\r\n$20000\r\n" + b"x" * 20000 + b"\r\n"),
]
AFTER = b"$5\r\nvalue\r\n"  # the reply that follows


def cut_in_pieces(push: bytes, cuts) -> tuple[bytes, int]:
    """Feed `push` + AFTER cut at `cuts`: (the push handed on, where AFTER starts in the last piece)."""
    data = push + AFTER
    cutter = PushCutter()
    whole = None
    start = 0
    for cut in [c for c in cuts if c < len(push)] + [len(data)]:
        piece = data[start:cut]
        end, out = cutter.cut(piece, 0)
        assert whole is None
        if out is None:
            assert end == len(piece) and cutter.in_push
        else:
            whole = out
            assert piece[end:] == data[start + end:cut] and data[start + end:].startswith(AFTER)
            return whole, start + end
        start = cut
    raise AssertionError("the push never ended")


@pytest.mark.parametrize("name,push", PUSHES, ids=[case[0] for case in PUSHES])
def test_whole_and_with_trailing_data(name, push):
    cutter = PushCutter()
    data = b"+OK\r\n" + push + AFTER
    end, out = cutter.cut(data, 5)
    assert (out, data[end:]) == (push, AFTER) and not cutter.in_push


@pytest.mark.parametrize("name,push", PUSHES, ids=[case[0] for case in PUSHES])
def test_byte_by_byte(name, push):
    assert cut_in_pieces(push, range(1, len(push))) == (push, len(push))


@pytest.mark.parametrize("seed", range(100))
def test_cut_at_random(seed):
    rng = random.Random(seed)
    name, push = PUSHES[seed % len(PUSHES)]
    cuts = sorted(rng.sample(range(1, len(push)), min(len(push) - 1, rng.randint(1, 5))))
    assert cut_in_pieces(push, cuts) == (push, len(push))


@pytest.mark.parametrize("data", [b">x\r\n", b">-1\r\n", b">2\n", b">1\r\n>0\r\n", b">" + b"9" * 40])
def test_malformed(data):
    with pytest.raises(ReplyStreamError):
        PushCutter().cut(data, 0)

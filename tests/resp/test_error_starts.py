"""replies.may_hold_error, pure and compiled: whether an error reply may start in an upstream
read (the monitor counts error replies by command only in reads where one may). A `-` at the
start or after a line end, never one inside a reply; every reply shape of the splitter's table,
alone and after others; random reads against the pure twin. replies.line_dash, pure and
compiled: where the next line feed followed by a `-` is (a cluster connection's look for
redirections), as `bytes.find` finds it, from every position."""

from __future__ import annotations

import random

import pytest

from proxy.resp import replies
from tests.resp.test_replies import REPLIES
from tests.resp.twins import compiled_replies


@pytest.fixture(params=["pure", "compiled"])
def may_hold_error(request):
    return replies.pure_may_hold_error if request.param == "pure" else compiled_replies("may_hold_error")


@pytest.mark.parametrize("data, expected", [
    (b"", False),
    (b"-", True),
    (b"-ERR wrong\r\n", True),
    (b"$-1\r\n", False),  # a nil bulk string
    (b"*-1\r\n", False),
    (b":-42\r\n", False),  # a negative integer
    (b"$3\r\na-b\r\n", False),  # a value holding a dash
    (b"+OK\r\n-ERR wrong\r\n", True),
    (b"$-1\r\n$-1\r\n-WRONGTYPE x\r\n", True),
    (b"+OK\r\n-", True),  # the read ends where the error starts
    (b"+OK\n-ERR\r\n", False),  # a bare newline is no line end
    (b"+OK\r-ERR\r\n", False),
    (b"\r\n-", True),
    (b"-" * 10, True),
    (b"$5\r\n-----\r\n", True),  # a value's dash after its header's line end: counted, then walked
])
def test_a_dash_at_the_start_or_after_a_line_end(may_hold_error, data: bytes, expected: bool) -> None:
    assert may_hold_error(data) is expected


def test_every_reply_shape_alone_and_after_others(may_hold_error) -> None:
    for _name, enc, _is_push in REPLIES:
        is_error = enc.startswith(b"-")
        assert may_hold_error(enc) is (is_error or b"\r\n-" in enc)
        assert may_hold_error(b"+OK\r\n" + enc) is (is_error or b"\r\n-" in enc)


@pytest.mark.parametrize("seed", range(5))
def test_random_reads_as_the_pure_twin(may_hold_error, seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(2000):
        data = bytes(rng.choice(b"-\r\nab$:1") for _ in range(rng.randrange(0, 24)))
        assert may_hold_error(data) is (data[:1] == b"-" or data.find(b"\r\n-") >= 0)


def test_needs_bytes(may_hold_error) -> None:
    for bad in (None, "-ERR"):
        with pytest.raises(TypeError):
            may_hold_error(bad)


@pytest.fixture(params=["pure", "compiled"])
def line_dash(request):
    return replies.pure_line_dash if request.param == "pure" else compiled_replies("line_dash")


@pytest.mark.parametrize("data", [
    b"", b"-", b"\n", b"\n-", b"-\n-", b"$-1\r\n", b"$-1\r\n$-1\r\n", b"$-1\r\n-MOVED 1 h:1\r\n",
    b"+OK\r\n-ERR x\r\n:-1\r\n-ASK 2 h:2\r\n", b"\n\n--\n-", b"$5\r\n-----\r\n",
])
def test_a_line_feed_then_a_dash_from_every_position(line_dash, data: bytes) -> None:
    for pos in range(len(data) + 2):
        assert line_dash(data, pos) == data.find(b"\n-", pos), pos


@pytest.mark.parametrize("seed", range(5))
def test_line_dash_on_random_reads_as_find(line_dash, seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(2000):
        data = bytes(rng.choice(b"-\r\n$1x") for _ in range(rng.randrange(0, 40)))
        pos = rng.randrange(0, len(data) + 2)
        assert line_dash(data, pos) == data.find(b"\n-", pos)


def test_line_dash_needs_bytes(line_dash) -> None:
    for bad in (None, "\n-"):
        with pytest.raises(TypeError):
            line_dash(bad, 0)


@pytest.fixture(params=["pure", "compiled"])
def error_among(request):
    return replies.pure_error_among if request.param == "pure" else compiled_replies("error_among")


def bulk(value: bytes) -> bytes:
    return b"$%d\r\n%s\r\n" % (len(value), value)


PEM = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


@pytest.mark.parametrize("data, count, expected", [
    (b"", 3, False),
    (b"-ERR x\r\n", 1, True),
    (b"$-1\r\n-ERR x\r\n", 1, False),  # the error is the second reply
    (b"$-1\r\n-ERR x\r\n", 2, True),
    (bulk(PEM) + b"+OK\r\n", 2, False),  # lines of a value that start with '-'
    (bulk(PEM) + b"-MOVED 1 127.0.0.1:7000\r\n", 2, True),
    (bulk(PEM) + b"-MOVED 1 127.0.0.1:7000\r\n", 1, False),
    (bulk(b"a\r\n- b\r\n- c") + b":-1\r\n*2\r\n$1\r\nx\r\n:-2\r\n", 3, False),
    (b"*2\r\n-ERR inside an array\r\n:1\r\n", 1, False),  # an element, not a reply
    (bulk(PEM)[:20], 4, False),  # the read ends inside the first reply
    (b"+OK\r\n" + bulk(PEM)[:30], 4, False),
    (b">2\r\n$7\r\nmessage\r\n$1\r\nx\r\n+OK\r\n", 1, True),  # a push among them: not told apart
])
def test_an_error_reply_among_the_next_replies(error_among, data: bytes, count: int, expected: bool) -> None:
    assert error_among(data, 0, count) is expected
    assert error_among(b"+OK\r\n" + data, 5, count) is expected  # from a reply's start inside the read


@pytest.mark.parametrize("seed", range(5))
def test_error_among_random_replies(error_among, seed: int) -> None:
    """Replies of every shape of the splitter's table (no pushes) and values that hold lines
    starting with '-', against what is known of them: whether one of the first `count` from a
    random one is an error reply."""
    rng = random.Random(seed)
    shapes = [enc for _name, enc, is_push in REPLIES if not is_push and not enc.startswith((b">", b"|"))]
    shapes += [bulk(PEM), bulk(b"x\n-y"), b"$-1\r\n", b":-5\r\n"]
    for _ in range(300):
        chosen = [rng.choice(shapes) for _ in range(rng.randrange(1, 8))]
        first = rng.randrange(len(chosen))
        count = rng.randrange(0, len(chosen) - first + 2)
        data = b"".join(chosen)
        start = len(b"".join(chosen[:first]))
        expected = any(enc.startswith(b"-") for enc in chosen[first:first + count])
        assert error_among(data, start, count) is expected


def test_error_among_needs_bytes(error_among) -> None:
    with pytest.raises(TypeError):
        error_among(None, 0, 1)

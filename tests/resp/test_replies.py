"""Table and property tests for proxy.resp.replies.ReplySplitter: each reply
fed all at once, one byte at a time and with trailing data; pipelines cut by
`want`; random nested replies cut at random chunk boundaries.  Every test runs
against both implementations (the pure class, the reference, and the compiled
twin when built), and a differential fuzz feeds both the same random valid and
corrupted streams call by call."""

from __future__ import annotations

import os
import random
import re

import pytest

from proxy.resp import replies
from proxy.resp.replies import ReplyStreamError


def _compiled_class() -> type:
    if replies._compiled is None:
        why = (
            "REDIS_GUARD_PURE_PYTHON is set"
            if replies.compiled.PURE
            else "proxy/resp/_compiled_replies is not built (cythonize -i -3 proxy/resp/_compiled_replies.pyx)"
        )
        if os.environ.get("REDIS_GUARD_EXPECT_COMPILED") == "1":
            pytest.fail(f"compiled ReplySplitter expected (REDIS_GUARD_EXPECT_COMPILED=1) but missing: {why}")
        pytest.skip(f"compiled ReplySplitter unavailable: {why}")
    return replies._compiled.ReplySplitter


@pytest.fixture(params=["pure", "compiled"])
def Splitter(request: pytest.FixtureRequest) -> type:
    """The ReplySplitter class under test: the pure reference, then the compiled twin."""
    return replies.PureReplySplitter if request.param == "pure" else _compiled_class()


@pytest.fixture
def Compiled() -> type:
    return _compiled_class()

# (id, encoding, is_push).  Each encoding is exactly one reply (attribute
# prefix included) or one top-level push.
REPLIES = [
    ("simple", b"+OK\r\n", False),
    ("simple-empty", b"+\r\n", False),
    ("error", b"-ERR unknown command 'FOO'\r\n", False),
    ("integer", b":1\r\n", False),
    ("integer-neg", b":-9223372036854775808\r\n", False),
    ("bulk", b"$3\r\nbar\r\n", False),
    ("bulk-empty", b"$0\r\n\r\n", False),
    ("bulk-crlf-inside", b"$4\r\n\r\n\r\n\r\n", False),
    ("bulk-2digit", b"$12\r\nhello world!\r\n", False),
    ("bulk-3digit", b"$100\r\n" + b"x" * 100 + b"\r\n", False),
    ("bulk-5digit", b"$12345\r\n" + b"\n" * 12345 + b"\r\n", False),
    ("bulk-binary", b"$5\r\n*\x00$\r\n\r\n", False),
    ("bulk-null", b"$-1\r\n", False),
    ("array-null", b"*-1\r\n", False),
    ("array-empty", b"*0\r\n", False),
    ("array", b"*2\r\n$3\r\nfoo\r\n:7\r\n", False),
    ("array-nested", b"*2\r\n*2\r\n+a\r\n*0\r\n*1\r\n*1\r\n$-1\r\n", False),
    ("array-deep", b"*1\r\n" * 200 + b":1\r\n", False),
    ("array-big-count", b"*12\r\n" + b":1\r\n" * 12, False),
    ("null3", b"_\r\n", False),
    ("bool", b"#t\r\n", False),
    ("double", b",3.14\r\n", False),
    ("double-inf", b",-inf\r\n", False),
    ("bignum", b"(3492890328409238509324850943850943825024385\r\n", False),
    ("blob-error", b"!21\r\nSYNTAX invalid syntax\r\n", False),
    ("verbatim", b"=15\r\ntxt:Some string\r\n", False),
    ("map", b"%2\r\n+first\r\n:1\r\n+second\r\n:2\r\n", False),
    ("map-empty", b"%0\r\n", False),
    ("set", b"~3\r\n+a\r\n+b\r\n+c\r\n", False),
    ("set-empty", b"~0\r\n", False),
    ("map-of-arrays", b"%1\r\n$1\r\nk\r\n*2\r\n%1\r\n+a\r\n_\r\n~1\r\n#f\r\n", False),
    ("attr-before-reply", b"|1\r\n+key-popularity\r\n%2\r\n$1\r\na\r\n,0.19\r\n$1\r\nb\r\n,0.05\r\n*2\r\n:2039123\r\n:9543892\r\n", False),
    ("attr-empty", b"|0\r\n+OK\r\n", False),
    ("attr-twice", b"|1\r\n+a\r\n:1\r\n|1\r\n+b\r\n:2\r\n$1\r\nx\r\n", False),
    ("attr-nested", b"*2\r\n|1\r\n+ttl\r\n:3600\r\n:1\r\n:2\r\n", False),
    ("attr-on-aggregate-elem", b"*1\r\n|1\r\n+a\r\n*1\r\n|0\r\n:1\r\n:5\r\n", False),
    ("push", b">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$5\r\nhello\r\n", True),
    ("push-invalidate", b">2\r\n$10\r\ninvalidate\r\n*1\r\n$3\r\nkey\r\n", True),
    ("push-empty", b">0\r\n", True),
    ("push-nested-gt", b"*1\r\n>1\r\n:1\r\n", False),  # only a top-level '>' is a push
]
IDS = [r[0] for r in REPLIES]
TRAILING = b"+NEXT\r\n:2\r\n"


def _expect(is_push: bool) -> tuple[int, int]:
    return (0, 1) if is_push else (1, 0)


@pytest.mark.parametrize("enc,is_push", [r[1:] for r in REPLIES], ids=IDS)
def test_one_reply_at_a_time_cuts_as_the_general_loop(Splitter: type, enc: bytes, is_push: bool) -> None:
    """scan(want=1) has a shortcut for a short bulk or a line whole in the chunk: after any
    prefix, cut at any point, it consumes what the general loop (want=2 over the same bytes,
    one reply in them) consumes, and leaves the same state."""
    for prefix in (b"", b"junk", TRAILING):
        data = prefix + enc + TRAILING
        for cut in range(len(prefix), len(prefix) + len(enc) + 1):
            one, general = Splitter(), Splitter()
            got = one.scan(data[:cut], len(prefix), 1)
            assert got == general.scan(data[:cut], len(prefix), 2 if not is_push else 1), cut
            assert one.in_reply == general.in_reply
            if got[0] == cut and cut < len(data):  # the rest continues alike
                assert one.scan(data, cut, 1) == general.scan(data, cut, 1)


@pytest.mark.parametrize("enc,is_push", [r[1:] for r in REPLIES], ids=IDS)
def test_all_at_once(Splitter: type, enc: bytes, is_push: bool) -> None:
    sp = Splitter()
    assert sp.scan(enc, 0, 1) == (len(enc), *_expect(is_push))
    assert not sp.in_reply
    # A non-zero start behaves the same.
    sp = Splitter()
    assert sp.scan(b"junk" + enc, 4, 1) == (len(enc) + 4, *_expect(is_push))


@pytest.mark.parametrize("enc,is_push", [r[1:] for r in REPLIES], ids=IDS)
def test_one_byte_at_a_time(Splitter: type, enc: bytes, is_push: bool) -> None:
    sp = Splitter()
    for i in range(len(enc) - 1):
        assert sp.scan(enc[i : i + 1], 0, 1) == (1, 0, 0), i
        assert sp.in_reply
    assert sp.scan(enc[-1:], 0, 1) == (1, *_expect(is_push))
    assert not sp.in_reply


@pytest.mark.parametrize("enc,is_push", [r[1:] for r in REPLIES], ids=IDS)
def test_with_trailing_data(Splitter: type, enc: bytes, is_push: bool) -> None:
    sp = Splitter()
    data = enc + TRAILING
    if is_push:
        # A push is consumed on the way to the reply that follows it.
        assert sp.scan(data, 0, 1) == (len(enc) + 7, 1, 1)
    else:
        assert sp.scan(data, 0, 1) == (len(enc), 1, 0)
        assert sp.scan(data, len(enc), 1) == (len(enc) + 7, 1, 0)
    assert sp.scan(data, len(data) - 4, 5) == (len(data), 1, 0)


def _segments(units: list[tuple[bytes, bool]]) -> list[tuple[bytes, int]]:
    """What scan(want=1) consumes each time: any pushes, then one reply."""
    out: list[tuple[bytes, int]] = []
    acc, pushes = b"", 0
    for enc, is_push in units:
        acc += enc
        if is_push:
            pushes += 1
        else:
            out.append((acc, pushes))
            acc, pushes = b"", 0
    if acc:
        out.append((acc, pushes))  # trailing pushes, no reply
    return out


def _split_all(Splitter: type, chunks: list[bytes], want: int = 1) -> list[tuple[int, int, int]]:
    """Feed chunks; return (absolute end, done, pushes) of every scan call."""
    sp = Splitter()
    base = 0
    calls = []
    for chunk in chunks:
        pos = 0
        while pos < len(chunk):
            end, done, pushes = sp.scan(chunk, pos, want)
            assert pos < end <= len(chunk)
            calls.append((base + end, done, pushes))
            pos = end
        base += len(chunk)
    assert not sp.in_reply
    return calls


def _boundaries(calls: list[tuple[int, int, int]]) -> tuple[list[int], int]:
    ends = [end for end, done, _ in calls if done]
    return ends, sum(p for _, _, p in calls)


def _expected(units: list[tuple[bytes, bool]]) -> tuple[list[int], int]:
    ends, off = [], 0
    for seg, _ in _segments(units):
        off += len(seg)
        ends.append(off)
    if units and units[-1][1]:
        ends.pop()  # trailing pushes end no reply
    return ends, sum(1 for _, p in units if p)


def test_pipeline_with_want_limits(Splitter: type) -> None:
    units = [(enc, p) for _, enc, p in REPLIES]
    data = b"".join(enc for enc, _ in units)
    segments = _segments(units)
    for want in (1, 2, 3, 7, 100):
        sp = Splitter()
        pos, i = 0, 0
        while pos < len(data):
            end, done, pushes = sp.scan(data, pos, want)
            # The bytes up to `end` are exactly the next `done` segments.
            group = segments[i : i + max(done, 1)]
            assert data[pos:end] == b"".join(s for s, _ in group)
            assert pushes == sum(p for _, p in group)
            assert done == min(want, sum(1 for u in units if not u[1]) - sum(1 for s in segments[:i]))
            i += len(group)
            pos = end
        assert i == len(segments)


def test_pipeline_one_byte_at_a_time(Splitter: type) -> None:
    units = [(enc, p) for _, enc, p in REPLIES]
    data = b"".join(enc for enc, _ in units)
    calls = _split_all(Splitter, [data[i : i + 1] for i in range(len(data))])
    assert _boundaries(calls) == _expected(units)


def test_stops_at_want_before_a_push(Splitter: type) -> None:
    push = b">2\r\n$7\r\nmessage\r\n:1\r\n"
    data = b"+A\r\n" + push + b"+B\r\n" + push
    sp = Splitter()
    assert sp.scan(data, 0, 1) == (4, 1, 0)
    assert sp.scan(data, 4, 1) == (4 + len(push) + 4, 1, 1)
    assert sp.scan(data, 8 + len(push), 1) == (len(data), 0, 1)
    assert sp.scan(data, 0, 0) == (0, 0, 0)


def test_cut_is_scan_with_the_bytes_it_consumed(Splitter: type) -> None:
    units = [(enc, p) for _, enc, p in REPLIES]
    data = b"".join(enc for enc, _ in units)
    for want in (1, 2, 7, 100):
        scanning, cutting = Splitter(), Splitter()
        pos = 0
        while pos < len(data):
            end, done, _pushes = scanning.scan(data, pos, want)
            piece, cut_end, cut_done = cutting.cut(data, pos, want)
            assert (piece, cut_end, cut_done) == (data[pos:end], end, done)
            assert type(piece) is bytes
            pos = end
    whole = b"+OK\r\n:1\r\n"
    piece, end, done = Splitter().cut(whole, 0, 2)
    assert piece is whole and (end, done) == (len(whole), 2)  # a read that is all one entry's: not copied
    assert Splitter().cut(whole, 0, 1)[0] == b"+OK\r\n"
    assert Splitter().cut(whole, 5, 0) == (b"", 5, 0)
    half = Splitter()
    assert half.cut(b"$5\r\nhel", 0, 1) == (b"$5\r\nhel", 7, 0)  # a partial reply: consumed, kept
    assert half.cut(b"lo\r\n+OK\r\n", 0, 1) == (b"lo\r\n", 4, 1)
    with pytest.raises(TypeError):
        Splitter().cut(bytearray(whole), 0, 1)


def test_take_is_cut_with_the_bytes_alone_when_all_the_replies_are_there(Splitter: type) -> None:
    units = [(enc, p) for _, enc, p in REPLIES]
    data = b"".join(enc for enc, _ in units)
    for want in (1, 2, 7, 100):
        for step in (len(data), 5, 1):  # whole, and in chunks that end inside replies
            cutting, taking = Splitter(), Splitter()
            for at in range(0, len(data), step):
                chunk, pos = data[at:at + step], 0
                while pos < len(chunk):
                    piece, end, done = cutting.cut(chunk, pos, want)
                    taken = taking.take(chunk, pos, want)
                    assert taken == (piece if done == want else (piece, done))
                    assert type(taken if done == want else taken[0]) is bytes
                    pos = end
    whole = b"+OK\r\n:1\r\n"
    assert Splitter().take(whole, 0, 2) is whole  # a read that is all one entry's: not copied
    assert Splitter().take(whole, 0, 1) == b"+OK\r\n"
    assert Splitter().take(whole, 0, 3) == (whole, 2)
    assert Splitter().take(whole, 5, 0) == b""
    assert Splitter().take(whole, 5, -1) == (b"", 0)
    half = Splitter()
    assert half.take(b"$5\r\nhel", 0, 1) == (b"$5\r\nhel", 0)  # a partial reply: consumed, kept
    assert half.take(b"lo\r\n+OK\r\n", 0, 1) == b"lo\r\n"
    with pytest.raises(TypeError):
        Splitter().take(bytearray(whole), 0, 1)


# ---- random nested replies


def _random_value(rng: random.Random, depth: int) -> bytes:
    kinds = ["+", "-", ":", "$", "_", "#", ",", "(", "!", "=", "$-1", "*-1"]
    if depth < 4:
        kinds += ["*", "%", "~", "|", "*", "*"]
    kind = rng.choice(kinds)
    if kind in "+-":
        return kind.encode() + bytes(rng.choice(b"abc xyz:+-$*") for _ in range(rng.randrange(12))) + b"\r\n"
    if kind in ":(":
        return kind.encode() + str(rng.randrange(-(10**20), 10**20)).encode() + b"\r\n"
    if kind in ("_", "#", ","):
        return {"_": b"_\r\n", "#": b"#f\r\n", ",": b",1.5e-3\r\n"}[kind]
    if kind in ("$-1", "*-1"):
        return kind.encode() + b"\r\n"
    if kind in "$!=":
        size = rng.choice([0, 1, 2, 9, 10, 11, 99, 100, rng.randrange(3000)])
        body = bytes(rng.choice(b"\r\n$*+:0123ab") for _ in range(size))
        return b"%s%d\r\n%s\r\n" % (kind.encode(), size, body)
    n = rng.choice([0, 1, 2, 3, rng.randrange(12)])
    elems = [_random_value(rng, depth + 1) for _ in range(2 * n if kind in "%|" else n)]
    head = b"%s%d\r\n" % (kind.encode(), n) + b"".join(elems)
    if kind == "|":
        # An attribute is a prefix: it needs the value it describes.
        return head + _random_value(rng, depth + 1)
    return head


def _random_units(rng: random.Random, count: int) -> list[tuple[bytes, bool]]:
    units = []
    for _ in range(count):
        if rng.random() < 0.15:
            n = rng.randrange(4)
            units.append((b">%d\r\n" % n + b"".join(_random_value(rng, 1) for _ in range(n)), True))
        else:
            units.append((_random_value(rng, 0), False))
    return units


def _random_chunks(rng: random.Random, data: bytes) -> list[bytes]:
    chunks, i = [], 0
    while i < len(data):
        step = rng.choice([1, 2, 3, 5, 8, 64, 1000, rng.randrange(1, 5000)])
        chunks.append(data[i : i + step])
        i += step
    return chunks


@pytest.mark.parametrize("seed", range(40))
def test_random_replies_random_chunks(Splitter: type, seed: int) -> None:
    rng = random.Random(seed)
    units = _random_units(rng, rng.randrange(1, 60))
    data = b"".join(enc for enc, _ in units)
    expected = _expected(units)
    assert _boundaries(_split_all(Splitter, _random_chunks(rng, data))) == expected
    assert _boundaries(_split_all(Splitter, [data])) == expected
    # A large `want` counts the same replies in far fewer calls.
    calls = _split_all(Splitter, _random_chunks(rng, data), want=1 << 30)
    assert sum(d for _, d, _ in calls) == len(expected[0])
    assert sum(p for _, _, p in calls) == expected[1]


# ---- long replies across chunks


def test_big_bulk_across_chunks(Splitter: type) -> None:
    body = bytes(range(256)) * 4096  # 1 MiB, full of CR and LF
    data = b"$%d\r\n%s\r\n+OK\r\n" % (len(body), body)
    sp = Splitter()
    chunk = 64 * 1024
    done_at = None
    for off in range(0, len(data), chunk):
        end, done, _ = sp.scan(data[off : off + chunk], 0, 1)
        if done and done_at is None:
            done_at = off + end
            assert sp.scan(data[off : off + chunk], end, 1) == (min(chunk, len(data) - off), 1, 0)
            break
        assert (end, done) == (min(chunk, len(data) - off), 0)
        assert sp.in_reply
    assert done_at == len(data) - 5


@pytest.mark.parametrize("cut", range(1, 8))
def test_header_cut_anywhere(Splitter: type, cut: int) -> None:
    data = b"$12\r\nhello world!\r\n*-1\r\n"
    sp = Splitter()
    assert sp.scan(data[:cut], 0, 5) == (cut, 0, 0)
    assert sp.in_reply
    assert sp.scan(data[cut:], 0, 5) == (len(data) - cut, 2, 0)


def test_huge_array_in_many_chunks(Splitter: type) -> None:
    count = 200_000
    data = b"*%d\r\n" % count + b"$3\r\nbar\r\n" * (count - 1) + b":1\r\n+OK\r\n"
    sp = Splitter()
    total = 0
    for off in range(0, len(data), 4093):  # odd size: cuts headers and bodies
        chunk = data[off : off + 4093]
        end, done, _ = sp.scan(chunk, 0, 1)
        total += done
        if done:
            assert off + end == len(data) - 5
            break
    assert total == 1


# ---- not RESP

BAD = [
    ("unknown-type", b"?x\r\n"),
    ("unknown-type-in-array", b"*2\r\n:1\r\nhello\r\n"),
    ("bulk-letters", b"$abc\r\n"),
    ("bulk-neg", b"$-2\r\n"),
    ("bulk-plus", b"$+3\r\nfoo\r\n"),
    ("bulk-lf-only", b"$3\nfoo\r\n"),
    ("bulk-empty-len", b"$\r\n"),
    ("bulk-no-crlf", b"$3\r\nfooXY"),
    ("bulk-long-no-crlf", b"$123\r\n" + b"x" * 123 + b"XY"),
    ("array-letters", b"*x\r\n"),
    ("map-null", b"%-1\r\n"),
    ("verbatim-null", b"=-1\r\n"),
    ("streamed-bulk", b"$?\r\n;4\r\nHell\r\n;0\r\n"),
    ("streamed-array", b"*?\r\n:1\r\n.\r\n"),
    ("header-too-long", b"$" + b"1" * 40),
]


@pytest.mark.parametrize("want", [1, 5])
@pytest.mark.parametrize("data", [b[1] for b in BAD], ids=[b[0] for b in BAD])
def test_not_resp(Splitter: type, data: bytes, want: int) -> None:
    with pytest.raises(ReplyStreamError):
        Splitter().scan(data, 0, want)
    sp = Splitter()
    with pytest.raises(ReplyStreamError):
        for i in range(len(data)):
            sp.scan(data[i : i + 1], 0, want)


def test_needs_bytes(Splitter: type) -> None:
    with pytest.raises(TypeError):
        Splitter().scan(bytearray(b"+OK\r\n"), 0, 1)


def test_streamed_error_names_the_problem(Splitter: type) -> None:
    with pytest.raises(ReplyStreamError, match="streamed"):
        Splitter().scan(b"$?\r\n", 0, 1)


# ---- what a length or count may look like (the compiled parse must accept what the tables do)

HEADERS = [
    # (id, data, scan(data, 0, 5) or the start of the error message)
    ("bulk-leading-zero", b"$03\r\nabc\r\n", (10, 1, 0)),
    ("bulk-zeros-only", b"$00\r\n\r\n", (7, 1, 0)),
    ("bulk-many-zeros", b"$" + b"0" * 40 + b"3\r\nabc\r\n", (49, 1, 0)),
    ("verbatim-leading-zero", b"=03\r\nabc\r\n", (10, 1, 0)),
    ("array-leading-zero", b"*02\r\n:1\r\n:2\r\n", (13, 1, 0)),
    ("array-big-count", b"*10000\r\n" + b":1\r\n" * 10000, (8 + 40000, 1, 0)),
    ("bulk-null", b"$-1\r\n", (5, 1, 0)),
    ("array-null", b"*-1\r\n", (5, 1, 0)),
    ("set-zero", b"~00\r\n", (5, 1, 0)),
    ("bulk-huge", b"$" + b"9" * 30 + b"\r\nabc", (36, 0, 0)),  # waits for its body, forever
    ("array-huge", b"*" + b"9" * 30 + b"\r\n:1\r\n", (37, 0, 0)),
    ("map-huge", b"%" + b"9" * 19 + b"\r\n:1\r\n", (26, 0, 0)),
    ("bulk-minus-two", b"$-2\r\n", "malformed RESP header b'$-2\\r\\n' at offset 0"),
    ("bulk-minus-zero", b"$-0\r\n", "malformed RESP header"),
    ("bulk-minus-01", b"$-01\r\n", "malformed RESP header"),
    ("bulk-plus", b"$+3\r\nabc\r\n", "malformed RESP header b'$+3\\r\\n'"),
    ("bulk-space", b"$ 3\r\nabc\r\n", "malformed RESP header"),
    ("bulk-trailing-space", b"$3 \r\nabc\r\n", "malformed RESP header"),
    ("bulk-double-cr", b"$3\r\r\nabc\r\n", "malformed RESP header"),
    ("bulk-lf-only", b"$3\nabc\r\n", "malformed RESP header b'$3\\n'"),
    ("bulk-empty", b"$\r\n", "malformed RESP header"),
    ("bulk-minus-only", b"$-\r\n", "malformed RESP header"),
    ("bulk-non-ascii-digit", "$\u0663\r\n".encode(), "malformed RESP header"),
    ("verbatim-null", b"=-1\r\n", "malformed RESP header b'=-1\\r\\n'"),
    ("blob-error-null", b"!-1\r\n", "malformed RESP header"),
    ("set-null", b"~-1\r\n", "malformed RESP header"),
    ("map-null", b"%-1\r\n", "malformed RESP header"),
    ("attr-null", b"|-1\r\n", "malformed RESP header"),
    ("push-null", b">-1\r\n", "malformed RESP header"),
    ("array-minus-two", b"*-2\r\n", "malformed RESP header"),
    ("array-long-line", b"*1x" + b"y" * 60 + b"\r\n", "malformed RESP header b'*1xyyyy"),
    ("streamed-long", b"$?" + b"z" * 60 + b"\r\n", "streamed RESP3 type b'$?" + "z" * 60 + "\\r\\n' is not"),
    ("bulk-no-lf", b"$3\r\nabc\rX", "bulk body not followed by CRLF"),
    ("bulk-cr-not-checked", b"$3\r\nabcX\n", (9, 1, 0)),  # only the LF is checked, as in the pure class
    ("unknown", b":1\r\n@x\r\n", "unknown RESP type byte b'@' at offset 4"),
    ("header-too-long", b"*" + b"1" * 32, "header line too long: b'*1111"),
    ("header-at-limit", b"*" + b"1" * 31, (32, 0, 0)),
]


@pytest.mark.parametrize("data,expected", [h[1:] for h in HEADERS], ids=[h[0] for h in HEADERS])
def test_header_forms(Splitter: type, data: bytes, expected: tuple[int, int, int] | str) -> None:
    for prefix in (b"", b"+OK\r\n"):
        if isinstance(expected, tuple):
            end, done, pushes = expected
            assert Splitter().scan(prefix + data, len(prefix), 5) == (end + len(prefix), done, pushes)
        else:
            with pytest.raises(ReplyStreamError) as err:
                Splitter().scan(prefix + data, len(prefix), 5)
            shifted = re.sub(r"at offset (\d+)", lambda m, shift=len(prefix): f"at offset {int(m[1]) + shift}", expected)
            assert str(err.value).startswith(shifted), str(err.value)


def test_header_reassembled_across_chunks_reports_offset_in_its_line(Splitter: type) -> None:
    # The pure class scans a header cut by a chunk end as a line of its own: offsets are in it.
    sp = Splitter()
    assert sp.scan(b"+OK\r\n$-", 0, 5) == (7, 1, 0)
    with pytest.raises(ReplyStreamError, match=r"^malformed RESP header b'\$-2\\r\\n' at offset 0$"):
        sp.scan(b"2\r\n", 0, 5)


def test_huge_length_keeps_waiting(Splitter: type) -> None:
    sp = Splitter()
    assert sp.scan(b"$" + b"9" * 25 + b"\r\n", 0, 1) == (28, 0, 0)
    for _ in range(3):
        assert sp.scan(b"x" * 65536, 0, 1) == (65536, 0, 0)
        assert sp.in_reply


def test_deep_nesting_needs_no_recursion(Splitter: type) -> None:
    depth = 100_000
    data = b"*1\r\n" * depth + b"%1\r\n|1\r\n+a\r\n:1\r\n+k\r\n" + b">1\r\n:1\r\n"
    sp = Splitter()
    assert sp.scan(data, 0, 1) == (len(data), 1, 0)
    assert not sp.in_reply
    calls = _split_all(Splitter, [data[i : i + 7] for i in range(0, len(data), 7)])
    assert _boundaries(calls) == ([len(data)], 0)


def test_non_bytes_message(Splitter: type) -> None:
    with pytest.raises(TypeError, match="^ReplySplitter.scan needs bytes, not memoryview$"):
        Splitter().scan(memoryview(b"+OK\r\n"), 0, 1)
    assert Splitter().scan(b"+OK\r\n", 3, 0) == (3, 0, 0)


@pytest.mark.parametrize("start", [-1, 6, 1 << 40])
def test_compiled_refuses_start_out_of_range(Compiled: type, start: int) -> None:
    # The pure class would index from the end (or past it); C must not read outside the buffer.
    with pytest.raises(IndexError):
        Compiled().scan(b"+OK\r\n", start, 1)


# ---- differential fuzz: the compiled twin against the pure reference, call by call

_TYPE_BYTES = b"+-:$*%~|>_#,(!=?.;x\x00\r\n 0123456789"
_ODD = [
    b"$03\r\nabc\r\n", b"$+3\r\nabc\r\n", b"$-2\r\n", b"=-1\r\n", b"!-1\r\n", b"*-1\r\n", b"%-1\r\n",
    b">-1\r\n", b"|-1\r\n", b"~-1\r\n", b"$-0\r\n", b"*00\r\n", b"$?\r\n", b"*?\r\n:1\r\n.\r\n",
    b"$3\nabc\r\n", b"$3\r\nabcXY", b"$3\r\nabcX\n", b"$ 3\r\n", b"*" + b"9" * 25 + b"\r\n",
    b"%" + b"9" * 19 + b"\r\n", b"$" + b"0" * 35 + b"1\r\nx\r\n", b"|0\r\n", b">0\r\n",
    b"|1\r\n+a\r\n:1\r\n", b">1\r\n:1\r\n", b"*1\r\n>0\r\n", b"\r\n", b"\n", b"$-1\r\n", b"$0\r\n\r\n",
    b"$9\r\n", b"$99\r\n", b"$10\r\n", "$\u0663\r\n".encode(),
]


def _corrupt(rng: random.Random, data: bytes) -> bytes:
    buf = bytearray(data)
    for _ in range(rng.choice([0, 0, 0, 1, 1, 2, 4])):
        i = rng.randrange(len(buf) + 1)
        op = rng.random()
        if op < 0.3 and i < len(buf):  # a flipped byte, most often to one that means something
            buf[i] = rng.choice(_TYPE_BYTES) if rng.random() < 0.7 else rng.randrange(256)
        elif op < 0.45:
            del buf[i : i + rng.randrange(1, 20)]
        elif op < 0.7:
            buf[i:i] = rng.choice(_ODD)
        elif op < 0.8:
            buf[i:i] = bytes([rng.choice(_TYPE_BYTES)])
        elif op < 0.9:  # a long header line, cut or not
            buf[i:i] = bytes([rng.choice(b"$*%=")]) + b"1" * rng.randrange(20, 60) + rng.choice([b"", b"\r\n"])
        else:
            del buf[i:]
    return bytes(buf)


def _call(sp: object, data: bytes, start: int, want: int) -> tuple:
    try:
        return sp.scan(data, start, want)
    except (ReplyStreamError, IndexError, TypeError) as exc:
        return (type(exc), str(exc))


@pytest.mark.parametrize("seed", range(1000))
def test_compiled_scans_as_the_pure_reference(Compiled: type, seed: int) -> None:
    """Random streams of valid replies, pushes and attributes, corrupted or not, cut into random
    chunks (some behind a prefix), scanned with random `want` by both: every call returns the
    same tuple or raises the same error with the same message, and in_reply agrees after every
    call.  After an error both go on with the next chunk: the state an error leaves is the same."""
    rng = random.Random(seed)
    units = _random_units(rng, rng.randrange(1, 25))
    if rng.random() < 0.3:
        units += [(rng.choice(_ODD), False) for _ in range(rng.randrange(1, 4))]
        rng.shuffle(units)
    stream = b"".join(enc for enc, _ in units)
    if rng.random() < 0.6:
        stream = _corrupt(rng, stream)
    if rng.random() < 0.15:  # a header that never ends, cut over chunks: too long, or not yet
        stream += bytes([rng.choice(b"$*%=")]) + b"1" * rng.randrange(20, 60)
    pure, compiled = replies.PureReplySplitter(), Compiled()
    log = []
    for chunk in _random_chunks(rng, stream):
        prefix = bytes(rng.choice(_TYPE_BYTES) for _ in range(rng.randrange(5))) if rng.random() < 0.2 else b""
        data = prefix + chunk
        pos = len(prefix)
        while pos < len(data):
            want = rng.choice([1, 1, 1, 1, 2, 3, 7, 1 << 30, 0, -1])
            expected = _call(pure, data, pos, want)
            got = _call(compiled, data, pos, want)
            log.append((data, pos, want, expected))
            assert got == expected, log[-5:]
            assert compiled.in_reply == pure.in_reply, log[-5:]
            if len(expected) == 2:
                break  # an error: on to the next chunk
            if want > 0:
                assert expected[0] > pos
                pos = expected[0]

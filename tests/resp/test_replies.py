"""Table and property tests for proxy.resp.replies.ReplySplitter: each reply
fed all at once, one byte at a time and with trailing data; pipelines cut by
`want`; random nested replies cut at random chunk boundaries."""

from __future__ import annotations

import random

import pytest

from proxy.resp.replies import ReplySplitter, ReplyStreamError

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
def test_one_reply_at_a_time_cuts_as_the_general_loop(enc: bytes, is_push: bool) -> None:
    """scan(want=1) has a shortcut for a short bulk or a line whole in the chunk: after any
    prefix, cut at any point, it consumes what the general loop (want=2 over the same bytes,
    one reply in them) consumes, and leaves the same state."""
    for prefix in (b"", b"junk", TRAILING):
        data = prefix + enc + TRAILING
        for cut in range(len(prefix), len(prefix) + len(enc) + 1):
            one, general = ReplySplitter(), ReplySplitter()
            got = one.scan(data[:cut], len(prefix), 1)
            assert got == general.scan(data[:cut], len(prefix), 2 if not is_push else 1), cut
            assert one.in_reply == general.in_reply
            if got[0] == cut and cut < len(data):  # the rest continues alike
                assert one.scan(data, cut, 1) == general.scan(data, cut, 1)


@pytest.mark.parametrize("enc,is_push", [r[1:] for r in REPLIES], ids=IDS)
def test_all_at_once(enc: bytes, is_push: bool) -> None:
    sp = ReplySplitter()
    assert sp.scan(enc, 0, 1) == (len(enc), *_expect(is_push))
    assert not sp.in_reply
    # A non-zero start behaves the same.
    sp = ReplySplitter()
    assert sp.scan(b"junk" + enc, 4, 1) == (len(enc) + 4, *_expect(is_push))


@pytest.mark.parametrize("enc,is_push", [r[1:] for r in REPLIES], ids=IDS)
def test_one_byte_at_a_time(enc: bytes, is_push: bool) -> None:
    sp = ReplySplitter()
    for i in range(len(enc) - 1):
        assert sp.scan(enc[i : i + 1], 0, 1) == (1, 0, 0), i
        assert sp.in_reply
    assert sp.scan(enc[-1:], 0, 1) == (1, *_expect(is_push))
    assert not sp.in_reply


@pytest.mark.parametrize("enc,is_push", [r[1:] for r in REPLIES], ids=IDS)
def test_with_trailing_data(enc: bytes, is_push: bool) -> None:
    sp = ReplySplitter()
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


def _split_all(chunks: list[bytes], want: int = 1) -> list[tuple[int, int, int]]:
    """Feed chunks; return (absolute end, done, pushes) of every scan call."""
    sp = ReplySplitter()
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


def test_pipeline_with_want_limits() -> None:
    units = [(enc, p) for _, enc, p in REPLIES]
    data = b"".join(enc for enc, _ in units)
    segments = _segments(units)
    for want in (1, 2, 3, 7, 100):
        sp = ReplySplitter()
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


def test_pipeline_one_byte_at_a_time() -> None:
    units = [(enc, p) for _, enc, p in REPLIES]
    data = b"".join(enc for enc, _ in units)
    calls = _split_all([data[i : i + 1] for i in range(len(data))])
    assert _boundaries(calls) == _expected(units)


def test_stops_at_want_before_a_push() -> None:
    push = b">2\r\n$7\r\nmessage\r\n:1\r\n"
    data = b"+A\r\n" + push + b"+B\r\n" + push
    sp = ReplySplitter()
    assert sp.scan(data, 0, 1) == (4, 1, 0)
    assert sp.scan(data, 4, 1) == (4 + len(push) + 4, 1, 1)
    assert sp.scan(data, 8 + len(push), 1) == (len(data), 0, 1)
    assert sp.scan(data, 0, 0) == (0, 0, 0)


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
def test_random_replies_random_chunks(seed: int) -> None:
    rng = random.Random(seed)
    units = _random_units(rng, rng.randrange(1, 60))
    data = b"".join(enc for enc, _ in units)
    expected = _expected(units)
    assert _boundaries(_split_all(_random_chunks(rng, data))) == expected
    assert _boundaries(_split_all([data])) == expected
    # A large `want` counts the same replies in far fewer calls.
    calls = _split_all(_random_chunks(rng, data), want=1 << 30)
    assert sum(d for _, d, _ in calls) == len(expected[0])
    assert sum(p for _, _, p in calls) == expected[1]


# ---- long replies across chunks


def test_big_bulk_across_chunks() -> None:
    body = bytes(range(256)) * 4096  # 1 MiB, full of CR and LF
    data = b"$%d\r\n%s\r\n+OK\r\n" % (len(body), body)
    sp = ReplySplitter()
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
def test_header_cut_anywhere(cut: int) -> None:
    data = b"$12\r\nhello world!\r\n*-1\r\n"
    sp = ReplySplitter()
    assert sp.scan(data[:cut], 0, 5) == (cut, 0, 0)
    assert sp.in_reply
    assert sp.scan(data[cut:], 0, 5) == (len(data) - cut, 2, 0)


def test_huge_array_in_many_chunks() -> None:
    count = 200_000
    data = b"*%d\r\n" % count + b"$3\r\nbar\r\n" * (count - 1) + b":1\r\n+OK\r\n"
    sp = ReplySplitter()
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
def test_not_resp(data: bytes, want: int) -> None:
    with pytest.raises(ReplyStreamError):
        ReplySplitter().scan(data, 0, want)
    sp = ReplySplitter()
    with pytest.raises(ReplyStreamError):
        for i in range(len(data)):
            sp.scan(data[i : i + 1], 0, want)


def test_needs_bytes() -> None:
    with pytest.raises(TypeError):
        ReplySplitter().scan(bytearray(b"+OK\r\n"), 0, 1)


def test_streamed_error_names_the_problem() -> None:
    with pytest.raises(ReplyStreamError, match="streamed"):
        ReplySplitter().scan(b"$?\r\n", 0, 1)

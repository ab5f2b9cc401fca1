"""Table tests for proxy.resp.exact: every case fed all at once, one byte at a
time and followed by trailing data.  The same table drives
test_exact_vs_redis.py, which checks each row against a real redis-server."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from proxy.resp.exact import (
    PROTO_INLINE_MAX_SIZE,
    ParseLimits,
    ProtocolError,
    parse_request,
    sdssplitargs,
    string2ll,
)

NEED = object()  # more bytes needed
SKIP: list[bytes] = []  # a request Redis silently skips


@dataclass(frozen=True)
class Err:
    message: str


@dataclass(frozen=True)
class Case:
    id: str
    data: bytes
    expect: object  # list[bytes] (complete; [] = skipped), NEED, or Err
    limits: ParseLimits = field(default_factory=ParseLimits)
    redis: bool = True  # False for the proxy's own limits, which Redis lacks

    @property
    def complete(self) -> bool:
        return isinstance(self.expect, list)


E_MBULK = Err("Protocol error: invalid multibulk length")
E_BULK = Err("Protocol error: invalid bulk length")
E_QUOTES = Err("Protocol error: unbalanced quotes in request")


def got(ch: str) -> Err:
    return Err(f"Protocol error: expected '$', got '{ch}'")


# Each complete or error row ends exactly where Redis decides: every proper
# prefix must still be "need more".
CASES = [
    # --- multibulk, well formed
    Case("mb-ping", b"*1\r\n$4\r\nPING\r\n", [b"PING"]),
    Case("mb-set", b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nhello\r\n", [b"SET", b"k", b"hello"]),
    Case("mb-empty-arg", b"*2\r\n$4\r\nECHO\r\n$0\r\n\r\n", [b"ECHO", b""]),
    Case("mb-binary", b"*2\r\n$4\r\nECHO\r\n$6\r\n\x00\r\n\n\xff*\r\n", [b"ECHO", b"\x00\r\n\n\xff*"]),
    Case("mb-nul-after-cr", b"*2\r\n$4\r\nECHO\r\n$1\r\n\x00\r\n", [b"ECHO", b"\x00"]),
    # Redis skips the byte after a header's '\r' and a bulk's two trailing
    # bytes without looking at them.
    Case("mb-count-cr-any", b"*1\rX$4\r\nPING\r\n", [b"PING"]),
    Case("mb-bulk-cr-any", b"*1\r\n$4\rXPING\r\n", [b"PING"]),
    Case("mb-trailer-any", b"*2\r\n$4\r\nECHOzz$2\r\nhi!!", [b"ECHO", b"hi"]),
    Case("mb-count-cr-cr", b"*1\r\r$4\r\nPING\r\n", [b"PING"]),
    # --- multibulk, skipped
    Case("mb-zero", b"*0\r\n", SKIP),
    Case("mb-neg", b"*-3\r\n", SKIP),
    Case("mb-neg-big", b"*-2147483649\r\n", SKIP),
    Case("mb-llong-min", b"*-9223372036854775808\r\n", SKIP),
    # --- multibulk, need more
    Case("mb-star", b"*", NEED),
    Case("mb-count-no-cr", b"*12", NEED),
    Case("mb-count-cr-only", b"*1\r", NEED),
    Case("mb-after-count", b"*2\r\n", NEED),
    Case("mb-bulk-hdr-cr", b"*1\r\n$4\r", NEED),
    Case("mb-body-partial", b"*1\r\n$4\r\nPIN", NEED),
    Case("mb-trailer-partial", b"*1\r\n$4\r\nPING\r", NEED),
    Case("mb-huge-bulk-claim", b"*1\r\n$536870912\r\n", NEED),
    Case("mb-count-intmax", b"*2147483647\r\n", NEED, ParseLimits(max_args=2**31 - 1)),
    Case("mb-second-arg", b"*2\r\n$3\r\nGET\r\n", NEED),
    # strchr stops at NUL: the '\r' after it is never seen.
    Case("mb-nul-in-count", b"*1\x00\r\n", NEED),
    Case("mb-nul-in-bulk-hdr", b"*1\r\n$\x004\r\nPING\r\n", NEED),
    # --- multibulk, errors
    Case("mb-count-letters", b"*x\r\n", E_MBULK),
    Case("mb-count-empty", b"*\r\n", E_MBULK),
    Case("mb-count-plus", b"*+1\r\n", E_MBULK),
    Case("mb-count-lead-zero", b"*01\r\n", E_MBULK),
    Case("mb-count-minus-zero", b"*-0\r\n", E_MBULK),
    Case("mb-count-minus", b"*-\r\n", E_MBULK),
    Case("mb-count-space", b"*1 \r\n", E_MBULK),
    Case("mb-count-over-intmax", b"*2147483648\r\n", E_MBULK),
    Case("mb-count-over-llong", b"*9223372036854775808\r\n", E_MBULK),
    Case("mb-count-lf-only", b"*1\n$4\r\n", E_MBULK),
    Case("mb-no-dollar", b"*3\r\n$3\r\nSET\r\n$1\r\nx\r\nfooz\r\n", got("f")),
    Case("mb-empty-hdr", b"*1\r\n\r\n", got(" ")),  # '\r' rendered as a space
    Case("mb-lf-hdr", b"*1\r\n\n\r\n", got(" ")),  # so is '\n'
    Case("mb-latin1-hdr", b"*1\r\n\xe9\r\n", got("\xe9")),
    Case("mb-star-hdr", b"*1\r\n*1\r\n", got("*")),
    Case("mb-bulk-neg1", b"*3\r\n$-1\r\n", E_BULK),
    Case("mb-bulk-neg", b"*1\r\n$-5\r\n", E_BULK),
    Case("mb-bulk-plus", b"*1\r\n$+4\r\n", E_BULK),
    Case("mb-bulk-lead-zero", b"*1\r\n$04\r\n", E_BULK),
    Case("mb-bulk-empty", b"*1\r\n$\r\n", E_BULK),
    Case("mb-bulk-letters", b"*1\r\n$abc\r\n", E_BULK),
    Case("mb-bulk-over-max", b"*1\r\n$536870913\r\n", E_BULK),
    Case("mb-bulk-second-bad", b"*2\r\n$4\r\nECHO\r\n$x\r\n", E_BULK),
    # --- inline, well formed
    Case("in-ping", b"PING\r\n", [b"PING"]),
    Case("in-lf-only", b"PING\n", [b"PING"]),
    Case("in-args", b"SET k v\r\n", [b"SET", b"k", b"v"]),
    Case("in-blanks", b"  SET\t k  \t v \r\n", [b"SET", b"k", b"v"]),
    Case("in-cr-inside", b"SET k\rv\r\n", [b"SET", b"k", b"v"]),
    Case("in-two-cr", b"ECHO x\r\r\n", [b"ECHO", b"x"]),
    Case("in-vt-inside", b"ECHO a\vb\r\n", [b"ECHO", b"a\vb"]),
    Case("in-ff-trailing", b"ECHO a\f\r\n", [b"ECHO", b"a\f"]),
    Case("in-vt-leading", b"\vECHO\v x\r\n", [b"ECHO\v", b"x"]),
    Case("in-dq", b'ECHO "hello world"\r\n', [b"ECHO", b"hello world"]),
    Case("in-dq-empty", b'ECHO ""\r\n', [b"ECHO", b""]),
    Case("in-dq-escapes", b'ECHO "\\n\\r\\t\\b\\a\\\\\\""\r\n', [b"ECHO", b'\n\r\t\b\a\\"']),
    Case("in-dq-hex", b'ECHO "\\x41\\xfF\\x00"\r\n', [b"ECHO", b"A\xff\x00"]),
    Case("in-dq-bad-hex", b'ECHO "\\xZZ"\r\n', [b"ECHO", b"xZZ"]),
    Case("in-dq-short-hex", b'ECHO "\\x4"\r\n', [b"ECHO", b"x4"]),
    Case("in-dq-other-escape", b'ECHO "\\q\\""\r\n', [b"ECHO", b'q"']),
    Case("in-dq-mid-token", b'ECHO a"b c"\r\n', [b"ECHO", b"ab c"]),
    Case("in-dq-then-vt", b'ECHO "a"\vb\r\n', [b"ECHO", b"a", b"b"]),
    Case("in-dq-single-inside", b"ECHO \"it's\"\r\n", [b"ECHO", b"it's"]),
    Case("in-sq", b"ECHO 'a \"b\" c'\r\n", [b"ECHO", b'a "b" c']),
    Case("in-sq-escape", b"ECHO 'it\\'s'\r\n", [b"ECHO", b"it's"]),
    Case("in-sq-backslash", b"ECHO '\\a\\n'\r\n", [b"ECHO", b"\\a\\n"]),
    Case("in-sq-empty", b"ECHO ''\r\n", [b"ECHO", b""]),
    Case("in-high-bytes", b"ECHO \xe9\xff\r\n", [b"ECHO", b"\xe9\xff"]),
    # --- inline, skipped
    Case("in-empty-crlf", b"\r\n", SKIP),
    Case("in-empty-lf", b"\n", SKIP),
    Case("in-spaces", b"   \n", SKIP),
    Case("in-blank-mix", b" \t\v\f\r\r\n", SKIP),
    # --- inline, need more
    Case("in-partial", b"PIN", NEED),
    Case("in-cr-only", b"PING\r", NEED),
    Case("in-nul", b"PI\x00NG\r\n", NEED),
    Case("in-leading-nul", b"\x00\n", NEED),
    # --- inline, errors
    Case("in-dq-unterminated", b'ECHO "abc\r\n', E_QUOTES),
    Case("in-dq-after-close", b'ECHO "a"b\r\n', E_QUOTES),
    Case("in-dq-backslash-end", b'ECHO "abc\\\r\n', E_QUOTES),
    Case("in-sq-unterminated", b"ECHO 'abc\r\n", E_QUOTES),
    Case("in-sq-after-close", b"ECHO 'a''b'\r\n", E_QUOTES),
    # --- the proxy's own limits: arguments where the one past the limit starts, so that a huge
    # count followed by something else fails as in Redis
    Case("lim-args", b"*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\n", Err("Protocol error: too many arguments in request (limit 2)"),
         ParseLimits(max_args=2), redis=False),
    Case("lim-args-header", b"*3\r\n$1\r\na\r\n", NEED, ParseLimits(max_args=2), redis=False),
    Case("lim-args-default-header", b"*1048577\r\n", NEED),
    Case("lim-args-default-then-not-bulk", b"*9999994\r\n$4\r\nHSET\r\n*3\r\n", got("*")),
    Case("lim-args-ok", b"*2\r\n$1\r\na\r\n$1\r\nb\r\n", [b"a", b"b"], ParseLimits(max_args=2), redis=False),
    Case("lim-bytes", b"*3\r\n$3\r\nSET\r\n$2000000000\r\n",
         Err("Protocol error: request too large (limit 100 bytes)"),
         ParseLimits(max_bulk_len=2**40, max_request_bytes=100), redis=False),
    Case("lim-bytes-running", b"*3\r\n$3\r\nSET\r\n$50\r\n" + b"k" * 50 + b"\r\n$48\r\n",
         Err("Protocol error: request too large (limit 100 bytes)"),
         ParseLimits(max_request_bytes=100), redis=False),
    Case("lim-bytes-exact", b"*2\r\n$50\r\n" + b"a" * 50 + b"\r\n$50\r\n" + b"b" * 50 + b"\r\n",
         [b"a" * 50, b"b" * 50], ParseLimits(max_request_bytes=100), redis=False),
    Case("lim-bulk", b"*1\r\n$11\r\n", E_BULK, ParseLimits(max_bulk_len=10), redis=False),
]

TRAILING = b"*1\r\n$4\r\nPING\r\nGET x\r\n"


def _run(data: bytes | bytearray, pos: int, limits: ParseLimits) -> object:
    try:
        r = parse_request(data, pos, limits)
    except ProtocolError as e:
        return Err(e.message)
    return NEED if r is None else r


def _check_final(case: Case, result: object, pos: int, end_expected: int) -> None:
    if case.complete:
        assert result != NEED and not isinstance(result, Err), result
        args, end, inline = result
        assert args == case.expect
        assert all(type(a) is bytes for a in args)
        assert end == end_expected
        assert inline == (case.data[0:1] != b"*")
    else:
        assert result == case.expect


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_all_at_once(case: Case) -> None:
    _check_final(case, _run(case.data, 0, case.limits), 0, len(case.data))
    # bytearray input and a non-zero start behave the same.
    lead = b"*0\r\n"
    _check_final(case, _run(bytearray(lead + case.data), len(lead), case.limits), len(lead),
                 len(lead) + len(case.data))


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_one_byte_at_a_time(case: Case) -> None:
    buf = bytearray()
    for i, byte in enumerate(case.data):
        buf.append(byte)
        result = _run(buf, 0, case.limits)
        if i < len(case.data) - 1:
            # Never complete early, never an error before the offending line is whole.
            assert result is NEED, (bytes(buf), result)
    _check_final(case, result, 0, len(case.data))


@pytest.mark.parametrize("case", [c for c in CASES if c.expect is not NEED], ids=lambda c: c.id)
def test_with_trailing_data(case: Case) -> None:
    data = case.data + TRAILING
    result = _run(data, 0, case.limits)
    _check_final(case, result, 0, len(case.data))
    if case.complete:
        end = result[1]
        args, end2, _ = parse_request(data, end, case.limits)
        assert (args, end2) == ([b"PING"], end + 14)
        assert parse_request(data, end2, case.limits) == ([b"GET", b"x"], len(data), True)


# Over-long header lines: Redis gives up once more than 64 KiB are pending
# with no line end in sight.  (Checked at the boundary, not byte by byte.)
BIG = PROTO_INLINE_MAX_SIZE
TOO_BIG_CASES = [
    ("mbulk-count", b"*" + b"1" * BIG, "Protocol error: too big mbulk count string"),
    ("mbulk-count-nul", b"*1\x00" + b"\r\n" * (BIG // 2 - 1), "Protocol error: too big mbulk count string"),
    ("bulk-count", b"*1\r\n$" + b"1" * BIG, "Protocol error: too big bulk count string"),
    ("bulk-count-2nd", b"*2\r\n$1\r\na\r\n$" + b"1" * BIG, "Protocol error: too big bulk count string"),
    ("inline", b"a" * (BIG + 1), "Protocol error: too big inline request"),
    ("inline-nul", b"a\x00" + b"\n" * (BIG - 1), "Protocol error: too big inline request"),
]


@pytest.mark.parametrize("data,message", [c[1:] for c in TOO_BIG_CASES], ids=[c[0] for c in TOO_BIG_CASES])
def test_too_big(data: bytes, message: str) -> None:
    assert _run(data, 0, ParseLimits()) == Err(message)
    assert _run(data[:-1], 0, ParseLimits()) is NEED
    assert _run(data + b"x", 0, ParseLimits()) == Err(message)
    # The limit counts from the request (or the argument header), not the buffer start.
    assert _run(b"PING\r\n" + data[:-1], 6, ParseLimits()) is NEED


def test_long_line_is_fine_when_whole() -> None:
    # A line longer than 64 KiB that is already complete is parsed, as
    # Redis does when it reads it in one go.
    assert parse_request(b"ECHO " + b"x" * BIG + b"\r\n", 0) == ([b"ECHO", b"x" * BIG], BIG + 7, True)


def test_huge_claim_is_not_waited_for() -> None:
    limits = ParseLimits(max_request_bytes=1 << 20)
    with pytest.raises(ProtocolError) as ei:
        parse_request(b"*1\r\n$2000000\r\n", 0, limits)
    assert ei.value.reply == b"-ERR Protocol error: request too large (limit 1048576 bytes)\r\n"


@pytest.mark.parametrize(
    "s,value",
    [
        (b"0", 0), (b"1", 1), (b"-1", -1), (b"12345", 12345),
        (b"9223372036854775807", 2**63 - 1), (b"-9223372036854775808", -(2**63)),
        (b"9223372036854775808", None), (b"-9223372036854775809", None),
        (b"", None), (b"-", None), (b"-0", None), (b"00", None), (b"01", None),
        (b"+1", None), (b" 1", None), (b"1 ", None), (b"1_0", None), (b"0x1", None),
        (b"\xd9\xa1", None), (b"1" * 21, None),
    ],
)
def test_string2ll(s: bytes, value: int | None) -> None:
    assert string2ll(s) == value


@pytest.mark.parametrize(
    "line,args",
    [
        (b"", []), (b"   ", []), (b"a", [b"a"]), (b"a b", [b"a", b"b"]),
        (b"a\vb", [b"a\vb"]), (b"a \vb", [b"a", b"b"]), (b'"a" b', [b"a", b"b"]),
        (b'"a"', [b"a"]), (b'"a"\t', [b"a"]), (b'"a"\f', [b"a"]), (b'"a\\', None),
        (b"'a'b", None), (b'"', None), (b"'", None), (b"a'b'", [b"ab"]),
        (b'"\\x4g"', [b"x4g"]), (b'"\\X41"', [b"X41"]), (b'"\\x41x"', [b"Ax"]),
    ],
)
def test_sdssplitargs(line: bytes, args: list[bytes] | None) -> None:
    assert sdssplitargs(line) == args


def test_protocol_error_reply() -> None:
    e = ProtocolError("Protocol error: expected '$', got '\n'")
    assert e.message == "Protocol error: expected '$', got ' '"
    assert e.reply == b"-ERR Protocol error: expected '$', got ' '\r\n"
    assert ProtocolError("Protocol error: expected '$', got '\xe9'").reply.endswith(b"'\xe9'\r\n")

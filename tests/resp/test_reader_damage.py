"""The request reader on damaged requests (`tests/resp/damage.py`), whole and in random cuts: every
batch it hands out is consistent with itself. Its `ends` rise and end at the length of `raw`, and
each command's span is exactly that command's request. The session and the cluster forward
spans of `raw` by those ends, so an end out of place sends part of a request, or another command's
bytes, on a shared upstream connection. Runs with the compiled modules and again in pure Python
(`./dev test`). Seeded: RG_PROTOCOL_SEED replays a failure.
"""

import os
import random

import pytest

from proxy.resp.exact import ParseLimits, parse_request
from proxy.resp.reader import RequestReader
from tests.resp.damage import payload, resp

CASES = 5000
LIMITS = ParseLimits()


def batches(data: bytes, cuts: list[int]):
    """Every batch of `data` fed in the pieces that `cuts` marks, until the reader fails."""
    reader = RequestReader()
    out = []
    start = 0
    for stop in [*cuts, len(data)]:
        reader.feed(data[start:stop])
        start = stop
        while (batch := reader.read()) is not None:
            out.append(batch)
            if batch.error is not None:
                return out
    return out


def check(batch, where: str) -> None:
    ends = batch.offsets()
    assert len(ends) == len(batch.commands), where
    assert all(a < b for a, b in zip([0, *ends], ends)), f"{where}: ends {ends} do not rise"
    if ends:
        assert ends[-1] == len(batch.raw), f"{where}: ends {ends}, raw of {len(batch.raw)} bytes"
    for i, command in enumerate(batch.commands):
        span = batch.span(i, i + 1)
        # Read as redis-server reads (spans keep the client's bytes, which may be Redis's and not
        # hiredis's RESP: two bytes after a count or a bulk are skipped, whatever they are).
        args, end, _ = parse_request(span, 0, LIMITS)
        assert (tuple(args), end) == (command, len(span)), f"{where}: span {i} is not {command!r}"
    assert b"".join(batch.span(i, i + 1) for i in range(len(batch.commands))) == batch.raw, where


@pytest.mark.parametrize("data", [
    # A bulk followed by two bytes that are not CRLF (Redis skips them as it would CRLF), then
    # inline requests: hiredis stops where Redis goes on, and the exact parser reads the tail. Its
    # ends used to count from the tail's start, so the inline command's span was empty and a later
    # run's span cut the GET in two.
    resp("GET", "a")[:-2] + b"\r\r-1\n",
    resp("GET", "a")[:-2] + b"\r\r-1\nKEYS x\n",
    resp("HSET", "rp:816:h", "f", "v")[:-2] + b"\r\r-1\nf",
    resp("GET", "a")[:-2] + b"XYPING\r\n" + resp("ECHO", "b"),
], ids=["inline after", "two inline after", "inline and a partial one", "inline then resp"])
def test_a_tail_read_by_redis_rules_keeps_its_place(data):
    read = batches(data, [])
    for batch in read:
        check(batch, repr(data))
    assert read[0].commands[0][0] in (b"GET", b"HSET")


def test_every_batch_of_damaged_requests_is_consistent():
    seed = int(os.environ.get("RG_PROTOCOL_SEED") or random.SystemRandom().randrange(1, 10**9))
    for case in range(CASES):
        data = payload(seed, case)
        rng = random.Random(seed + case)
        cuts = sorted(rng.sample(range(1, len(data)), min(len(data) - 1, rng.randint(0, 4)))) if len(data) > 1 else []
        for pieces in ([], cuts):
            for batch in batches(data, pieces):
                check(batch, f"case {case} cut at {pieces} (seed {seed}: RG_PROTOCOL_SEED={seed} to replay): {data!r}")

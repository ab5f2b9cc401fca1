#!/usr/bin/env python3
"""Micro-benchmark of proxy.resp.replies.ReplySplitter, the per-reply hot path.

Prints the best-of-N time per reply (and per chunk where chunks matter) for
the shapes that dominate real traffic: many small replies in one read, one
large array, and one large bulk arriving in socket-sized pieces.

    python benchmarks/micro_replies.py
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from proxy.resp.replies import ReplySplitter  # noqa: E402

ROUNDS = 7


def best_seconds(fn: Callable[[], None], loops: int) -> float:
    """Best of ROUNDS timings of `loops` calls, per call."""
    best = float("inf")
    for _ in range(ROUNDS):
        t0 = time.perf_counter()
        for _ in range(loops):
            fn()
        best = min(best, time.perf_counter() - t0)
    return best / loops


def many_in_one_chunk(chunk: bytes, replies: int) -> Callable[[], None]:
    sp = ReplySplitter()
    scan = sp.scan
    assert scan(chunk, 0, 1 << 30) == (len(chunk), replies, 0)

    def run() -> None:
        scan(chunk, 0, 1 << 30)

    return run


def chunked(chunks: list[bytes], replies: int) -> Callable[[], None]:
    sp = ReplySplitter()

    def run() -> None:
        done = 0
        for c in chunks:
            done += sp.scan(c, 0, 1 << 30)[1]
        assert done == replies

    return run


def main() -> None:
    print(f"Python {sys.version.split()[0]}, best of {ROUNDS} rounds")
    rows = [
        ("16 x $3 bulk, one chunk", many_in_one_chunk(b"$3\r\nbar\r\n" * 16, 16), 16, 20000),
        ("16 x +OK, one chunk", many_in_one_chunk(b"+OK\r\n" * 16, 16), 16, 20000),
        ("16 x :1, one chunk", many_in_one_chunk(b":1\r\n" * 16, 16), 16, 20000),
        ("16 x $12 bulk, one chunk", many_in_one_chunk(b"$12\r\nhello world!\r\n" * 16, 16), 16, 20000),
        ("16 x $-1 null, one chunk", many_in_one_chunk(b"$-1\r\n" * 16, 16), 16, 20000),
    ]
    array = b"*1000\r\n" + b"$3\r\nbar\r\n" * 1000
    rows.append(("*1000 array of $3 (per element)", many_in_one_chunk(array, 1), 1000, 300))
    body = b"x" * (1 << 20)
    big = b"$%d\r\n%s\r\n" % (len(body), body)
    size = 64 * 1024
    pieces = [big[i : i + size] for i in range(0, len(big), size)]
    rows.append((f"1 MiB bulk in {len(pieces)} x 64 KiB chunks", chunked(pieces, 1), 1, 2000))

    for name, fn, per_call, loops in rows:
        us = best_seconds(fn, loops) * 1e6
        print(f"  {name:40s} {us / per_call:9.3f} us/reply")
    print(f"  {'  (the same, per 64 KiB chunk)':40s} {us / len(pieces):9.3f} us/chunk")


if __name__ == "__main__":
    main()

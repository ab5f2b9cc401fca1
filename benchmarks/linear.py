#!/usr/bin/env python3
"""Linear time, measured: a policy decision per key and a request's reading per argument, as the
command grows from 1,000 to 1,000,000 keys / arguments.

Two series, without sockets, CPU time (`time.process_time`) of one pass each:

- decide: `MGET` of N badly named keys (each breaks three rules of the strict preset) decided by
  the engine, its findings counted and logged as the session does (`session/verdicts.record`,
  the decision log to a null stream);
- read: one `MGET` request of N small arguments (N * ~13 bytes) fed to a `RequestReader` in
  reads of `--cut` bytes (64 KiB, a socket read's size; `--cut 1500` is one TCP segment each).

Each line prints the time per key or argument; linear time keeps it flat as N grows tenfold
(a quadratic path grows it tenfold each line). Before the fix of issue 49 a 30,000-key MGET took
15 s to decide and a 300,000-argument request 26 s to read in 64 KiB reads.

    python benchmarks/linear.py [--max 1000000] [--cut 65536] [--policy FILE]
"""

from __future__ import annotations

import argparse
import io
import logging
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import hiredis

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from proxy import metrics  # noqa: E402
from proxy.commands.table import CommandTable  # noqa: E402
from proxy.policy.decision import SessionState  # noqa: E402
from proxy.policy.engine import Engine  # noqa: E402
from proxy.policy.loader import load_policy  # noqa: E402
from proxy.resp.reader import RequestReader  # noqa: E402
from proxy.session import verdicts  # noqa: E402


def sizes(top: int) -> list[int]:
    out, n = [], 1000
    while n <= top:
        out.append(n)
        n *= 10
    return out


def decide(engine: Engine, n: int) -> tuple[float, int]:
    """CPU seconds to decide (and count and log) an MGET of n bad keys; the findings counted."""
    args = [b"MGET", *(b"Bad Key %d" % i for i in range(n))]
    plan = engine.plan_for(args)
    session = SimpleNamespace(engine=engine, peer=("127.0.0.1", 1), app=None)
    started = time.process_time()
    verdict = engine.decide(plan, args, (), SessionState())
    verdicts.record(session, verdict.findings, args, verdict.more)
    spent = time.process_time() - started
    assert verdict.reject is not None
    return spent, len(verdict.findings) + sum(count for _, count in verdict.more)


def read(n: int, cut: int) -> tuple[float, int]:
    """CPU seconds to read one request of n arguments in reads of `cut` bytes; its size."""
    data = hiredis.pack_command((b"MGET", *(b"key:%d" % i for i in range(n - 1))))
    pieces = [data[at:at + cut] for at in range(0, len(data), cut)]
    reader = RequestReader()
    started = time.process_time()
    got = [batch for piece in pieces if (batch := reader.feed_read(piece)) is not None]
    spent = time.process_time() - started
    assert len(got) == 1 and len(got[0].commands[0]) == n and got[0].error is None
    return spent, len(data)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max", type=int, default=1_000_000, help="largest N (from 1,000, tenfold)")
    parser.add_argument("--cut", type=int, default=65536, help="bytes per read of the request")
    parser.add_argument("--policy", type=Path, default=REPO / "configs" / "policies" / "strict-dotted.yaml")
    args = parser.parse_args()
    table = CommandTable.from_snapshot()
    handler = logging.StreamHandler(io.StringIO())
    metrics.decision_log.addHandler(handler)
    metrics.decision_log.propagate = False
    metrics.decision_log.setLevel(logging.INFO)
    print(f"decide: MGET of N bad keys, policy {args.policy.name}")
    for n in sizes(args.max):
        engine = Engine(load_policy(args.policy), table)  # fresh: no class seen before
        spent, findings = decide(engine, n)
        print(f"  N={n:>9,}  {spent:8.3f} s  {spent / n * 1e6:6.2f} µs/key  ({findings:,} findings)", flush=True)
    print(f"read: one request of N arguments in reads of {args.cut:,} bytes")
    for n in sizes(args.max):
        spent, size = read(n, args.cut)
        print(f"  N={n:>9,}  {spent:8.3f} s  {spent / n * 1e6:6.2f} µs/arg  ({size:,} bytes)", flush=True)
    metrics.FINDING_LINES.flush()  # (no event loop here: the interval's lines written now)
    lines = handler.stream.getvalue().count("\n")
    print(f"decision log: {lines} lines for every finding above")


if __name__ == "__main__":
    main()

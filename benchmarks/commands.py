#!/usr/bin/env python3
"""The proxy's CPU per request on each of redis-benchmark's own tests, against twemproxy's in the
same run: whether its per-core efficiency holds beyond GET and SET (lists, sets, hashes, sorted
sets, LRANGE's long replies, MSET, PING).

    python benchmarks/commands.py [--rounds 3] [--requests 100000] [--pipeline 1] [--tests ping_mbulk,get]
    python benchmarks/commands.py --quick          # 1 round, small N: a smoke test

Starts a redis-server, the proxy (`--config`, the passthrough config by default) and twemproxy in
front of it, on free ports. Each round runs every test (`redis-benchmark -t TEST -c 50 -r 100000`)
against both, in an order that alternates from round to round. Prints per test the medians of
each one's CPU per request (user + system from /proc, µs) and the median of the per-round ratios
proxy / twemproxy. `--pin` places the processes as `run.py --pin` does. PING_INLINE is not among
the defaults: twemproxy refuses inline commands. Every process it starts is stopped by pid at
the end.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.run import (  # noqa: E402
    DEFAULT_PROXY_CMD,
    PLACEMENTS,
    BenchError,
    Pinning,
    Processes,
    become_subreaper,
    start_proxy,
    start_redis,
    start_twemproxy,
    tree_cpu_times,
)

TESTS = ("ping_mbulk", "set", "get", "incr", "lpush", "rpush", "lpop", "rpop", "sadd", "hset", "spop", "zadd",
         "zpopmin", "lrange_100", "lrange_300", "lrange_600", "mset")
TARGETS = ("proxy", "twemproxy")


def cpu_per_request(pid: int, argv: list[str], requests: int, pinned=None) -> float:
    """One redis-benchmark run (placed by `pinned`, a `Pinning.setter`): the CPU per request (µs) of
    the process tree at `pid`."""
    before = tree_cpu_times(pid)
    run = subprocess.run(argv, capture_output=True, text=True, timeout=600, preexec_fn=pinned)
    after = tree_cpu_times(pid)
    if run.returncode != 0:
        raise BenchError(f"{' '.join(argv)} failed (rc={run.returncode}):\n{run.stdout[-1000:]}{run.stderr[-1000:]}")
    return sum(b - a for a, b in zip(before, after)) * 1e6 / requests


def summarize(rounds: list[dict]) -> dict:
    """rounds: [{test: {target: µs}}]. Per test: each target's median, and the median of the
    per-round ratios proxy / twemproxy (rounds where twemproxy used no CPU at all are left out)."""
    out = {}
    for test in rounds[0]:
        row = {target: statistics.median(r[test][target] for r in rounds) for target in TARGETS}
        ratios = [r[test]["proxy"] / r[test]["twemproxy"] for r in rounds if r[test]["twemproxy"] > 0]
        row["ratio"] = statistics.median(ratios) if ratios else None
        out[test] = row
    return out


def print_summary(summary: dict, pipeline: int) -> None:
    print(f"CPU per request (µs), 50 clients -P {pipeline}, medians; ratio: proxy / twemproxy, per round")
    print(f"{'test':<12} {'proxy':>8} {'twemproxy':>10} {'ratio':>7}")
    for test, row in summary.items():
        ratio = "-" if row["ratio"] is None else f"{row['ratio']:.3f}"
        print(f"{test:<12} {row['proxy']:>8.2f} {row['twemproxy']:>10.2f} {ratio:>7}")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=None, help="rounds (default 3; --quick: 1)")
    ap.add_argument("--requests", type=int, default=None, help="requests per test and target (default 100000)")
    ap.add_argument("--pipeline", type=int, default=1, help="redis-benchmark -P (default 1)")
    ap.add_argument("--tests", default=",".join(TESTS), help="comma-separated redis-benchmark tests")
    ap.add_argument("--config", default="configs/passthrough.yaml", help="proxy config file")
    ap.add_argument("--quick", action="store_true", help="1 round, 5000 requests")
    ap.add_argument("--pin", nargs="?", const="alone", default=None, choices=PLACEMENTS, metavar="PLACEMENT",
                    help="as run.py --pin: the proxies on the last CPU, the rest on the others")
    args = ap.parse_args(argv)
    args.rounds = args.rounds if args.rounds is not None else (1 if args.quick else 3)
    args.requests = args.requests if args.requests is not None else (5000 if args.quick else 100000)
    args.tests = [t.strip().lower() for t in args.tests.split(",") if t.strip()]
    if args.rounds < 1 or args.requests < 10 or args.pipeline < 1 or not args.tests:
        ap.error("--rounds, --pipeline >= 1, --requests >= 10, and at least one test")
    args.pinning = Pinning.of_machine(args.pin) if args.pin else None
    config = Path(args.config)
    args.config = (config if config.is_absolute() or config.exists() else REPO / config).resolve()
    # What run.py's start_proxy reads.
    args.proxy_cmd, args.workers, args.ready_timeout = DEFAULT_PROXY_CMD, 0, 20.0
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    become_subreaper()
    procs = Processes(pin=args.pinning)
    workdir = Path(tempfile.mkdtemp(prefix="redis-guard-commands-"))
    bench = shutil.which("redis-benchmark") or "redis-benchmark"
    pinned = args.pinning.setter("bench") if args.pinning else None  # (redis-benchmark's CPUs)
    try:
        redis = start_redis(procs, workdir, args.ready_timeout)
        services = {"proxy": start_proxy(procs, workdir, redis.port, args),
                    "twemproxy": start_twemproxy(procs, workdir, redis.port, args.ready_timeout)}
        rounds = []
        for number in range(args.rounds):
            order = list(TARGETS) if number % 2 == 0 else list(reversed(TARGETS))
            this: dict = {}
            for test in args.tests:
                this[test] = {}
                for target in order:
                    service = services[target]
                    argv_ = [bench, "-h", "127.0.0.1", "-p", str(service.port), "-c", "50", "-n", str(args.requests),
                             "-r", "100000", "-P", str(args.pipeline), "-t", test, "-q"]
                    this[test][target] = cpu_per_request(service.pid, argv_, args.requests, pinned)
                print(f"round {number + 1}/{args.rounds} {test:<12} proxy {this[test]['proxy']:7.2f} µs  "
                      f"twemproxy {this[test]['twemproxy']:7.2f} µs", flush=True)
            rounds.append(this)
        print_summary(summarize(rounds), args.pipeline)
        return 0
    except BenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        procs.stop_all()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

"""`redis-guard policy infer` against `redis-guard audit` on the same keyspace: seed N keys (the
mix of `audit_scan.py`, plus 10% session strings named by UUID and 5% hashes named by user name)
into a redis-server started here on a free port, run both as a user runs them, print the seconds
of each, their ratio and the peak RSS of each process.

    python benchmarks/infer_scan.py                 # 1,000,000 keys
    python benchmarks/infer_scan.py --keys 100000

The issue's bound: infer within twice the audit's time. The server is ended by pid, also on errors.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from benchmarks.audit_scan import pipeline, seed  # noqa: E402
from tests.servers import RedisServer  # noqa: E402


def extra(port: int, total: int) -> None:
    sessions = int(total * 0.10)
    users = int(total * 0.05)
    commands = []
    for i in range(sessions):
        commands.append([b"SET", f"bench:session:{uuid.UUID(int=i * 7919 + 1)}".encode(), b"token-value",
                         b"EX", b"1800"])
    for i in range(users):
        commands.append([b"HSET", f"bench:profile:user{i:x}q:card".encode(), b"name", b"x"])
    pipeline(port, commands)


PEAK = ("import resource, runpy, sys; sys.argv = ['redis-guard'] + sys.argv[1:]\n"
        "try:\n    runpy.run_module('proxy', run_name='__main__')\n"
        "finally:\n    print('peak-rss-kb', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)")


def timed(args: list[str]) -> tuple[float, int]:
    """Seconds and peak RSS (MB) of one CLI run in its own process."""
    started = time.monotonic()
    run = subprocess.run([sys.executable, "-c", PEAK, *args], cwd=REPO, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True)
    seconds = time.monotonic() - started
    if "peak-rss-kb" not in run.stderr:
        raise RuntimeError(run.stderr)
    return seconds, int(run.stderr.rsplit("peak-rss-kb", 1)[1].split()[0]) // 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--policy", default=os.path.join(REPO, "configs", "policies", "key-value-design.yaml"))
    parser.add_argument("--json", help="write the figures here too")
    args = parser.parse_args()
    server = RedisServer(None, "--enable-debug-command", "yes")
    try:
        base = int(args.keys * 0.85)
        seed(server.port, base)
        extra(server.port, args.keys)
        with tempfile.TemporaryDirectory() as tmp:
            audit_s, audit_mb = timed(["audit", "--upstream", server.url, "--policy", args.policy, "--quiet",
                                       "--json", os.path.join(tmp, "audit.json")])
            infer_s, infer_mb = timed(["policy", "infer", "--upstream", server.url, "--quiet",
                                       "-o", os.path.join(tmp, "draft.yaml")])
            with open(os.path.join(tmp, "draft.yaml")) as handle:
                head = [line for line in handle.read().splitlines() if line.startswith("  - key:")]
        figures = {"keys": args.keys, "audit_seconds": round(audit_s, 2), "infer_seconds": round(infer_s, 2),
                   "ratio": round(infer_s / audit_s, 2), "audit_peak_rss_mb": audit_mb,
                   "infer_peak_rss_mb": infer_mb, "patterns": len(head)}
        print(f"audit: {audit_s:.1f} s; policy infer: {infer_s:.1f} s ({infer_s / audit_s:.2f}x the audit); "
              f"{len(head)} patterns; peak RSS: audit {audit_mb} MB, infer {infer_mb} MB")
        print("\n".join(head))
        if args.json:
            with open(args.json, "w") as handle:
                json.dump(figures, handle, indent=1)
        return 0
    finally:
        server.close()


if __name__ == "__main__":
    sys.exit(main())

"""How fast `redis-guard audit` walks a keyspace: seed N keys of mixed types into a redis-server
started here on a free port, run the audit as a user runs it, print keys/s and seconds.

    python benchmarks/audit_scan.py                      # 1,000,000 keys, key-value-design preset
    python benchmarks/audit_scan.py --keys 100000 --policy configs/policies/strict-dotted.yaml

The mix: 70% strings by DEBUG POPULATE (`bench:item:N`, short values), then pipelined writes of
10% hashes (5 fields), 8% lists (5 items), 6% sets (5 members), 4% sorted sets (5 members) and
2% JSON strings; every other key gets a TTL. The server is ended by pid, also on errors.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time

import hiredis

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from tests.servers import RedisServer  # noqa: E402  (free port, ended by pid)

MIX = [  # (share, type, key prefix, one write per key)
    (0.10, "hash", "bench:user", lambda k: [b"HSET", k, b"name", b"alice", b"age", b"35", b"city", b"x",
                                             b"zip", b"12345", b"tier", b"gold"]),
    (0.08, "list", "bench:queue", lambda k: [b"RPUSH", k, b"a", b"b", b"c", b"d", b"e"]),
    (0.06, "set", "bench:tags", lambda k: [b"SADD", k, b"a", b"b", b"c", b"d", b"e"]),
    (0.04, "zset", "bench:rank", lambda k: [b"ZADD", k, b"1", b"a", b"2", b"b", b"3", b"c", b"4", b"d", b"5", b"e"]),
    (0.02, "json", "bench:doc", lambda k: [b"SET", k, b'{"name": "alice", "age": 35, "tags": ["a", "b"]}']),
]


def pipeline(port: int, commands, chunk: int = 10000) -> None:
    """Send commands in chunks on one connection, reading every reply (errors raise)."""
    with socket.create_connection(("127.0.0.1", port)) as sock:
        reader = hiredis.Reader()
        batch = []

        def flush():
            sock.sendall(b"".join(hiredis.pack_command(tuple(c)) for c in batch))
            got = 0
            while got < len(batch):
                data = sock.recv(1 << 20)
                if not data:
                    raise ConnectionError("redis-server closed the connection")
                reader.feed(data)
                while (reply := reader.gets()) is not False:
                    if isinstance(reply, hiredis.ReplyError):
                        raise RuntimeError(f"seeding: {reply}")
                    got += 1
            batch.clear()

        for command in commands:
            batch.append(command)
            if len(batch) >= chunk:
                flush()
        if batch:
            flush()


def seed(port: int, total: int) -> dict[str, int]:
    counts = {}
    others = 0
    commands = []
    for share, kind, prefix, write in MIX:
        count = int(total * share)
        counts[kind] = count
        others += count
        for i in range(count):
            key = f"{prefix}:{i}".encode()
            commands.append(write(key))
            if i % 2:
                commands.append([b"EXPIRE", key, b"86400"])
    strings = total - others
    counts["string"] = strings
    pipeline(port, [[b"DEBUG", b"POPULATE", str(strings).encode(), b"bench:item"]])
    pipeline(port, commands)
    pipeline(port, ([b"EXPIRE", f"bench:item:{i}".encode(), b"86400"] for i in range(1, strings, 2)))
    return counts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--policy", default=os.path.join(REPO, "configs", "policies", "key-value-design.yaml"))
    parser.add_argument("--count", type=int, default=1000, help="SCAN COUNT")
    parser.add_argument("--json", help="write the figures here too")
    args = parser.parse_args()
    server = RedisServer(None, "--enable-debug-command", "yes")
    try:
        started = time.monotonic()
        counts = seed(server.port, args.keys)
        seeded = time.monotonic() - started
        print(f"seeded {args.keys:,} keys in {seeded:.1f} s: {counts}", flush=True)
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "report.json")
            started = time.monotonic()
            run = subprocess.run(
                [sys.executable, "-m", "proxy", "audit", "--upstream", server.url, "--policy", args.policy,
                 "--count", str(args.count), "--json", out, "--quiet"],
                cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            seconds = time.monotonic() - started
            if run.returncode not in (0, 1):
                print(run.stderr, file=sys.stderr)
                return 1
            with open(out) as handle:
                report = json.load(handle)
        scanned = report["keys"]["scanned"]
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024  # MB: the audit process
        figures = {"keys": scanned, "seconds": round(seconds, 2), "keys_per_second": round(scanned / seconds),
                   "peak_rss_mb": peak,
                   "scan_seconds": report["seconds"], "policy": os.path.basename(args.policy),
                   "rules": {rule: entry["keys"] for rule, entry in report["rules"].items()}}
        print(f"audit: {scanned:,} keys in {seconds:.1f} s (process, start-up included; "
              f"{report['seconds']:.1f} s scanning): {scanned / seconds:,.0f} keys/s, peak RSS {peak} MB")
        print(f"findings: {figures['rules']}")
        if args.json:
            with open(args.json, "w") as handle:
                json.dump(figures, handle, indent=1)
        return 0 if scanned == args.keys else 1
    finally:
        server.close()


if __name__ == "__main__":
    sys.exit(main())

"""The proxy's CPU per request for a client-side cache's connection (CLIENT TRACKING, RESP3),
against a client pinned to its own connection without tracking, in the same run.

A tracking connection's replies go through `UpstreamConnection._deliver_pushes`, which cuts the
invalidation pushes out of them; this shows what that costs. One client sends GETs of one key
in pipelines of 1 and 16 (it reads every reply before the next pipeline), `--rounds` times
each, alternating the two kinds; the median of the proxy process's user + system CPU per GET is
printed. It starts its own redis-server and proxy on free 127.0.0.1 ports and stops them by pid.

    python benchmarks/tracking.py [--rounds 3] [--requests 40000]
"""

from __future__ import annotations

import argparse
import socket
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.run import tree_cpu_times  # noqa: E402
from tests.servers import ProxyProcess, RedisServer  # noqa: E402

KINDS = {  # what the client sends first: both take a connection of the client's own
    "pinned": b"HELLO 3\r\nCLIENT SETNAME bench\r\n",
    "tracking": b"HELLO 3\r\nCLIENT TRACKING ON\r\n",
}
GET = b"*2\r\n$3\r\nGET\r\n$6\r\nbench:\r\n"
VALUE = b"$1\r\nv\r\n"


def cpu_per_request(port: int, pid: int, setup: bytes, requests: int, depth: int) -> float:
    """Microseconds of the proxy's CPU per GET, `requests` GETs in pipelines of `depth`."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(setup + b"PING\r\n")
        got = b""
        while not got.endswith(b"+PONG\r\n"):
            got += sock.recv(65536)
        batch, answer = GET * depth, VALUE * depth
        rounds = requests // depth
        before = sum(tree_cpu_times(pid))
        for _ in range(rounds):
            sock.sendall(batch)
            got = b""
            while len(got) < len(answer):
                got += sock.recv(65536)
        return (sum(tree_cpu_times(pid)) - before) / (rounds * depth) * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--requests", type=int, default=40000, help="GETs per round and kind")
    args = parser.parse_args(argv)
    server = RedisServer()
    proxy = ProxyProcess(server.url, "configs/passthrough.yaml")
    try:
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
            sock.sendall(b"SET bench: v\r\n")
            sock.recv(64)
        results = {(kind, depth): [] for kind in KINDS for depth in (1, 16)}
        for _ in range(args.rounds):
            for depth in (1, 16):
                for kind, setup in KINDS.items():
                    results[kind, depth].append(cpu_per_request(proxy.port, proxy.process.pid, setup, args.requests,
                                                                depth))
                    time.sleep(0.1)
        print(f"proxy CPU per GET, µs (median of {args.rounds} rounds of {args.requests} GETs)")
        for depth in (1, 16):
            print(f"  pipelines of {depth:2}: " + ", ".join(
                f"{kind} {statistics.median(results[kind, depth]):.2f}" for kind in KINDS))
    finally:
        proxy.stop()
        server.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

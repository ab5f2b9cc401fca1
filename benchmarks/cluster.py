"""GET/SET through the proxy to a Redis Cluster vs `redis-benchmark --cluster` straight at it.

    python benchmarks/cluster.py [--rounds 3] [--requests 200000] [--pipeline 1,16]

Starts a 3-master x 1-replica cluster on free ports (the test suite's fixture), the proxy with
`--upstream-cluster`, and runs redis-benchmark in interleaved rounds: `--cluster` against a seed
node (the client routes by slot itself) and plain against the proxy. Prints requests/s medians and
proxy/direct ratios (goal: at least 0.8). Every process it starts is stopped by pid at the end.
"""

from __future__ import annotations

import argparse
import csv
import io
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.cluster.start import start_cluster  # noqa: E402
from tests.servers import ProxyProcess  # noqa: E402


def bench(port: int, tests: str, clients: int, requests: int, pipeline: int, cluster: bool) -> dict[str, float]:
    argv = ["redis-benchmark", "-p", str(port), "-t", tests, "-c", str(clients), "-n", str(requests),
            "-r", "100000", "-P", str(pipeline), "--csv", "-q"]
    if cluster:
        argv.append("--cluster")
    out = subprocess.run(argv, capture_output=True, text=True, timeout=600).stdout
    rates = {}
    for row in csv.reader(io.StringIO(out)):
        if len(row) >= 2 and row[0] in ("GET", "SET"):
            rates[row[0]] = float(row[1])
    return rates


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--requests", type=int, default=200_000)
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--pipeline", default="1,16")
    ap.add_argument("--workers", type=int, default=1, help="proxy processes (SO_REUSEPORT)")
    args = ap.parse_args(argv)
    cluster = start_cluster(masters=3, replicas=1)
    proxy = None
    try:
        workers = ["--workers", str(args.workers)] if args.workers > 1 else []
        proxy = ProxyProcess(None, "configs/passthrough.yaml", "--upstream-cluster", cluster.seeds, *workers)
        seed = cluster.masters()[0].port
        print(f"cluster {cluster.seeds}; proxy on {proxy.port}")
        for pipeline in [int(p) for p in args.pipeline.split(",")]:
            direct, through = {"GET": [], "SET": []}, {"GET": [], "SET": []}
            bench(proxy.port, "set,get", args.clients, args.requests // 4, pipeline, False)  # warm-up
            for _ in range(args.rounds):
                for name, rate in bench(seed, "set,get", args.clients, args.requests, pipeline, True).items():
                    direct[name].append(rate)
                for name, rate in bench(proxy.port, "set,get", args.clients, args.requests, pipeline, False).items():
                    through[name].append(rate)
            for name in ("SET", "GET"):
                d, p = statistics.median(direct[name]), statistics.median(through[name])
                print(f"-c {args.clients} -P {pipeline:<3} {name}: cluster direct {d:>10.0f}/s  proxy {p:>10.0f}/s  "
                      f"ratio {p / d:.2f} (goal 0.80)")
    finally:
        if proxy is not None:
            proxy.stop()
        cluster.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""GET/SET through the proxy to a Redis Cluster vs `redis-benchmark --cluster` straight at it, and the
proxy's CPU per request in front of the cluster vs in front of one standalone redis-server.

    python benchmarks/cluster.py [--rounds 3] [--requests 200000] [--pipeline 1,16] [--json FILE]
    python benchmarks/cluster.py --quick          # 1 round, small N: a smoke test

Starts a 3-master x 1-replica cluster on free ports (the test suite's fixture), the proxy with
`--upstream-cluster`, a standalone redis-server and a second proxy in front of it (same config).
Each round runs redis-benchmark, SET then GET, against three targets back to back, in an order
that rotates from round to round: `--cluster` against a seed node (the client routes by slot
itself), plain against the cluster proxy, plain against the standalone proxy. Prints requests/s
medians and cluster proxy / direct ratios (goal: at least 0.8), and the proxy's CPU per request
(user+system from /proc, its workers included, and the two parts) for both proxies, with the ratio cluster /
standalone (goal: at most 1.15). Every process it starts is stopped by pid at the end.

The same ratio for a C proxy, as a reference in the same run (skipped when `nutcracker` is not
installed, or with `--no-twemproxy`): twemproxy over three plain redis-servers (CRC16 modulo 3,
the nearest it has to hash slots) against twemproxy over the standalone redis-server. What
three servers cost any proxy more than one (a connection, a write and a read per server, the
wake-ups of three servers) is in that ratio; what is our own is in the difference.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.run import tree_cpu_times, twemproxy_config  # noqa: E402
from tests.cluster.start import start_cluster  # noqa: E402
from tests.servers import ProxyProcess, free_port, wait_port  # noqa: E402

TESTS = ("SET", "GET")
BOTH = "SET+GET"
DIRECT, CLUSTER, STANDALONE = "cluster direct", "cluster proxy", "standalone proxy"
TARGETS = (DIRECT, CLUSTER, STANDALONE)
TW_SHARDED, TW_SINGLE = "twemproxy 3 shards", "twemproxy 1 server"  # the reference pair
GOAL_RPS_RATIO = 0.8  # cluster proxy / cluster direct, requests/s
GOAL_CPU_RATIO = 1.15  # cluster proxy / standalone proxy, CPU per request


class BenchError(RuntimeError):
    pass


@dataclass
class Target:
    name: str
    port: int
    cluster: bool  # redis-benchmark --cluster
    proxy: ProxyProcess | None = None  # whose CPU is measured
    process: subprocess.Popen | None = None  # or this one's (nutcracker)

    @property
    def pid(self) -> int:
        """The process whose CPU counts, 0 for none."""
        if self.proxy is not None:
            return self.proxy.process.pid
        return self.process.pid if self.process is not None else 0

    def exited(self) -> str | None:
        """What the measured process left, when it has exited."""
        if self.proxy is not None and self.proxy.process.poll() is not None:
            return self.proxy.log[-3000:]
        if self.process is not None and self.process.poll() is not None:
            return f"exit status {self.process.returncode}"
        return None


def parse_csv(out: str) -> dict[str, float]:
    rates = {}
    for row in csv.reader(io.StringIO(out)):
        if len(row) >= 2 and row[0] in TESTS:
            rates[row[0]] = float(row[1])
    return rates


def bench(target: Target, test: str, clients: int, requests: int, pipeline: int, keyspace: int) -> dict:
    """One redis-benchmark run of one test: {"rps"} and, for a proxy, {"cpu_us"} of proxy CPU per request,
    with its user and system parts {"user_us", "sys_us"}."""
    argv = ["redis-benchmark", "-h", "127.0.0.1", "-p", str(target.port), "-t", test.lower(), "-c", str(clients),
            "-n", str(requests), "-r", str(keyspace), "-P", str(pipeline), "--csv", "-q"]
    if target.cluster:
        argv.append("--cluster")
    pid = target.pid
    times0 = tree_cpu_times(pid) if pid else (0.0, 0.0)
    try:
        res = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    except subprocess.TimeoutExpired:
        raise BenchError(f"redis-benchmark against {target.name} timed out") from None
    times1 = tree_cpu_times(pid) if pid else (0.0, 0.0)
    rates = parse_csv(res.stdout)
    if res.returncode != 0 or test not in rates:
        raise BenchError(f"redis-benchmark -t {test} against {target.name} failed (rc={res.returncode}):\n"
                         f"{res.stdout[-2000:]}{res.stderr[-2000:]}")
    left = target.exited()
    if left is not None:
        raise BenchError(f"{target.name} exited:\n{left}")
    result = {"rps": rates[test]}
    if pid:
        user, system = ((after - before) * 1e6 / requests for after, before in zip(times1, times0))
        result.update(cpu_us=user + system, user_us=user, sys_us=system)
    return result


def median(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def summarize(rounds: list[dict]) -> dict:
    """rounds: [{target: {test: {"rps", "cpu_us"?}}}] of one pipeline depth. Medians over rounds of
    rps and CPU per request; the CPU ratio is cluster / standalone per round first, then the median.
    SET+GET: the mean of the two tests' CPU per request (both run the same number of requests)."""
    out: dict = {"rps": {}, "cpu_us": {}, "cpu_ratio": {}, "user_us": {}, "sys_us": {}}
    twemproxy = TW_SHARDED in rounds[0]
    if twemproxy:
        out["reference_ratio"] = {}
    for test in TESTS:
        out["rps"][test] = {t: median([r[t][test]["rps"] for r in rounds]) for t in TARGETS}
        d, p = out["rps"][test][DIRECT], out["rps"][test][CLUSTER]
        out["rps"][test]["ratio"] = p / d if d else None
    for test in (*TESTS, BOTH):
        def cpu(r: dict, t: str, test: str = test, part: str = "cpu_us") -> float:
            if test == BOTH:
                return sum(r[t][x][part] for x in TESTS) / len(TESTS)
            return r[t][test][part]

        measured = (CLUSTER, STANDALONE, TW_SHARDED, TW_SINGLE) if twemproxy else (CLUSTER, STANDALONE)
        out["cpu_us"][test] = {t: median([cpu(r, t) for r in rounds]) for t in measured}
        for part in ("user_us", "sys_us"):
            if all(part in r[t][x] for r in rounds for t in measured for x in TESTS):
                out[part][test] = {t: median([cpu(r, t, part=part) for r in rounds]) for t in measured}
        ratio = median([cpu(r, CLUSTER) / cpu(r, STANDALONE) for r in rounds if cpu(r, STANDALONE) > 0])
        out["cpu_ratio"][test] = {"ratio": ratio, "ok": ratio is not None and ratio <= GOAL_CPU_RATIO + 1e-9}
        if twemproxy:
            out["reference_ratio"][test] = median([cpu(r, TW_SHARDED) / cpu(r, TW_SINGLE)
                                                   for r in rounds if cpu(r, TW_SINGLE) > 0])
    return out


def print_summary(summary: dict, clients: int, pipeline: int) -> None:
    head = f"-c {clients} -P {pipeline:<3}"
    for test in TESTS:
        r = summary["rps"][test]
        print(f"{head} {test}: cluster direct {r[DIRECT]:>10.0f}/s  proxy {r[CLUSTER]:>10.0f}/s  "
              f"ratio {r['ratio']:.2f} (goal {GOAL_RPS_RATIO:.2f})  standalone proxy {r[STANDALONE]:>10.0f}/s")
    for test in (*TESTS, BOTH):
        c, q = summary["cpu_us"][test], summary["cpu_ratio"][test]
        ratio = "-" if q["ratio"] is None else f"{q['ratio']:.2f}"
        print(f"{head} {test:<7} proxy CPU µs/req: cluster {c[CLUSTER]:>6.2f}  standalone {c[STANDALONE]:>6.2f}  "
              f"ratio {ratio} (goal <= {GOAL_CPU_RATIO:.2f}) [{'OK' if q['ok'] else 'MISS'}]{_parts(summary, test)}")
    for test in (*TESTS, BOTH) if "reference_ratio" in summary else ():
        c, ratio = summary["cpu_us"][test], summary["reference_ratio"][test]
        ratio = "-" if ratio is None else f"{ratio:.2f}"
        print(f"{head} {test:<7} twemproxy CPU µs/req: 3 shards {c[TW_SHARDED]:>6.2f}  1 server {c[TW_SINGLE]:>6.2f}  "
              f"ratio {ratio} (the same ratio for a C proxy)")


def _parts(summary: dict, test: str) -> str:
    """The user and system parts of one CPU line, when the rounds measured them."""
    user, system = summary.get("user_us", {}).get(test), summary.get("sys_us", {}).get(test)
    if user is None or system is None:
        return ""
    return "  user/system: " + "  ".join(f"{t} {user[t]:.2f}/{system[t]:.2f}" for t in user)


def start_redis(started: list[subprocess.Popen], workdir: str) -> int:
    """A plain redis-server on a free 127.0.0.1 port, no persistence; its Popen goes into `started`."""
    port = free_port()
    while port == 6379:
        port = free_port()
    started.append(subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--dir", workdir, "--daemonize", "no"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    wait_port(port)
    return port


def start_twemproxy(started: list[subprocess.Popen], workdir: str, binary: str, name: str, redis_ports: list[int],
                    hash_name: str = "fnv1a_64", distribution: str = "ketama") -> Target:
    """nutcracker over these redis-servers, as a target; its Popen goes into `started`."""
    port, stats_port = free_port(), free_port()
    conf = Path(workdir) / f"nutcracker-{port}.yml"
    conf.write_text(twemproxy_config(port, redis_ports, hash_name, distribution))
    process = subprocess.Popen([binary, "-c", str(conf), "-s", str(stats_port), "-a", "127.0.0.1",
                                "-o", str(Path(workdir) / f"nutcracker-{port}.log")],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    started.append(process)
    wait_port(port)
    return Target(name, port, False, process=process)


def stop_process(proc: subprocess.Popen, timeout: float = 10) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _raise_interrupt(signum, frame):  # SIGTERM/SIGHUP -> the same clean-up path as Ctrl-C
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=None, help="rounds (default 3; --quick: 1)")
    ap.add_argument("--requests", type=int, default=None,
                    help="requests per test and target (default 200000; --quick: 20000)")
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--pipeline", default="1,16")
    ap.add_argument("--keyspace", type=int, default=100_000, help="redis-benchmark -r")
    ap.add_argument("--workers", type=int, default=1, help="proxy processes (SO_REUSEPORT), for both proxies")
    ap.add_argument("--config", default="configs/passthrough.yaml", help="config of both proxies")
    ap.add_argument("--quick", action="store_true", help="1 round, 20000 requests: a smoke test")
    ap.add_argument("--json", metavar="FILE", help="write every round's numbers and the summary")
    ap.add_argument("--no-twemproxy", action="store_true", help="without the twemproxy reference pair")
    args = ap.parse_args(argv)
    rounds_n = args.rounds if args.rounds is not None else 1 if args.quick else 3
    requests = args.requests if args.requests is not None else 20_000 if args.quick else 200_000
    pipelines = [int(p) for p in args.pipeline.split(",")]

    signal.signal(signal.SIGTERM, _raise_interrupt)
    signal.signal(signal.SIGHUP, _raise_interrupt)
    t0 = time.monotonic()
    workdir = tempfile.mkdtemp(prefix="rg-bench-cluster-")
    started: list[subprocess.Popen] = []  # the standalone redis-server(s), nutcracker
    proxies: list[ProxyProcess] = []
    cluster = None
    results: dict = {}
    try:
        cluster = start_cluster(masters=3, replicas=1)
        workers = ["--workers", str(args.workers)] if args.workers > 1 else []
        proxies.append(ProxyProcess(None, args.config, "--upstream-cluster", cluster.seeds, *workers))
        redis_port = start_redis(started, workdir)
        proxies.append(ProxyProcess(f"redis://127.0.0.1:{redis_port}", args.config, *workers))
        targets = [Target(DIRECT, cluster.masters()[0].port, True),
                   Target(CLUSTER, proxies[0].port, False, proxies[0]),
                   Target(STANDALONE, proxies[1].port, False, proxies[1])]
        nutcracker = shutil.which("nutcracker", path=os.environ.get("PATH", "") + os.pathsep + "/usr/sbin")
        if args.no_twemproxy or nutcracker is None:
            print("twemproxy reference: " + ("--no-twemproxy" if args.no_twemproxy else "nutcracker not found"))
        else:
            shards = [start_redis(started, workdir) for _ in range(3)]
            targets += [start_twemproxy(started, workdir, nutcracker, TW_SHARDED, shards, "crc16", "modula"),
                        start_twemproxy(started, workdir, nutcracker, TW_SINGLE, [redis_port])]
        print(f"cluster {cluster.seeds}; cluster proxy on {proxies[0].port} (pid {proxies[0].process.pid}); "
              f"redis-server on {redis_port} (pid {started[0].pid}); standalone proxy on {proxies[1].port} "
              f"(pid {proxies[1].process.pid})")
        print(f"{rounds_n} round(s), {requests} requests per test and target, {args.clients} clients", flush=True)
        for pipeline in pipelines:
            for target in targets:  # warm-up, unrecorded: fills the key spaces, opens the connections
                for test in TESTS:
                    bench(target, test, args.clients, max(1000, requests // 4), pipeline, args.keyspace)
            rounds: list[dict] = []
            for rnd in range(rounds_n):
                k = rnd % len(targets)
                order = targets[k:] + targets[:k]
                this: dict = {t.name: {} for t in targets}
                for test in TESTS:
                    for target in order:
                        this[target.name][test] = bench(target, test, args.clients, requests, pipeline, args.keyspace)
                rounds.append(this)
                cpu = "; ".join(f"{t} " + " ".join(f"{test} {this[t][test]['cpu_us']:.2f}" for test in TESTS)
                                for t in (CLUSTER, STANDALONE, TW_SHARDED, TW_SINGLE) if t in this)
                print(f"  -P {pipeline} round {rnd + 1}/{rounds_n}: proxy CPU µs/req: {cpu}", flush=True)
            summary = summarize(rounds)
            print_summary(summary, args.clients, pipeline)
            results[str(pipeline)] = {"rounds": rounds, "summary": summary}
        elapsed = time.monotonic() - t0
        print(f"Medians over {rounds_n} round(s); CPU ratio: median of per-round ratios. Total {elapsed:.0f}s.")
        if args.json:
            doc = {"args": {**vars(args), "rounds": rounds_n, "requests": requests},
                   "clk_tck": os.sysconf("SC_CLK_TCK"), "pipelines": results, "elapsed_s": round(elapsed, 1)}
            Path(args.json).write_text(json.dumps(doc, indent=2) + "\n")
            print(f"Numbers written to {args.json}")
        return 0
    except BenchError as e:
        print(f"\nbenchmark failed: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\ninterrupted; stopping everything started", file=sys.stderr)
        return 130
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        for proxy in proxies:
            proxy.stop()
        for proc in started:
            stop_process(proc)
        if cluster is not None:
            cluster.close()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

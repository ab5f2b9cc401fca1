#!/usr/bin/env python3
"""Throughput/latency benchmark: direct Redis vs Redis Guard vs twemproxy.

One command starts everything it needs on free 127.0.0.1 ports (a throw-away
redis-server, the proxy in front of it, nutcracker in front of it), runs
redis-benchmark against each target interleaved round by round, prints medians
and ratios to direct Redis, and stops everything it started.

    python benchmarks/run.py                       # 5 rounds, a few minutes
    python benchmarks/run.py --quick               # 1 small round (CI smoke)
    python benchmarks/run.py --targets direct,twemproxy --json out.json

See benchmarks/README.md for what the columns mean.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import platform
import re
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
ALL_TARGETS = ("direct", "proxy", "policy", "twemproxy", "baseline", "direct-tls", "proxy-tls")
# TLS (issue 53): redis-server's own tls-port, and the proxy with TLS on both sides in front of it;
# their "x direct" and "p50 +ms" are against direct-tls, the same server's TLS port.
TLS_TARGETS = ("direct-tls", "proxy-tls")
GOAL_POLICY_RATIO = 0.9  # policy on vs policy off (the passthrough proxy), issue 3
FORBIDDEN_PORTS = {6379}
CLK_TCK = os.sysconf("SC_CLK_TCK")

DEFAULT_PROXY_CMD = (
    "{python} -m proxy serve --config {config} "
    "--listen 127.0.0.1:{port} --upstream redis://127.0.0.1:{redis_port}"
)

# Goals from the issue, checked against the "proxy" target.
GOAL_RATIO_C50 = 1.0
GOAL_RATIO_P16 = 0.8
GOAL_P50_ADDED_C1_MS = 0.03
# Per-core efficiency (issue 17), checked against twemproxy in the same run, round by round, for
# the "policy" target (the strictest preset by default), else "proxy": CPU per request at most
# twemproxy's at 50 clients, with and without a pipeline; at 1 client, p50 added at most
# twemproxy's plus this.
GOAL_CPU_TO_TWEMPROXY = 1.0
GOAL_C1_OVER_TWEMPROXY_MS = 0.01


@dataclass(frozen=True)
class Scenario:
    name: str  # short id used in JSON
    label: str  # printed
    clients: int
    pipeline: int
    requests_factor: float  # multiplied by --requests


SCENARIOS = (
    Scenario("c50", "50 clients", 50, 1, 1.0),
    Scenario("c50_p16", "50 clients -P 16", 50, 16, 5.0),
    Scenario("c1", "1 client", 1, 1, 0.2),
)
TESTS = ("SET", "GET")
# `--rejected`: a SET that breaks five rules of the strict preset (K1 segments, K2 case, K3
# characters, K6 type word, T1 TTL), which the policy refuses, against the accepted SET, both sent
# by `load` (redis-benchmark stops at the first error reply), after the redis-benchmark tests.
REJECTED = "SET-rejected"
ACCEPTED = "SET-accepted"
GOAL_REJECTED_TO_ACCEPTED = 2.0  # a refusal costs at most twice an accepted SET's CPU


class BenchError(RuntimeError):
    pass


# --------------------------------------------------------------------------
# processes


@dataclass
class Service:
    name: str
    port: int
    proc: subprocess.Popen | None  # None for "direct": it *is* the redis process
    log_path: Path | None
    pid: int = 0
    tls: tuple[str, ...] = ()  # redis-benchmark's --tls arguments for this target
    tls_port: int = 0  # redis-server's tls-port (the TLS targets)

    def alive(self) -> bool:
        return self.proc is None or self.proc.poll() is None

    def log_tail(self, lines: int = 30) -> str:
        if not self.log_path or not self.log_path.exists():
            return ""
        text = self.log_path.read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])


PLACEMENTS = ("alone", "with-redis", "with-bench")


@dataclass
class Pinning:
    """`--pin [PLACEMENT]`: every proxy target (twemproxy too, and a proxy's workers, which inherit
    it) on the last CPU, the rest on the others. Each proxy then has a core of its own and every
    wake-up crosses cores; unpinned, a round's figures depend on where the scheduler put the
    processes (on 2 cores they fall into two groups about 2 µs apart). `alone` (the default) gives
    the proxies' CPU to nothing else; `with-redis` and `with-bench` put redis-server or
    redis-benchmark beside them, as the scheduler often does in an unpinned run. A proxy that
    shares its core does more per wake-up, so the placements need not rank proxies alike."""

    proxy_cpus: frozenset[int]
    redis_cpus: frozenset[int]
    bench_cpus: frozenset[int]
    placement: str = "alone"

    @classmethod
    def of_machine(cls, placement: str = "alone") -> Pinning:
        if placement not in PLACEMENTS:
            raise BenchError(f"--pin takes one of {', '.join(PLACEMENTS)}, not {placement!r}")
        cpus = sorted(os.sched_getaffinity(0))
        if len(cpus) < 2:
            raise BenchError("--pin needs at least 2 CPUs")
        last, others = frozenset(cpus[-1:]), frozenset(cpus[:-1])
        return cls(last, last if placement == "with-redis" else others,
                   last if placement == "with-bench" else others, placement)

    def setter(self, kind: str):
        """preexec_fn for a process of `kind` (proxy, redis or bench)."""
        cpus = {"proxy": self.proxy_cpus, "redis": self.redis_cpus, "bench": self.bench_cpus}[kind]
        return lambda: os.sched_setaffinity(0, cpus)


@dataclass
class Processes:
    """Everything we started, so that it can be stopped by pid."""

    procs: list[subprocess.Popen] = field(default_factory=list)
    pin: Pinning | None = None

    def start(self, argv: list[str], log_path: Path, cwd: Path | None = None, kind: str = "redis") -> subprocess.Popen:
        log = open(log_path, "wb")
        try:
            # Own session: a Ctrl-C in the terminal doesn't hit the servers
            # mid-run; we stop them ourselves, in order, in stop_all().
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=cwd,
                start_new_session=True,
                preexec_fn=self.pin.setter(kind) if self.pin else None,
            )
        finally:
            log.close()
        self.procs.append(proc)
        return proc

    def stop_all(self, timeout: float = 5.0) -> None:
        # Reverse order: proxies first, Redis last.
        for proc in reversed(self.procs):
            if proc.poll() is None:
                try:
                    proc.send_signal(signal.SIGTERM)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + timeout
        for proc in reversed(self.procs):
            try:
                proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        for proc in reversed(self.procs):
            # The process group is the session we created for this child
            # (pgid == its pid): it holds leftover workers, if any.
            try:
                os.killpg(proc.pid, 0)
            except (ProcessLookupError, PermissionError):
                continue
            time.sleep(0.5)
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            try:
                proc.wait(2)
            except subprocess.TimeoutExpired:
                pass
        self.procs.clear()
        reap_orphans()


def become_subreaper() -> None:
    """Orphaned grandchildren (e.g. proxy workers whose parent died) get
    re-parented to us instead of init, so stop_all() can reap them."""
    try:
        import ctypes

        PR_SET_CHILD_SUBREAPER = 36
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def reap_orphans(timeout: float = 3.0) -> None:
    """Wait (bounded) for re-parented orphans; they were signalled already."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return  # no children left
        if pid == 0:
            if time.monotonic() > deadline:
                return
            time.sleep(0.05)


def free_port() -> int:
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in FORBIDDEN_PORTS:
            return port


def redis_ping(port: int, timeout: float = 1.0) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.sendall(b"*1\r\n$4\r\nPING\r\n")
            data = b""
            while not data.endswith(b"\r\n"):
                chunk = s.recv(64)
                if not chunk:
                    return False
                data += chunk
            return data.startswith(b"+PONG")
    except OSError:
        return False


def wait_for_ping(svc: Service, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not svc.alive():
            raise BenchError(f"{svc.name} exited during startup:\n{svc.log_tail()}")
        if redis_ping(svc.port):
            return
        time.sleep(0.05)
    raise BenchError(f"{svc.name} did not answer PING on port {svc.port} within {timeout}s:\n{svc.log_tail()}")


def wait_for_ready_line(svc: Service, timeout: float) -> None:
    """The proxy prints one line containing 'ready' on stderr once it accepts."""
    assert svc.log_path is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = svc.log_path.read_text(errors="replace") if svc.log_path.exists() else ""
        if any("ready" in line.lower() for line in text.splitlines()):
            return
        if not svc.alive():
            raise BenchError(f"{svc.name} exited during startup (rc={svc.proc.returncode}):\n{svc.log_tail()}")
        time.sleep(0.05)
    raise BenchError(f"{svc.name} printed no 'ready' line within {timeout}s:\n{svc.log_tail()}")


def make_certs(workdir: Path) -> dict[str, str]:
    """A CA and a certificate for 127.0.0.1, made with openssl, for the TLS targets."""
    def run(*argv: str) -> None:
        subprocess.run(["openssl", *argv], cwd=workdir, check=True, capture_output=True)

    ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    run("req", "-x509", *ec, "-days", "2", "-subj", "/CN=bench-ca", "-keyout", "ca.key", "-out", "ca.crt")
    run("req", *ec, "-subj", "/CN=bench", "-keyout", "server.key", "-out", "server.csr")
    (workdir / "server.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    run("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
        "-days", "2", "-extfile", "server.ext", "-out", "server.crt")
    return {"ca": str(workdir / "ca.crt"), "cert": str(workdir / "server.crt"), "key": str(workdir / "server.key")}


def start_redis(procs: Processes, workdir: Path, timeout: float, certs: dict | None = None) -> Service:
    port = free_port()
    log = workdir / "redis.log"
    tls = ["--tls-port", str(free_port()), "--tls-cert-file", certs["cert"], "--tls-key-file", certs["key"],
           "--tls-ca-cert-file", certs["ca"], "--tls-auth-clients", "no"] if certs else []
    argv = [
        shutil.which("redis-server") or "redis-server",
        "--port", str(port),
        "--bind", "127.0.0.1",
        "--save", "",
        "--appendonly", "no",
        "--dir", str(workdir),
        "--daemonize", "no",
        *tls,
    ]
    proc = procs.start(argv, log)
    svc = Service("redis-server", port, proc, log, proc.pid)
    wait_for_ping(svc, timeout)
    svc.tls_port = int(tls[1]) if tls else 0
    return svc


def start_proxy(procs: Processes, workdir: Path, redis_port: int, args: argparse.Namespace,
                name: str = "proxy", extra: tuple[str, ...] = (), checkout: Path = REPO_ROOT) -> Service:
    port = free_port()
    log = workdir / f"{name}.log"
    config = args.config
    if checkout != REPO_ROOT and config.is_relative_to(REPO_ROOT):
        # Another checkout reads its own copy of the file: the settings it understands.
        config = checkout / config.relative_to(REPO_ROOT)
    cmd = args.proxy_cmd.format(
        python=shlex.quote(sys.executable),
        config=shlex.quote(str(config)),
        port=port,
        redis_port=redis_port,
        workdir=shlex.quote(str(workdir)),
    )
    argv = shlex.split(cmd)
    if args.workers:
        argv += ["--workers", str(args.workers)]
    argv += list(extra)
    proc = procs.start(argv, log, cwd=checkout, kind="proxy")
    svc = Service(name, port, proc, log, proc.pid)
    wait_for_ready_line(svc, args.ready_timeout)
    if "--tls-cert-file" not in extra:  # a TLS listener: its ready line is enough
        wait_for_ping(svc, args.ready_timeout)
    return svc


def twemproxy_config(port: int, redis_ports: list[int], hash_name: str = "fnv1a_64",
                     distribution: str = "ketama") -> str:
    """nutcracker's YAML: one pool on 127.0.0.1:port over these redis-servers, one connection to each."""
    return ("bench:\n"
            f"  listen: 127.0.0.1:{port}\n"
            f"  hash: {hash_name}\n"
            f"  distribution: {distribution}\n"
            "  auto_eject_hosts: false\n"
            "  redis: true\n"
            "  server_connections: 1\n"
            "  servers:\n"
            + "".join(f"   - 127.0.0.1:{redis_port}:1\n" for redis_port in redis_ports))


def start_twemproxy(procs: Processes, workdir: Path, redis_port: int, timeout: float) -> Service:
    binary = shutil.which("nutcracker") or "/usr/sbin/nutcracker"
    if not os.path.exists(binary):
        raise BenchError("nutcracker (twemproxy) not found; install the 'nutcracker' package or drop the target")
    port, stats_port = free_port(), free_port()
    conf = workdir / "nutcracker.yml"
    conf.write_text(twemproxy_config(port, [redis_port]))
    log = workdir / "nutcracker.log"
    argv = [
        binary, "-c", str(conf), "-o", str(log),
        "-s", str(stats_port), "-a", "127.0.0.1",
        "-p", str(workdir / "nutcracker.pid"),
    ]
    proc = procs.start(argv, workdir / "nutcracker.out", kind="proxy")
    svc = Service("twemproxy", port, proc, log, proc.pid)
    wait_for_ping(svc, timeout)
    return svc


# --------------------------------------------------------------------------
# CPU accounting from /proc


def _read_stat(pid: int) -> tuple[int, int, int] | None:
    """(ppid, utime, stime in ticks) of one process, None if gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read().decode(errors="replace")
    except OSError:
        return None
    rest = data[data.rindex(")") + 2:].split()
    # rest[0] is field 3 (state); ppid is field 4, utime 14, stime 15.
    return int(rest[1]), int(rest[11]), int(rest[12])


def tree_cpu_times(root_pid: int) -> tuple[float, float]:
    """(user, system) CPU seconds of root_pid and all its live descendants."""
    stats: dict[int, tuple[int, int, int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            st = _read_stat(int(entry))
            if st is not None:
                stats[int(entry)] = st
    if root_pid not in stats:
        return 0.0, 0.0
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in stats.items():
        children.setdefault(ppid, []).append(pid)
    user = system = 0
    todo = [root_pid]
    while todo:
        pid = todo.pop()
        user += stats[pid][1]
        system += stats[pid][2]
        todo.extend(children.get(pid, ()))
    return user / CLK_TCK, system / CLK_TCK


def tree_cpu_seconds(root_pid: int) -> float:
    """CPU time (user+system) of root_pid and all its live descendants."""
    return sum(tree_cpu_times(root_pid))


# --------------------------------------------------------------------------
# redis-benchmark


def bench_commands(scn: Scenario, port: int, n: int, args: argparse.Namespace,
                   tls: tuple[str, ...] = ()) -> list[list[str]]:
    base = [
        args.redis_benchmark, "-h", "127.0.0.1", "-p", str(port),
        "-c", str(scn.clients), "-n", str(n), "-r", str(args.keyspace),
        "-P", str(scn.pipeline), "--csv", *tls,
    ]
    if args.key_prefix is None:
        # Built-in tests use keys "key:__rand_int__" and a 3-byte value.
        return [base + ["-t", "set,get"]]
    key = f"{args.key_prefix}__rand_int__{args.key_suffix}"
    return [base + ["SET", key, "xxx", *shlex.split(args.set_args)], base + ["GET", key]]


def load(port: int, clients: int, pipeline: int, n: int, make) -> None:
    """n commands `make(random int)` over `clients` connections, `pipeline` at a time, each
    write after the replies to the one before, as redis-benchmark sends them; error replies
    are replies (redis-benchmark exits at the first)."""
    import asyncio
    import random

    import hiredis

    async def client(count: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        replies = hiredis.Reader()
        rng = random.Random(count)
        done = 0
        while done < count:
            step = min(pipeline, count - done)
            writer.write(b"".join(hiredis.pack_command(make(rng.randrange(100_000))) for _ in range(step)))
            got = 0
            while got < step:
                data = await reader.read(65536)
                if not data:
                    raise BenchError("the target closed a connection of the --rejected load")
                replies.feed(data)
                while replies.gets() is not False:
                    got += 1
            done += step
        writer.close()

    async def main() -> None:
        await asyncio.gather(*(client(max(n // clients, 1)) for _ in range(clients)))

    asyncio.run(main())


def parse_csv(out: str) -> dict[str, dict[str, float]]:
    rows: dict[str, dict[str, float]] = {}
    for row in csv.DictReader(io.StringIO(out)):
        name = (row.get("test") or "").split(" ", 1)[0].upper()
        if name not in TESTS:
            continue
        rows[name] = {
            "rps": float(row["rps"]),
            "avg_ms": float(row["avg_latency_ms"]),
            "p50_ms": float(row["p50_latency_ms"]),
            "p95_ms": float(row["p95_latency_ms"]),
            "p99_ms": float(row["p99_latency_ms"]),
            "max_ms": float(row["max_latency_ms"]),
        }
    return rows


def run_one(scn: Scenario, svc: Service, redis: Service, n: int, args: argparse.Namespace) -> dict:
    """Run one scenario against one target; returns per-test numbers + CPU."""
    cpu_pid = svc.pid if svc.proc is not None else 0  # direct, direct-tls: redis-server itself
    proxy_times0 = tree_cpu_times(cpu_pid) if cpu_pid else (0.0, 0.0)
    redis_cpu0 = tree_cpu_seconds(redis.pid)
    tests: dict[str, dict[str, float]] = {}
    wall0 = time.monotonic()
    argvs = bench_commands(scn, svc.port, n, args, svc.tls)
    for argv in argvs:
        before = tree_cpu_seconds(cpu_pid) if cpu_pid else 0.0
        timeout = max(120.0, n / 500.0)
        try:
            res = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                                 preexec_fn=args.pinning.setter("bench") if args.pinning else None)
        except subprocess.TimeoutExpired:
            raise BenchError(f"redis-benchmark against {svc.name} timed out after {timeout:.0f}s "
                             f"({scn.label})\n{svc.log_tail()}") from None
        got = parse_csv(res.stdout)
        if res.returncode != 0 or not got:
            raise BenchError(
                f"redis-benchmark against {svc.name} failed ({scn.label}, rc={res.returncode}):\n"
                f"{res.stdout[-2000:]}{res.stderr[-2000:]}\n{svc.log_tail()}"
            )
        if cpu_pid and len(got) == 1:  # one test per redis-benchmark run: its own CPU figure
            for entry in got.values():
                entry["proxy_cpu_us_per_req"] = (tree_cpu_seconds(cpu_pid) - before) * 1e6 / n
        tests.update(got)
    wall = time.monotonic() - wall0
    missing = [t for t in TESTS if t not in tests]
    if missing:
        raise BenchError(f"no result for {missing} against {svc.name} ({scn.label})")
    if not svc.alive():
        raise BenchError(f"{svc.name} died during {scn.label}:\n{svc.log_tail()}")
    total_requests = n * len(TESTS)
    redis_cpu = tree_cpu_seconds(redis.pid) - redis_cpu0
    result = {
        "tests": tests,
        "wall_s": round(wall, 3),
        "requests": total_requests,
        "redis_cpu_us_per_req": redis_cpu * 1e6 / total_requests,
    }
    if cpu_pid:
        user, system = (after - before for after, before in zip(tree_cpu_times(cpu_pid), proxy_times0))
        result["proxy_cpu_us_per_req"] = (user + system) * 1e6 / total_requests
        # The kernel's part (sockets, wake-ups) is most of a proxy's CPU and depends on the
        # placement; the user part is the proxy's own code.
        result["proxy_user_us_per_req"] = user * 1e6 / total_requests
        result["proxy_sys_us_per_req"] = system * 1e6 / total_requests
    if getattr(args, "rejected", False) and cpu_pid:
        accepted = [*shlex.split(args.set_args)]
        prefix, suffix = args.key_prefix, args.key_suffix
        for name, make in ((ACCEPTED, lambda i: ("SET", f"{prefix}{i}{suffix}", "xxx", *accepted)),
                           (REJECTED, lambda i: ("SET", f"BadKey{i}", "xxx"))):
            before = tree_cpu_seconds(cpu_pid)
            load(svc.port, scn.clients, scn.pipeline, n, make)
            tests[name] = {"proxy_cpu_us_per_req": (tree_cpu_seconds(cpu_pid) - before) * 1e6 / n}
    return result


# --------------------------------------------------------------------------
# summary


def median(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def summarize(rounds: list[dict], targets: list[str]) -> dict:
    """Medians over rounds; ratios/deltas are per round first, then median."""
    summary: dict = {}
    for scn in SCENARIOS:
        s_scn: dict = {}
        for target in targets:
            runs = [r[scn.name][target] for r in rounds if target in r.get(scn.name, {})]
            reference = "direct-tls" if target in TLS_TARGETS else "direct"
            directs = [r[scn.name].get(reference) for r in rounds if target in r.get(scn.name, {})]
            t_sum: dict = {"tests": {}}
            for test in TESTS:
                vals = [run["tests"][test] for run in runs]
                entry = {
                    "rps": median([v["rps"] for v in vals]),
                    "avg_ms": median([v["avg_ms"] for v in vals]),
                    "p50_ms": median([v["p50_ms"] for v in vals]),
                    "p99_ms": median([v["p99_ms"] for v in vals]),
                }
                pairs = [(run, d) for run, d in zip(runs, directs) if d is not None]
                if pairs:
                    entry["ratio_to_direct"] = median(
                        [run["tests"][test]["rps"] / d["tests"][test]["rps"] for run, d in pairs])
                    entry["p50_added_ms"] = median(
                        [run["tests"][test]["p50_ms"] - d["tests"][test]["p50_ms"] for run, d in pairs])
                    entry["avg_added_ms"] = median(
                        [run["tests"][test]["avg_ms"] - d["tests"][test]["avg_ms"] for run, d in pairs])
                proxies = [r[scn.name].get("proxy") for r in rounds if target in r.get(scn.name, {})]
                policy_pairs = [(run, p) for run, p in zip(runs, proxies) if p is not None]
                if target == "policy" and policy_pairs:
                    entry["ratio_to_proxy"] = median(
                        [run["tests"][test]["rps"] / p["tests"][test]["rps"] for run, p in policy_pairs])
                    if "proxy_cpu_us_per_req" in vals[0]:
                        # What the throughput ratio would be if the proxy's CPU were all that
                        # limited it: steadier than rps on a machine shared with other load.
                        entry["cpu_ratio_to_proxy"] = median(
                            [p["tests"][test]["proxy_cpu_us_per_req"] / run["tests"][test]["proxy_cpu_us_per_req"]
                             for run, p in policy_pairs])
                if vals and "proxy_cpu_us_per_req" in vals[0]:
                    entry["proxy_cpu_us_per_req"] = median([v["proxy_cpu_us_per_req"] for v in vals])
                t_sum["tests"][test] = entry
            t_sum["redis_cpu_us_per_req"] = median([run["redis_cpu_us_per_req"] for run in runs])
            for key in ("proxy_cpu_us_per_req", "proxy_user_us_per_req", "proxy_sys_us_per_req"):
                if runs and key in runs[0]:
                    t_sum[key] = median([run[key] for run in runs])
            s_scn[target] = t_sum
        summary[scn.name] = s_scn
    return summary


def cpu_against(rounds: list[dict], target: str, reference: str = "twemproxy") -> dict:
    """Per scenario: `target`'s CPU per request over `reference`'s, paired round by round (both
    ran in the same round, minutes apart at most: the machine's drift over a run cancels out):
    the median, lowest and highest ratio and how many rounds were at most 1."""
    out: dict = {}
    for scn in SCENARIOS:
        ratios = []
        for r in rounds:
            pair = r.get(scn.name, {})
            mine, theirs = pair.get(target, {}), pair.get(reference, {})
            if mine.get("proxy_cpu_us_per_req") and theirs.get("proxy_cpu_us_per_req"):
                ratios.append(mine["proxy_cpu_us_per_req"] / theirs["proxy_cpu_us_per_req"])
        if ratios:
            out[scn.name] = {"median": median(ratios), "low": min(ratios), "high": max(ratios),
                             "rounds_at_most_1": sum(ratio <= 1.0 for ratio in ratios), "rounds": len(ratios)}
    return out


def efficiency_target(targets: list[str]) -> str | None:
    """The target whose CPU is held against twemproxy's: the policy's, else the plain proxy's."""
    if "twemproxy" not in targets:
        return None
    return next((target for target in ("policy", "proxy") if target in targets), None)


def print_against(against: dict, target: str) -> None:
    print(f"\nCPU per request, {target} / twemproxy (per-round ratios: median, lowest-highest, rounds at most 1)")
    for scn in SCENARIOS:
        e = against.get(scn.name)
        if e is not None:
            print(f"{scn.label:<18} {e['median']:.3f}  ({e['low']:.3f}-{e['high']:.3f})  "
                  f"{e['rounds_at_most_1']}/{e['rounds']}")


def fmt(x: float | None, spec: str) -> str:
    if x is None:
        width = re.match(r"[+]?(\d*)", spec).group(1)
        return "-".rjust(int(width or 0))
    return format(x, spec)


def print_table(summary: dict, targets: list[str], n_rounds: int) -> None:
    print()
    print(f"Medians over {n_rounds} round(s); x direct = median of per-round ratios.")
    header = f"{'scenario':<18} {'test':<4} {'target':<10} {'rps':>9} {'x direct':>8} " \
             f"{'p50 ms':>7} {'p99 ms':>7} {'p50 +ms':>8} {'avg +ms':>8}"
    print(header)
    print("-" * len(header))
    for scn in SCENARIOS:
        for test in TESTS:
            for target in targets:
                e = summary[scn.name][target]["tests"][test]
                c1 = scn.name == "c1" and target not in ("direct", "direct-tls")
                added = e.get("p50_added_ms") if c1 else None
                avg_added = e.get("avg_added_ms") if c1 else None
                print(f"{scn.label:<18} {test:<4} {target:<10} {fmt(e['rps'], '9.0f')} "
                      f"{fmt(e.get('ratio_to_direct'), '8.2f')} {fmt(e['p50_ms'], '7.3f')} "
                      f"{fmt(e['p99_ms'], '7.3f')} {fmt(added, '+8.3f')} {fmt(avg_added, '+8.3f')}")
        print()
    print("CPU per request (µs, median; SET+GET of one scenario together)")
    header = f"{'scenario':<18} {'target':<10} {'proxy µs/req':>12} {'user':>6} {'system':>6} {'redis µs/req':>12}"
    print(header)
    print("-" * len(header))
    for scn in SCENARIOS:
        for target in targets:
            t = summary[scn.name][target]
            print(f"{scn.label:<18} {target:<10} {fmt(t.get('proxy_cpu_us_per_req'), '12.2f')} "
                  f"{fmt(t.get('proxy_user_us_per_req'), '6.2f')} {fmt(t.get('proxy_sys_us_per_req'), '6.2f')} "
                  f"{fmt(t['redis_cpu_us_per_req'], '12.2f')}")
    if "policy" in targets and "proxy" in targets and \
            "cpu_ratio_to_proxy" in summary[SCENARIOS[0].name]["policy"]["tests"][TESTS[0]]:
        print("\nPolicy on / off by the proxy's CPU per request (off µs / on µs, median of per-round ratios)")
        for scn in SCENARIOS:
            tests = summary[scn.name]["policy"]["tests"]
            print(f"{scn.label:<18} " + "  ".join(
                f"{test} {fmt(tests[test]['cpu_ratio_to_proxy'], '.3f')}" for test in TESTS))


def rejected_ratios(rounds: list[dict], targets: list[str]) -> dict:
    """`--rejected`: per scenario and target, the rejected SET's CPU per request divided by the
    accepted SET's, per round, then the median (the two ran back to back in each round)."""
    out: dict = {}
    for scn in SCENARIOS:
        for target in targets:
            ratios = []
            for r in rounds:
                tests = r.get(scn.name, {}).get(target, {}).get("tests", {})
                bad, good = tests.get(REJECTED, {}), tests.get(ACCEPTED, {})
                if "proxy_cpu_us_per_req" in bad and good.get("proxy_cpu_us_per_req"):
                    ratios.append(bad["proxy_cpu_us_per_req"] / good["proxy_cpu_us_per_req"])
            if ratios:
                out.setdefault(scn.name, {})[target] = {
                    "median": median(ratios), "low": min(ratios), "high": max(ratios),
                    "rejected_us": median([r[scn.name][target]["tests"][REJECTED]["proxy_cpu_us_per_req"]
                                           for r in rounds if REJECTED in r.get(scn.name, {}).get(target, {})
                                           .get("tests", {})]),
                }
    return out


def print_rejected(ratios: dict) -> None:
    print("\nRejected SET (breaks 5 rules) / accepted SET, the proxy's CPU per request, both sent by run.py's "
          "own load (per-round ratios: median, lowest-highest)")
    for scn in SCENARIOS:
        for target, e in ratios.get(scn.name, {}).items():
            print(f"{scn.label:<18} {target:<10} {e['median']:.2f}  ({e['low']:.2f}-{e['high']:.2f})  "
                  f"rejected {e['rejected_us']:.2f} µs/req")


def goal_checks(summary: dict, targets: list[str], against: dict | None = None) -> list[dict]:
    checks = []
    for name, by_target in summary.get("rejected_to_accepted", {}).items():
        if "policy" in by_target:
            ratio = by_target["policy"]["median"]
            checks.append({"goal": f"{name} policy: a rejected SET's CPU per request <= "
                                   f"{GOAL_REJECTED_TO_ACCEPTED:.0f}x an accepted SET's",
                           "value": ratio, "ok": ratio <= GOAL_REJECTED_TO_ACCEPTED})
    target = efficiency_target(targets)
    if target is not None and against:
        for name, label in (("c50", "50 clients"), ("c50_p16", "50 clients -P 16")):
            if name in against:
                ratio = against[name]["median"]
                checks.append({"goal": f"{label} {target} CPU per request <= {GOAL_CPU_TO_TWEMPROXY:.1f}x twemproxy's",
                               "value": ratio, "ok": ratio <= GOAL_CPU_TO_TWEMPROXY + 1e-9})
        if "direct" in targets:
            for test in TESTS:
                mine = summary["c1"][target]["tests"][test].get("p50_added_ms")
                theirs = summary["c1"]["twemproxy"]["tests"][test].get("p50_added_ms")
                if mine is not None and theirs is not None:
                    checks.append({"goal": f"1 client {test} {target} p50 added <= twemproxy's "
                                           f"+ {GOAL_C1_OVER_TWEMPROXY_MS:.2f} ms",
                                   "value": mine - theirs, "ok": mine - theirs <= GOAL_C1_OVER_TWEMPROXY_MS + 1e-9})
    if "policy" in targets and "proxy" in targets:
        for scn in SCENARIOS:
            for test in TESTS:
                ratio = summary[scn.name]["policy"]["tests"][test].get("ratio_to_proxy")
                if ratio is not None:
                    checks.append({"goal": f"{scn.label} {test} policy on >= {GOAL_POLICY_RATIO:.1f}x policy off",
                                   "value": ratio, "ok": ratio >= GOAL_POLICY_RATIO})
    if "proxy" not in targets or "direct" not in targets:
        return checks
    for test in TESTS:
        c50 = summary["c50"]["proxy"]["tests"][test]["ratio_to_direct"]
        p16 = summary["c50_p16"]["proxy"]["tests"][test]["ratio_to_direct"]
        added = summary["c1"]["proxy"]["tests"][test]["p50_added_ms"]
        checks += [
            {"goal": f"50 clients {test} >= {GOAL_RATIO_C50:.1f}x direct",
             "value": c50, "ok": c50 >= GOAL_RATIO_C50},
            {"goal": f"50 clients -P 16 {test} >= {GOAL_RATIO_P16:.1f}x direct",
             "value": p16, "ok": p16 >= GOAL_RATIO_P16},
            {"goal": f"1 client {test} p50 added <= {GOAL_P50_ADDED_C1_MS:.2f} ms",
             "value": added, "ok": added <= GOAL_P50_ADDED_C1_MS + 1e-9},
        ]
    return checks


def environment() -> dict:
    def version(argv: list[str]) -> str:
        try:
            out = subprocess.run(argv, capture_output=True, text=True, timeout=10)
            return (out.stdout + out.stderr).strip().splitlines()[0]
        except (OSError, subprocess.SubprocessError, IndexError):
            return "?"

    commit = version(["git", "-C", str(REPO_ROOT), "rev-parse", "--short", "HEAD"])
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "loadavg_start": os.getloadavg(),
        "redis_server": version(["redis-server", "--version"]),
        "nutcracker": version([shutil.which("nutcracker") or "/usr/sbin/nutcracker", "--version"]),
        "git_commit": commit,
    }


# --------------------------------------------------------------------------
# main


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=None, help="rounds (default 5; --quick: 1)")
    ap.add_argument("--requests", type=int, default=None,
                    help="requests per test at 50 clients (default 100000; --quick: 10000); "
                         "-P 16 uses 5x this, 1 client 0.2x")
    ap.add_argument("--quick", action="store_true", help="1 round, small N (CI smoke)")
    ap.add_argument("--targets", default="direct,proxy,twemproxy",
                    help="comma-separated subset of direct,proxy,policy,twemproxy,baseline")
    ap.add_argument("--config", default="configs/passthrough.yaml", help="proxy config file")
    ap.add_argument("--proxy-cmd", default=DEFAULT_PROXY_CMD,
                    help="proxy command template; placeholders {python} {config} {port} "
                         "{redis_port} {workdir} (default: %(default)s)")
    ap.add_argument("--workers", type=int, default=0, help="append --workers N to the proxy command")
    ap.add_argument("--policy", type=Path, default=REPO_ROOT / "configs" / "policies" / "strict-dotted.yaml",
                    help="policy file of the 'policy' target (default: the strictest preset)")
    ap.add_argument("--key-suffix", default="", help="text after __rand_int__ in --key-prefix keys")
    ap.add_argument("--set-args", default="", help="extra SET arguments with --key-prefix, e.g. 'EX 3600'")
    ap.add_argument("--key-prefix", default=None,
                    help="use explicit 'SET <prefix>__rand_int__ xxx' / 'GET <prefix>__rand_int__' "
                         "instead of redis-benchmark's -t set,get (keys 'key:__rand_int__')")
    ap.add_argument("--rejected", action="store_true",
                    help="with --key-prefix: also 'SET BadKey<n> xxx', which breaks five rules of the strict "
                         "preset, and its CPU per request against the accepted SET's (both sent by run.py itself)")
    ap.add_argument("--keyspace", type=int, default=100000, help="redis-benchmark -r (default 100000)")
    ap.add_argument("--no-warmup", action="store_true", help="skip the unrecorded warm-up run")
    ap.add_argument("--ready-timeout", type=float, default=20.0, help="seconds to wait for each server")
    ap.add_argument("--redis-benchmark", default=shutil.which("redis-benchmark") or "redis-benchmark")
    ap.add_argument("--json", metavar="FILE", help="write raw per-round numbers and the summary here")
    ap.add_argument("--pin", nargs="?", const="alone", default=None, choices=PLACEMENTS, metavar="PLACEMENT",
                    help="every proxy target on the last CPU (steadier CPU per request); redis-server and "
                         "redis-benchmark on the others (alone, the default), or one of them beside the "
                         "proxies: with-redis, with-bench")
    ap.add_argument("--baseline", type=Path, metavar="DIR",
                    help="the 'baseline' target: the proxy of another checkout (e.g. `git worktree add "
                         "../base HEAD~5`), run from DIR with the same command, for before/after figures "
                         "in one run")
    args = ap.parse_args(argv)

    args.rounds = args.rounds if args.rounds is not None else (1 if args.quick else 5)
    args.requests = args.requests if args.requests is not None else (10000 if args.quick else 100000)
    if args.rounds < 1 or args.requests < 10:
        ap.error("--rounds must be >= 1 and --requests >= 10")
    targets = [t.strip() for t in args.targets.split(",") if t.strip()]
    bad = [t for t in targets if t not in ALL_TARGETS]
    if bad or not targets or len(set(targets)) != len(targets):
        ap.error(f"--targets must be a comma-separated subset of {','.join(ALL_TARGETS)}")
    args.targets = targets
    try:
        args.pinning = Pinning.of_machine(args.pin) if args.pin else None
    except BenchError as exc:
        ap.error(str(exc))
    if "baseline" in targets and (args.baseline is None or not (args.baseline / "proxy").is_dir()):
        ap.error("the baseline target needs --baseline DIR, a checkout of the proxy")
    if args.baseline is not None:
        args.baseline = args.baseline.resolve()
    config = Path(args.config)
    if not config.is_absolute():
        config = config if config.exists() else REPO_ROOT / config
    args.config = config.resolve()
    if "proxy" in targets and "{config}" in args.proxy_cmd and not args.config.exists():
        ap.error(f"proxy config not found: {args.config}")
    if args.rejected and args.key_prefix is None:
        ap.error("--rejected needs --key-prefix (one redis-benchmark run per test, each with its CPU figure)")
    return args


def _raise_interrupt(signum, frame):  # SIGTERM/SIGHUP -> same clean-up path as Ctrl-C
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _raise_interrupt)
    signal.signal(signal.SIGHUP, _raise_interrupt)

    become_subreaper()
    procs = Processes(pin=args.pinning)
    workdir = Path(tempfile.mkdtemp(prefix="redis-guard-bench-"))
    t_start = time.monotonic()
    rounds: list[dict] = []
    try:
        env = environment()
        certs = make_certs(workdir) if set(args.targets) & set(TLS_TARGETS) else None
        redis = start_redis(procs, workdir, args.ready_timeout, certs)
        services: dict[str, Service] = {}
        bench_tls = ("--tls", "--cacert", certs["ca"]) if certs else ()
        for target in args.targets:
            if target == "direct":
                services[target] = Service("direct", redis.port, None, redis.log_path, redis.pid)
            elif target == "proxy":
                services[target] = start_proxy(procs, workdir, redis.port, args)
            elif target == "policy":
                services[target] = start_proxy(procs, workdir, redis.port, args, "policy",
                                               ("--policy", str(args.policy)))
            elif target == "direct-tls":
                services[target] = Service("direct-tls", redis.tls_port, None, redis.log_path, redis.pid,
                                           tls=bench_tls)
            elif target == "proxy-tls":
                services[target] = start_proxy(procs, workdir, redis.port, args, "proxy-tls", (
                    "--upstream", f"rediss://127.0.0.1:{redis.tls_port}", "--upstream-tls-ca-cert-file", certs["ca"],
                    "--tls-cert-file", certs["cert"], "--tls-key-file", certs["key"], "--tls-auth-clients", "no"))
                services[target].tls = bench_tls
            elif target == "baseline":
                services[target] = start_proxy(procs, workdir, redis.port, args, "baseline",
                                               checkout=args.baseline)
            else:
                services[target] = start_twemproxy(procs, workdir, redis.port, args.ready_timeout)
        ports = ", ".join(f"{t}={s.port}" for t, s in services.items())
        print(f"redis-server pid {redis.pid}; targets: {ports}", flush=True)
        if args.pinning:
            pin = args.pinning
            print(f"pinned ({pin.placement}): proxies on CPU {sorted(pin.proxy_cpus)}, redis-server on "
                  f"{sorted(pin.redis_cpus)}, redis-benchmark on {sorted(pin.bench_cpus)}", flush=True)
        print(f"{args.rounds} round(s), N={args.requests} "
              f"(per test: " + ", ".join(f"{s.label}: {max(1, int(args.requests * s.requests_factor))}"
                                         for s in SCENARIOS) + ")", flush=True)

        if not args.no_warmup:
            # Unrecorded: fills the key space and warms every target's connections/caches.
            warm = Scenario("warmup", "warm-up", 50, 1, 1.0)
            for target in args.targets:
                run_one(warm, services[target], redis, max(1000, args.requests // 5), args)

        for rnd in range(args.rounds):
            k = rnd % len(args.targets)
            order = args.targets[k:] + args.targets[:k]
            this: dict = {"order": order}
            for scn in SCENARIOS:
                n = max(1, int(args.requests * scn.requests_factor))
                this[scn.name] = {}
                for target in order:
                    res = run_one(scn, services[target], redis, n, args)
                    this[scn.name][target] = res
                    print(f"round {rnd + 1}/{args.rounds}  {scn.label:<17} {target:<10} "
                          f"SET {res['tests']['SET']['rps']:>9.0f}  GET {res['tests']['GET']['rps']:>9.0f} rps"
                          f"  ({res['wall_s']:.1f}s)", flush=True)
            rounds.append(this)

        summary = summarize(rounds, args.targets)
        print_table(summary, args.targets, len(rounds))
        target = efficiency_target(args.targets)
        against = cpu_against(rounds, target) if target is not None else {}
        if against:
            summary["cpu_to_twemproxy"] = {"target": target, **against}
            print_against(against, target)
        rejected = rejected_ratios(rounds, args.targets) if args.rejected else {}
        if rejected:
            summary["rejected_to_accepted"] = rejected
            print_rejected(rejected)
        checks = goal_checks(summary, args.targets, against)
        if checks:
            print("\nGoals:")
            for c in checks:
                print(f"  [{'ok' if c['ok'] else 'MISS'}] {c['goal']}: {c['value']:.3f}")
        elapsed = time.monotonic() - t_start
        print(f"\nTotal time {elapsed:.0f}s. One run on a noisy machine: compare ratios, not absolute rps.")
        if args.json:
            doc = {
                "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items() if k != "pinning"},
                "environment": env,
                "scenarios": [s.__dict__ for s in SCENARIOS],
                "rounds": rounds,
                "summary": summary,
                "goals": checks,
                "elapsed_s": round(elapsed, 1),
            }
            Path(args.json).write_text(json.dumps(doc, indent=2) + "\n")
            print(f"Raw numbers written to {args.json}")
        return 0
    except BenchError as e:
        print(f"\nbenchmark failed: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\ninterrupted; stopping everything started", file=sys.stderr)
        return 130
    finally:
        # Ignore further Ctrl-C while cleaning up.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        procs.stop_all()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

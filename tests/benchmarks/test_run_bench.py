"""benchmarks/run.py's `--pin` and CPU accounting, without a benchmark: which CPUs each kind of
process gets in each placement, that a process started with the pinning runs there, that a
process's CPU time is split into user and system time as the kernel counts them, and that the
CPU per request is held against twemproxy's round by round."""

import os
import subprocess
import sys
import time

import pytest

from benchmarks.run import (
    PLACEMENTS,
    SCENARIOS,
    TESTS,
    BenchError,
    Pinning,
    cpu_against,
    goal_checks,
    parse_args,
    summarize,
    tree_cpu_seconds,
    tree_cpu_times,
)

CPUS = sorted(os.sched_getaffinity(0))
needs_two = pytest.mark.skipif(len(CPUS) < 2, reason="--pin needs at least 2 CPUs")
LAST, OTHERS = {CPUS[-1]}, set(CPUS[:-1])

# placement -> the CPUs of (proxy, redis, bench)
EXPECTED = {
    "alone": (LAST, OTHERS, OTHERS),
    "with-redis": (LAST, LAST, OTHERS),
    "with-bench": (LAST, OTHERS, LAST),
}


@needs_two
@pytest.mark.parametrize("placement", PLACEMENTS)
def test_the_proxies_get_the_last_cpu_and_the_placement_decides_who_joins_them(placement):
    pin = Pinning.of_machine(placement)
    assert (pin.proxy_cpus, pin.redis_cpus, pin.bench_cpus) == EXPECTED[placement]
    assert pin.placement == placement


@needs_two
@pytest.mark.parametrize("placement", PLACEMENTS)
@pytest.mark.parametrize("kind", ["proxy", "redis", "bench"])
def test_a_process_started_pinned_runs_on_its_cpus(placement, kind):
    pin = Pinning.of_machine(placement)
    out = subprocess.run([sys.executable, "-c", "import os; print(sorted(os.sched_getaffinity(0)))"],
                         capture_output=True, text=True, check=True, preexec_fn=pin.setter(kind)).stdout
    wanted = EXPECTED[placement][["proxy", "redis", "bench"].index(kind)]
    assert out.strip() == str(sorted(wanted))
    assert sorted(os.sched_getaffinity(0)) == CPUS  # the caller is not moved


@needs_two
@pytest.mark.parametrize(("argv", "placement"), [
    (["--pin"], "alone"),
    (["--pin", "alone"], "alone"),
    (["--pin", "with-redis"], "with-redis"),
    (["--pin", "with-bench"], "with-bench"),
])
def test_pin_alone_is_the_default_placement(argv, placement):
    assert parse_args(["--targets", "direct", *argv]).pinning.placement == placement


def test_an_unknown_placement_is_refused(capsys):
    with pytest.raises(SystemExit):
        parse_args(["--targets", "direct", "--pin", "beside-nothing"])
    assert "invalid choice" in capsys.readouterr().err
    with pytest.raises(BenchError, match="one of alone, with-redis, with-bench"):
        Pinning.of_machine("beside-nothing")


def test_without_pin_nothing_is_pinned():
    assert parse_args(["--targets", "direct"]).pinning is None


def test_pin_on_one_cpu_is_refused(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0})
    with pytest.raises(BenchError, match="at least 2 CPUs"):
        Pinning.of_machine()


def _burn(code: str) -> tuple[float, float]:
    """(user, system) seconds of a child that runs `code`, read while it waits on its stdin."""
    child = subprocess.Popen([sys.executable, "-c", f"{code}\nimport sys; print('done', flush=True); sys.stdin.read()"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "done"
        times = tree_cpu_times(child.pid)
        assert tree_cpu_seconds(child.pid) == pytest.approx(sum(times))
        return times
    finally:
        child.stdin.close()
        child.wait(10)


def test_user_time_is_the_process_own_computing():
    # A fixed amount of arithmetic, no system calls (process_time() would be one), however busy
    # the machine is.
    user, system = _burn("for _ in range(8): sum(range(4_000_000))")
    assert user >= 0.1 and user > 3 * system


def test_system_time_is_the_kernel_working_for_it():
    # Reading 1 MB of /dev/zero is the kernel zeroing and copying it: the process spends its time
    # in system calls.
    user, system = _burn("import os, time\nfd = os.open('/dev/zero', os.O_RDONLY)\n"
                         "end = time.process_time() + 0.4\n"
                         "while time.process_time() < end: os.read(fd, 1 << 20)")
    assert system >= 0.15 and system > user


def test_a_finished_tree_counts_nothing():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait(10)
    time.sleep(0.05)
    assert tree_cpu_times(child.pid) == (0.0, 0.0)


def _round(cpu: dict[str, float], p50: dict[str, float]) -> dict:
    """One round's results: per target, its CPU per request in every scenario, and its p50 (ms)."""
    def run(target):
        tests = {test: {"rps": 1000.0, "avg_ms": p50[target], "p50_ms": p50[target], "p95_ms": 1.0,
                        "p99_ms": 1.0, "max_ms": 1.0} for test in TESTS}
        result = {"tests": tests, "wall_s": 1.0, "requests": 2, "redis_cpu_us_per_req": 1.0}
        if target != "direct":
            result.update(proxy_cpu_us_per_req=cpu[target], proxy_user_us_per_req=cpu[target] / 3,
                          proxy_sys_us_per_req=cpu[target] * 2 / 3)
            for entry in tests.values():
                entry["proxy_cpu_us_per_req"] = cpu[target]
        return result
    return {scn.name: {target: run(target) for target in p50} for scn in SCENARIOS}


def test_the_cpu_per_request_is_held_against_twemproxys_round_by_round():
    """The machine drifts over a run: each round's ratio is taken first, then their median (here
    the rounds' own ratios are 0.9, 1.2 and 0.9, while the medians of the columns, 12 and 10,
    would give 1.2)."""
    p50 = {"direct": 0.10, "policy": 0.14, "twemproxy": 0.135}
    rounds = [_round({"policy": 9.0, "twemproxy": 10.0}, p50), _round({"policy": 12.0, "twemproxy": 10.0}, p50),
              _round({"policy": 18.0, "twemproxy": 20.0}, p50)]
    against = cpu_against(rounds, "policy")
    assert against["c50"] == {"median": pytest.approx(0.9), "low": pytest.approx(0.9), "high": pytest.approx(1.2),
                              "rounds_at_most_1": 2, "rounds": 3}
    checks = {c["goal"]: c for c in goal_checks(summarize(rounds, list(p50)), list(p50), against)}
    assert checks["50 clients policy CPU per request <= 1.0x twemproxy's"]["ok"]
    assert checks["50 clients -P 16 policy CPU per request <= 1.0x twemproxy's"]["ok"]
    added = checks["1 client GET policy p50 added <= twemproxy's + 0.01 ms"]
    assert added["value"] == pytest.approx(0.005) and added["ok"]


def test_a_target_over_twemproxys_cpu_or_latency_misses():
    p50 = {"direct": 0.10, "proxy": 0.16, "twemproxy": 0.135}
    rounds = [_round({"proxy": 11.0, "twemproxy": 10.0}, p50) for _ in range(3)]
    against = cpu_against(rounds, "proxy")
    checks = {c["goal"]: c for c in goal_checks(summarize(rounds, list(p50)), list(p50), against)}
    assert not checks["50 clients proxy CPU per request <= 1.0x twemproxy's"]["ok"]
    assert not checks["1 client SET proxy p50 added <= twemproxy's + 0.01 ms"]["ok"]
    assert against["c50"]["rounds_at_most_1"] == 0


def test_without_twemproxy_nothing_is_held_against_it():
    p50 = {"direct": 0.10, "proxy": 0.16}
    rounds = [_round({"proxy": 11.0}, p50)]
    assert cpu_against(rounds, "proxy") == {}
    assert not any("twemproxy" in c["goal"] for c in goal_checks(summarize(rounds, list(p50)), list(p50), {}))

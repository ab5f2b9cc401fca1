"""benchmarks/run.py's `--pin` and CPU accounting, without a benchmark: which CPUs each kind of
process gets in each placement, that a process started with the pinning runs there, and that a
process's CPU time is split into user and system time as the kernel counts them."""

import os
import subprocess
import sys
import time

import pytest

from benchmarks.run import PLACEMENTS, BenchError, Pinning, parse_args, tree_cpu_seconds, tree_cpu_times

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

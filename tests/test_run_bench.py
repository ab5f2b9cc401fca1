"""benchmarks/run.py's `--pin`, without a benchmark: which CPUs each kind of process gets, and that
a process started with the pinning runs there."""

import os
import subprocess
import sys

import pytest

from benchmarks.run import BenchError, Pinning, parse_args

CPUS = sorted(os.sched_getaffinity(0))
needs_two = pytest.mark.skipif(len(CPUS) < 2, reason="--pin needs at least 2 CPUs")


@needs_two
def test_the_proxies_get_the_last_cpu_and_everything_else_the_others():
    pin = Pinning.of_machine()
    assert pin.proxy_cpus == {CPUS[-1]}
    assert pin.other_cpus == set(CPUS[:-1])


@needs_two
@pytest.mark.parametrize("proxy", [True, False], ids=["proxy", "server-and-benchmark"])
def test_a_process_started_pinned_runs_on_its_cpus(proxy):
    pin = Pinning.of_machine()
    out = subprocess.run([sys.executable, "-c", "import os; print(sorted(os.sched_getaffinity(0)))"],
                         capture_output=True, text=True, check=True, preexec_fn=pin.setter(proxy)).stdout
    assert out.strip() == str(sorted(pin.proxy_cpus if proxy else pin.other_cpus))
    assert sorted(os.sched_getaffinity(0)) == CPUS  # the caller is not moved


def test_without_pin_nothing_is_pinned():
    assert parse_args(["--targets", "direct"]).pinning is None


def test_pin_on_one_cpu_is_refused(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0})
    with pytest.raises(BenchError, match="at least 2 CPUs"):
        Pinning.of_machine()

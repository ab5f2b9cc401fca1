"""benchmarks/linear.py still decides and reads what it measures (a smoke run, no timing)."""

import re
import subprocess
import sys

from tests.servers import REPO


def test_the_linear_benchmark_prints_a_time_per_key_and_per_argument():
    done = subprocess.run([sys.executable, "benchmarks/linear.py", "--max", "10000", "--cut", "4096"],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    keys = re.findall(r"N= +([\d,]+) +[\d.]+ s +[\d.]+ µs/key +\(([\d,]+) findings\)", done.stdout)
    args = re.findall(r"N= +([\d,]+) +[\d.]+ s +[\d.]+ µs/arg", done.stdout)
    assert [n for n, _ in keys] == ["1,000", "10,000"] and [n for n in args] == ["1,000", "10,000"], done.stdout
    assert [findings for _, findings in keys] == ["3,000", "30,000"]  # three rules each, every one counted
    lines = int(re.search(r"decision log: (\d+) lines", done.stdout)[1])
    assert 0 < lines <= 12, done.stdout  # per rule: the first at once, the others in one line

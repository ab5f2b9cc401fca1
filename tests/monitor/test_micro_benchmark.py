"""benchmarks/micro_monitor.py still drives the monitoring hooks it measures (a smoke run, no timing)."""

import re
import subprocess
import sys

from tests.servers import REPO


def test_the_monitoring_micro_benchmark_runs_the_hooks():
    done = subprocess.run([sys.executable, "benchmarks/micro_monitor.py", "--batches", "200"],
                          cwd=REPO, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    for case in ("GET x1 ", "GET x16", "SET x1 ", "SET x16"):
        assert re.search(rf"^{case}: +-?\d+ ns per request for monitoring$", done.stdout, re.MULTILINE), done.stdout

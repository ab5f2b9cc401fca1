"""benchmarks/micro_policy.py still drives the session loop it measures (a smoke run, no timing)."""

import re
import subprocess
import sys

from tests.servers import REPO


def test_the_policy_micro_benchmark_runs_the_session_loop():
    done = subprocess.run([sys.executable, "benchmarks/micro_policy.py", "--keys", "100", "--batches", "20",
                           "--shadow", "configs/policies/strict-dotted.yaml"],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    for command in ("SET", "GET"):
        assert re.search(rf"^{command}: +\d+ without, +\d+ with the policy \(\+-?\d+\), +\d+ with the shadow "
                         r"policy too \(\+-?\d+\)$", done.stdout, re.M), done.stdout

"""benchmarks/micro_session.py still drives the whole request path it measures: requests in,
replies out, with and without a policy, in front of one server or a cluster (a smoke run, no timing)."""

import re
import subprocess
import sys

import pytest

from tests.servers import REPO


@pytest.mark.parametrize("policy", [[], ["--policy", "configs/policies/strict-dotted.yaml"], ["--cluster"]],
                         ids=["none", "strict", "cluster"])
def test_the_session_micro_benchmark_answers_every_request(policy):
    done = subprocess.run([sys.executable, "benchmarks/micro_session.py", "--rounds", "16", "--repeats", "1",
                           "--clients", "4", "--check", *policy],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    for case in ("GET -P 1 ", "SET -P 1 ", "GET -P 16", "SET -P 16"):
        assert re.search(rf"^{case}: +\d+ ns per request$", done.stdout, re.M), done.stdout

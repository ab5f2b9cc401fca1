"""`redis-guard audit --upstream-cluster` against a real Redis Cluster (3 masters x 1 replica):
every master is scanned once (replicas are not), and the counts equal the seeded counts."""

import json
import subprocess
import sys

import pytest

from tests.cluster.start import start_cluster
from tests.servers import REPO


@pytest.fixture(scope="module")
def cluster():
    c = start_cluster(masters=3, replicas=1)
    yield c
    c.close()


# key pattern, how many, TTL (None: none), value
SEEDS = [
    ("good:item:{}", 60, 600, "v"),
    ("nottl:item:{}", 25, None, "v"),
    ("big:item:{}", 6, 600, "x" * 300),
    ("doc:item:{}", 9, 600, '{"a": 1}'),
]


def test_every_master_scanned_once(cluster, tmp_path):
    for pattern, count, ttl, value in SEEDS:
        for i in range(count):
            key = pattern.format(i)
            cluster.client(cluster.master_for_key(key)).set(key, value, ex=ttl)
    policy = tmp_path / "policy.yaml"
    policy.write_text("name: cluster\nrules:\n  V4: {}\n")
    masters = cluster.masters()
    seeds = ",".join(f"127.0.0.1:{node.port}" for node in cluster.replicas()[:1] + masters[:1])
    run = subprocess.run(
        [sys.executable, "-m", "proxy", "audit", "--upstream-cluster", seeds, "--policy", str(policy),
         "--max-string-bytes", "200", "--json", "-", "--quiet", "--count", "10"],
        cwd=REPO, capture_output=True, text=True, timeout=60)
    assert run.returncode == 1, run.stderr
    report = json.loads(run.stdout)
    total = sum(count for _, count, _, _ in SEEDS)
    assert report["complete"] is True
    assert report["keys"]["scanned"] == total
    assert {rule: entry["keys"] for rule, entry in report["rules"].items()} == {"O1": 25, "V1": 6, "V4": 9}
    assert sorted(server["address"] for server in report["servers"]) == sorted(
        f"127.0.0.1:{node.port}" for node in masters)
    assert sum(server["scanned"] for server in report["servers"]) == total
    assert all(server["dbsize"] == server["scanned"] for server in report["servers"])

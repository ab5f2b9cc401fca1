"""A shadow policy through a running proxy in front of a real redis-server: the enforcing policy
decides, the candidate (`shadow_policy:` in the config, or `--shadow-policy`) only counts and logs
what it would reject or rewrite, under its own name; it hot-reloads like the main policy."""

from __future__ import annotations

import json
import os
import time
import urllib.request

import pytest
import redis

from tests.integration.test_policy_proxy import start_with
from tests.servers import RedisServer

ENFORCING = "name: enforcing\nrules:\n  K2: {style: lowercase}\n  C2: {baseline: false}\n"  # KEYS passes
CANDIDATE = "name: {name}\nrules:\n  K2: {{style: lowercase}}\n  T1: {{action: reject}}\n  C4: {{}}\n  C1: {{}}\n"


@pytest.fixture
def setup(tmp_path):
    server = RedisServer()
    process, metrics_port = start_with(server, tmp_path, "policy: enforcing.yaml\nshadow_policy: candidate.yaml\n",
                                       **{"enforcing.yaml": ENFORCING,
                                          "candidate.yaml": CANDIDATE.format(name="candidate")})
    yield server, process, tmp_path, metrics_port
    process.stop()
    server.close()


def _samples(port: int, **labels) -> float:
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    total = 0.0
    for line in body.splitlines():
        if line.startswith("redis_guard_policy_findings_total{") and all(
                f'{key}="{value}"' in line for key, value in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


def _wait(check, what: str, timeout: float = 5.0):
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def test_the_candidate_counts_and_logs_and_changes_nothing(setup):
    server, process, _, metrics_port = setup
    assert "policy 'enforcing' (enforce, 2 rules), shadow policy 'candidate'" in process.log
    client = redis.Redis(port=process.port)
    direct = redis.Redis(port=server.port)
    pipe = client.pipeline(transaction=False)
    for n in range(50):
        pipe.set(f"user:{n}", "v")  # no TTL: the candidate's T1 would reject each
    assert pipe.execute() == [True] * 50
    assert direct.get("user:49") == b"v" and direct.ttl("user:49") == -1
    calls = direct.info("commandstats")
    assert client.delete("user:1") == 1  # the candidate's C4 would send UNLINK; DEL runs
    after = direct.info("commandstats")
    assert after["cmdstat_del"]["calls"] == calls.get("cmdstat_del", {}).get("calls", 0) + 1
    assert after.get("cmdstat_unlink") == calls.get("cmdstat_unlink")
    assert client.keys("user:4*")  # the candidate's C1 would reject it
    with pytest.raises(redis.exceptions.NoPermissionError, match="K2"):
        client.set("User:1", "v")  # the enforcing policy rejects it: not the candidate's business
    _wait(lambda: _samples(metrics_port, policy="candidate", rule="C1") == 1, "C1 counted")
    assert _samples(metrics_port, policy="candidate", rule="T1", outcome="would-reject") == 50
    assert _samples(metrics_port, policy="candidate", rule="C4", outcome="would-rewrite") == 1
    assert _samples(metrics_port, policy="candidate", rule="K2") == 0
    assert _samples(metrics_port, policy="enforcing", outcome="rejected", rule="K2") == 1
    shadow_lines = [json.loads(line.split(": ", 1)[1]) for line in process.lines if '"event": "shadow"' in line]
    t1 = [line for line in shadow_lines if line["rule"] == "T1"]
    assert len(t1) == 1 and t1[0]["subject"] == "key 'user:0'" and t1[0]["policy"] == "candidate"  # sampled
    # KEYS: the candidate's C1, and its C2 (it keeps the baseline guard, not naming C2)
    assert {line["rule"] for line in shadow_lines} == {"T1", "C4", "C1", "C2"}


def test_the_shadow_policy_hot_reloads_and_refuses_a_broken_file(setup):
    _, process, tmp_path, metrics_port = setup
    client = redis.Redis(port=process.port)  # connected before the reload: its session takes the new candidate
    assert client.set("user:0", "v") is True
    _wait(lambda: _samples(metrics_port, policy="candidate", rule="T1") == 1, "T1 under the first name")
    candidate = tmp_path / "candidate.yaml"
    candidate.write_text(CANDIDATE.format(name="second"))
    stamp = time.time_ns() + 50_000_000
    os.utime(candidate, ns=(stamp, stamp))
    _wait(lambda: "shadow policy reloaded (file changed): 'second'" in process.log, process.log)
    assert client.set("user:1", "v") is True
    _wait(lambda: _samples(metrics_port, policy="second", rule="T1") == 1, "T1 under the new name")
    candidate.write_text("name: broken\nrules:\n  C2: {deny: [FLUSHAL]}\n")
    stamp += 50_000_000
    os.utime(candidate, ns=(stamp, stamp))
    _wait(lambda: "shadow policy reload (file changed) refused, keeping policy 'second'" in process.log, process.log)
    assert "did you mean FLUSHALL?" in process.log
    assert client.set("user:2", "v") is True
    _wait(lambda: _samples(metrics_port, policy="second", rule="T1") == 2, "the old candidate stays")

"""`redis-guard audit` as a user runs it, against a real redis-server seeded with a known mix of
good and bad keys: the counts per rule in the JSON, terminal and HTML reports equal the seeded
counts; the progress line; SIGINT mid-scan gives a partial report; connection errors."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from html.parser import HTMLParser

import pytest

from tests.servers import REPO, RedisServer, free_port, wait_for

redis = pytest.importorskip("redis")

POLICY = """
name: audit-live
rules:
  K1: {delimiter: ":", min_segments: 3, max_segments: 6}
  K2: {style: lowercase}
  K4: {max_length: 60}
  K6: {position: last, required: true}
  T1: {action: reject, persistent: ["config:*"]}
  T3: {max_ttl: 86400}
  V1: {max_bytes: 1000}
  V2: {max_elements: 50, per_type: {hash: 20}}
  V4: {sample_bytes: 64}
"""

LONG_SEGMENT = "x" * 70


def _string(value, ttl=3600):
    return lambda r, k: r.set(k, value, ex=ttl)


def _hash(fields, ttl=3600):
    def write(r, k):
        r.hset(k, mapping={f"f{i}": "v" for i in range(fields)})
        if ttl:
            r.expire(k, ttl)
    return write


def _set(members):
    return lambda r, k: (r.sadd(k, *[f"m{i}" for i in range(members)]), r.expire(k, 3600))


def _list(items):
    return lambda r, k: (r.rpush(k, *[f"i{i}" for i in range(items)]), r.expire(k, 3600))


def _stream(r, k):
    r.xadd(k, {"a": "1"})
    r.expire(k, 3600)


# (key pattern, how many, write(client, key), the rules each key breaks)
SEEDS = [
    ("app:item:{}:string", 50, _string("v"), set()),
    ("app:user:{}:hash", 20, _hash(3), set()),
    ("app:queue:{}:list", 3, _list(5), set()),
    ("app:events:{}:stream", 2, _stream, set()),
    ("app:text:{}:string", 3, _string("{not json"), set()),
    ("app:nottl:{}:string", 30, _string("v", ttl=None), {"T1"}),  # T1's, not O1's too
    ("config:flag:{}:string", 5, _string("on", ttl=None), {"O1"}),  # T1 persistent
    ("App:Upper:{}:string", 7, _string("v"), {"K2"}),
    ("app:{}", 6, _string("v"), {"K1", "K6"}),  # two segments, no type word
    ("app:wrong:{}:string", 4, _hash(2), {"K6"}),
    ("app:" + LONG_SEGMENT + ":{}:string", 3, _string("v"), {"K4"}),
    ("app:blob:{}:string", 5, _string("a" * 2000), {"V1"}),
    ("app:bighash:{}:hash", 3, _hash(25), {"V2"}),
    ("app:bigset:{}:set", 2, _set(60), {"V2"}),
    ("app:doc:{}:string", 8, _string('{"name": "x", "n": 1}'), {"V4"}),
    ("app:docs:{}:string", 2, _string('[{"a": 1}, {"a": 2}]'), {"V4"}),
    ("app:longttl:{}:string", 4, _string("v", ttl=200000), {"T3"}),
    ("App:bighash:{}:hash", 2, _hash(30, ttl=None), {"K2", "T1", "V2"}),
]


def expected_counts() -> dict[str, int]:
    counts: dict[str, int] = {}
    for _, count, _, rules in SEEDS:
        for rule in rules:
            counts[rule] = counts.get(rule, 0) + count
    return counts


TOTAL = sum(count for _, count, _, _ in SEEDS)
WITH_FINDINGS = sum(count for _, count, _, rules in SEEDS if rules)


def seed(client) -> None:
    for pattern, count, write, _ in SEEDS:
        for i in range(count):
            write(client, pattern.format(i))


@pytest.fixture(scope="module")
def seeded(tmp_path_factory):
    server = RedisServer(None, "--enable-debug-command", "yes")
    client = redis.Redis(port=server.port)
    seed(client)
    assert client.dbsize() == TOTAL
    policy = tmp_path_factory.mktemp("audit") / "policy.yaml"
    policy.write_text(POLICY)
    yield server, str(policy)
    client.close()
    server.close()


def audit(*args, timeout=60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "proxy", "audit", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=timeout)


def test_json_counts_equal_the_seeded_counts(seeded):
    server, policy = seeded
    run = audit("--upstream", server.url, "--policy", policy, "--json", "--count", "7", "--quiet")
    assert run.returncode == 1, run.stderr  # findings
    report = json.loads(run.stdout)
    assert report["complete"] is True and report["interrupted"] is False
    assert report["keys"]["scanned"] == TOTAL
    assert report["keys"]["with_findings"] == WITH_FINDINGS
    assert {rule: entry["keys"] for rule, entry in report["rules"].items()} == expected_counts()
    assert report["servers"] == [{"address": f"127.0.0.1:{server.port}", "dbsize": TOTAL,
                                  "scanned": TOTAL, "complete": True}]
    assert {item["key"] for item in report["rules"]["V1"]["top"]} == {f"app:blob:{i}:string" for i in range(5)}
    memories = [item["memory"] for item in report["biggest"]]
    assert memories == sorted(memories, reverse=True) and len(memories) == 10
    assert {f"app:blob:{i}:string" for i in range(5)} <= {item["key"] for item in report["biggest"]}
    spaces = {space["namespace"]: space for space in report["namespaces"]}
    assert spaces["App"]["keys"] == 9 and spaces["App"]["rules"] == {"K2": 9, "T1": 2, "V2": 2}
    assert spaces["config"]["rules"] == {"O1": 5}
    assert report["not_checked"]["K3"] == "not in the policy"


def test_terminal_summary_and_html_have_the_same_counts(seeded, tmp_path):
    server, policy = seeded
    html_file = tmp_path / "report.html"
    json_file = tmp_path / "report.json"
    run = audit("--upstream", server.url, "--policy", policy, "--html", str(html_file),
                "--json", str(json_file))
    assert run.returncode == 1, run.stderr
    counts = expected_counts()
    rows = dict(re.findall(r"^  ([A-Z]\d+) .*?\s(\d[\d,]*)   ", run.stdout, re.M))
    assert {rule: int(n.replace(",", "")) for rule, n in rows.items() if n != "0"} == counts
    assert f"{TOTAL} keys scanned" in run.stdout
    assert json.loads(json_file.read_text())["keys"]["scanned"] == TOTAL
    assert re.search(r"audit: \d+ of ~\d+ keys", run.stderr)  # the progress line (not a TTY: lines)

    class Page(HTMLParser):
        text, tags = [], []

        def handle_starttag(self, tag, attrs):
            self.tags.append(tag)

        def handle_data(self, data):
            self.text.append(data)

    page = Page()
    page.feed(html_file.read_text())
    text = " ".join(page.text)
    assert page.tags.count("svg") == 2 and "script" not in page.tags
    for rule, count in counts.items():
        assert re.search(rf"\b{rule} [^:]+: {count:,} keys", text), rule


def test_match_and_thresholds_from_the_command_line(seeded):
    server, _ = seeded
    base = ("--upstream", server.url, "--match", "app:blob:*", "--json", "-", "--quiet")
    run = audit(*base, "--max-string-bytes", "5000")
    report = json.loads(run.stdout)
    assert run.returncode == 0, run.stderr  # no policy: only O1 and big keys, and these have neither
    assert report["keys"]["scanned"] == 5 and report["rules"] == {}
    run = audit(*base, "--max-string-bytes", "1500")
    report = json.loads(run.stdout)
    assert run.returncode == 1 and {rule: e["keys"] for rule, e in report["rules"].items()} == {"V1": 5}
    assert report["checked"][-2] == {"rule": "V1", "title": "string size",
                                     "what": "strings over 1500 bytes (command line)"}


def test_compare_with_the_previous_run(tmp_path):
    server = RedisServer()
    try:
        client = redis.Redis(port=server.port)
        for n in range(6):
            client.set(f"app:item:{n}:string", "v")  # no TTL: T1
        client.set("App:item:9:string", "v", ex=60)  # K2
        policy = tmp_path / "policy.yaml"
        policy.write_text(POLICY)
        first = tmp_path / "first.json"
        run = audit("--upstream", server.url, "--policy", str(policy), "--json", str(first), "--quiet")
        assert run.returncode == 1, run.stderr
        for n in range(4):
            client.expire(f"app:item:{n}:string", 60)  # better: T1
        client.set("App:item:8:string", "v", ex=60)  # worse: K2
        run = audit("--upstream", server.url, "--policy", str(policy), "--compare", str(first), "--quiet")
        assert run.returncode == 1, run.stderr
        assert "Since the previous run" in run.stdout
        assert "better: T1 6 -> 2 keys (-4)" in run.stdout and "worse: K2 1 -> 2 keys (+1)" in run.stdout
        run = audit("--upstream", server.url, "--policy", str(policy), "--compare", str(first), "--json", "-",
                    "--quiet")
        comparison = json.loads(run.stdout)["comparison"]
        assert {item["code"]: (item["before"], item["after"]) for item in comparison["recommendations"]} == {
            "set-ttls": (6, 2), "rename-keys": (1, 2)}
        spaces = {item["namespace"]: item for item in comparison["namespaces"]}
        assert spaces["app"]["rules"] == {"T1": [6, 2]} and spaces["App"]["rules"] == {"K2": [1, 2]}
        run = audit("--upstream", server.url, "--compare", str(tmp_path / "policy.yaml"), "--quiet")
        assert run.returncode == 2 and "not JSON" in run.stderr
        client.close()
    finally:
        server.close()


def test_a_clean_keyspace_exits_0(tmp_path):
    server = RedisServer()
    try:
        client = redis.Redis(port=server.port)
        client.set("a:b:string", "v", ex=60)
        run = audit("--upstream", server.url, "--json", "-", "--quiet")
        assert run.returncode == 0, run.stderr
        assert json.loads(run.stdout)["keys"] == {"scanned": 1, "vanished": 0, "with_findings": 0,
                                                  "memory_bytes": json.loads(run.stdout)["keys"]["memory_bytes"],
                                                  "by_type": {"string": 1}}
        client.close()
    finally:
        server.close()


def test_sigint_mid_scan_gives_a_partial_report(tmp_path):
    server = RedisServer(None, "--enable-debug-command", "yes")
    try:
        client = redis.Redis(port=server.port)
        client.execute_command("DEBUG", "POPULATE", 50000, "big:item")
        out = tmp_path / "partial.json"
        process = subprocess.Popen(
            [sys.executable, "-m", "proxy", "audit", "--upstream", server.url, "--rate", "10000",
             "--json", str(out)], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            # started: the server saw the audit's SCANs
            wait_for(lambda: client.info("commandstats").get("cmdstat_scan", {}).get("calls", 0) >= 3,
                     20, "the audit's first SCANs")
            process.send_signal(signal.SIGINT)
            stdout, stderr = process.communicate(timeout=30)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        assert process.returncode == 130, stderr
        report = json.loads(out.read_text())
        assert report["complete"] is False and report["interrupted"] is True
        assert 0 < report["keys"]["scanned"] < 50000
        assert report["rules"]["O1"]["keys"] == report["keys"]["scanned"]
        assert "PARTIAL (interrupted)" in stdout
        client.close()
    finally:
        server.close()


def test_server_lost_mid_scan_gives_a_partial_report_and_exit_2(tmp_path):
    server = RedisServer(None, "--enable-debug-command", "yes")
    try:
        client = redis.Redis(port=server.port)
        client.execute_command("DEBUG", "POPULATE", 30000, "lost:item")
        out = tmp_path / "lost.json"
        process = subprocess.Popen(
            [sys.executable, "-m", "proxy", "audit", "--upstream", server.url, "--rate", "5000",
             "--json", str(out), "--quiet"], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            wait_for(lambda: client.info("commandstats").get("cmdstat_scan", {}).get("calls", 0) >= 3,
                     20, "the audit's first SCANs")
            client.close()
            server.stop()
            stdout, stderr = process.communicate(timeout=30)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        assert process.returncode == 2, stderr
        report = json.loads(out.read_text())
        assert report["complete"] is False and report["interrupted"] is False
        assert 0 < report["keys"]["scanned"] < 30000
        assert "lost" in report["servers"][0]["error"]
        assert "PARTIAL (errors)" in stdout and f"error on 127.0.0.1:{server.port}" in stdout
    finally:
        server.close()


def test_rate_limit_bounds_the_reads(seeded):
    server, policy = seeded
    started = time.monotonic()
    run = audit("--upstream", server.url, "--rate", "100", "--json", "-", "--quiet")
    elapsed = time.monotonic() - started
    assert json.loads(run.stdout)["keys"]["scanned"] == TOTAL
    assert elapsed >= (TOTAL - 10) / 100  # 10 keys a SCAN: the last batch is not waited for


@pytest.mark.parametrize("args, message", [
    ([], "no server to scan"),
    (["--upstream", f"redis://127.0.0.1:{free_port()}"], "Connect"),
    (["--upstream", "redis://127.0.0.1:1", "--policy", os.path.join(REPO, "missing.yaml")], "missing.yaml"),
])
def test_usage_and_connection_errors_exit_2(args, message):
    run = audit(*args, "--quiet")
    assert run.returncode == 2
    assert message.lower() in run.stderr.lower()

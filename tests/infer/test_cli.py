"""`redis-guard policy infer` as a user runs it: --sample, the draft on stdout, usage and
connection errors, and a Redis Cluster (every master scanned)."""

from __future__ import annotations

import pytest

from proxy.cli import main
from tests.servers import free_port

redis = pytest.importorskip("redis")


def _fill(client, n: int) -> None:
    pipe = client.pipeline(transaction=False)
    for i in range(n):
        pipe.hset(f"user:{i}", "name", "x")
        pipe.set(f"token:{i}", "v", ex=600)
    pipe.execute()


def test_sample_reads_a_part(own_redis, tmp_path, capsys):
    client = redis.Redis(port=own_redis.port)
    _fill(client, 1500)
    client.close()
    draft = tmp_path / "d.yaml"
    assert main(["policy", "infer", "--upstream", own_redis.url, "--sample", "500", "-o", str(draft),
                 "--fixtures", str(tmp_path / "f.yaml"), "--quiet"]) == 0
    assert "from 500 keys" in draft.read_text()
    assert (tmp_path / "f.yaml").read_text().startswith("# Fixtures")
    assert "policy infer: 500 keys" in capsys.readouterr().out


def test_draft_on_stdout_summary_on_stderr(own_redis, capsys):
    client = redis.Redis(port=own_redis.port)
    _fill(client, 30)
    client.close()
    assert main(["policy", "infer", "--upstream", own_redis.url, "--min-keys", "5", "--name", "mine"]) == 0
    captured = capsys.readouterr()
    assert "name: mine" in captured.out and "- key: \"user:{id}\"" in captured.out
    assert "policy infer: 60 keys" in captured.err
    assert "60 of ~60 keys" in captured.err  # the progress line, on stderr


def test_usage_and_connection_errors(capsys, monkeypatch):
    monkeypatch.chdir("/")
    assert main(["policy", "infer"]) == 2
    assert "no server to scan" in capsys.readouterr().err
    assert main(["policy", "infer", "--upstream", f"redis://127.0.0.1:{free_port()}", "--quiet"]) == 2
    assert "cannot scan" in capsys.readouterr().err
    assert main(["policy", "infer", "--upstream", "http://x", "--quiet"]) == 2
    assert "only redis://" in capsys.readouterr().err


def test_cluster_every_master(tmp_path, capsys):
    from tests.cluster.start import start_cluster

    cluster = start_cluster(masters=3, replicas=0)
    try:
        client = redis.RedisCluster(host="127.0.0.1", port=cluster.nodes[0].port)
        for i in range(300):
            client.hset(f"user:{i}", "name", "x")
        client.close()
        draft = tmp_path / "d.yaml"
        assert main(["policy", "infer", "--upstream-cluster", cluster.seeds, "-o", str(draft), "--quiet"]) == 0
        text = draft.read_text()
        assert "from 300 keys" in text and "type: hash  # 300 of 300 keys" in text
    finally:
        cluster.close()


def test_sentinel_managed_master(tmp_path):
    from tests.sentinel.group import SentinelGroup

    group = SentinelGroup()
    try:
        client = redis.Redis(port=group.master.port)
        _fill(client, 40)
        client.close()
        draft = tmp_path / "d.yaml"
        assert main(["policy", "infer", "--upstream-sentinel", group.spec, "-o", str(draft), "--quiet"]) == 0
        text = draft.read_text()
        assert "from 80 keys" in text and "(master rgmaster)" in text
    finally:
        group.close()

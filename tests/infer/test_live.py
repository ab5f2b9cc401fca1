"""`redis-guard policy infer` on real keyspaces generated from each preset's convention and from
the key-schema example, outliers mixed in: the draft passes `policy check`, its fixtures pass
`policy test`, and `redis-guard audit --policy draft.yaml` on the same keyspace flags exactly the
outliers."""

from __future__ import annotations

import json

import pytest

from proxy.cli import main
from tests.infer.keyspaces import KEYSPACES, populate

redis = pytest.importorskip("redis")


@pytest.fixture
def client(own_redis):
    connection = redis.Redis(port=own_redis.port)
    yield connection
    connection.close()


def _flagged(report: dict) -> set[str]:
    return {item["key"] for rule in report["rules"].values() for item in rule["top"]}


@pytest.mark.parametrize("name", sorted(KEYSPACES))
def test_draft_proves_itself(name, own_redis, client, tmp_path, capsys):
    outliers = populate(client, name)
    draft = tmp_path / "draft.yaml"
    assert main(["policy", "infer", "--upstream", own_redis.url, "-o", str(draft), "--quiet"]) == 0
    summary = capsys.readouterr().out
    total = client.dbsize()
    assert f"the draft accepts {total - len(outliers):,} of {total:,} keys" in summary
    comments = [line for line in draft.read_text().splitlines() if line.startswith("#   ")]
    for key in outliers:  # every outlier is named, with its reason, among the draft's closing comments
        assert any(key in line for line in comments), (key, comments)
    assert main(["policy", "check", str(draft)]) == 0, capsys.readouterr()
    capsys.readouterr()
    fixtures = tmp_path / "draft.test.yaml"
    assert "expect: {reject" in fixtures.read_text()
    status = main(["policy", "test", str(fixtures)])
    out = capsys.readouterr().out
    assert status == 0, out
    assert " 0 failed" in out
    report_path = tmp_path / "audit.json"
    main(["audit", "--upstream", own_redis.url, "--policy", str(draft), "--json", str(report_path),
          "--quiet", "--top", "1000"])
    capsys.readouterr()
    report = json.loads(report_path.read_text())
    assert report["complete"]
    assert _flagged(report) == outliers, report["rules"]
    assert report["keys"]["with_findings"] == len(outliers)

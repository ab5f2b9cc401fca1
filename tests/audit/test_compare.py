"""`redis-guard audit --compare PREVIOUS.json` (`audit/compare.py`): totals, rules, namespaces and
recommendation codes side by side, better and worse; and only an audit report is accepted."""

from __future__ import annotations

import json

import pytest

from proxy.audit.compare import CompareError, compare, load_previous
from proxy.audit.facts import KeyFacts
from proxy.audit.report import Report
from proxy.policy.base import Finding


def report(rows, **meta) -> dict:
    built = Report(meta={"target": "redis://h:1/0", "policy": "p", "started": "then", **meta})
    for key, ttl, rules in rows:
        built.add(KeyFacts(key, "string", ttl, 100, 1), [Finding(rule, f"title {rule}", "key", "advice")
                                                            for rule in rules])
    return built.to_dict()


BEFORE = [(b"user:1", -1, ["T1", "K2"]), (b"user:2", -1, ["T1"]), (b"order:1", 5000, ["K2"]),
          (b"order:2", 5000, [])]
AFTER = [(b"user:1", 5000, ["K2"]), (b"user:2", 5000, []), (b"order:1", -1, ["K2", "T1"]),
         (b"order:2", 5000, []), (b"cart:1", 5000, ["V1"])]


def test_what_got_better_and_worse():
    result = compare(report(BEFORE), report(AFTER))
    assert result["notes"] == []
    totals = {item["what"]: (item["before"], item["after"], item["change"]) for item in result["totals"]}
    assert totals["scanned"] == (4, 5, 1) and totals["with_findings"] == (3, 3, 0)
    assert totals["without_ttl"] == (2, 1, -1)
    rules = {item["rule"]: (item["before"], item["after"], item["change"]) for item in result["rules"]}
    assert rules == {"K2": (2, 2, 0), "T1": (2, 1, -1), "V1": (0, 1, 1)}
    spaces = {item["namespace"]: (item["before"], item["after"], item["rules"]) for item in result["namespaces"]}
    assert spaces == {"user": (2, 1, {"T1": [2, 0]}), "order": (1, 1, {"T1": [0, 1]}), "cart": (0, 1, {"V1": [0, 1]})}
    codes = {item["code"]: (item["before"], item["after"]) for item in result["recommendations"]}
    assert codes == {"set-ttls": (2, 1), "rename-keys": (2, 2), "split-big-strings": (0, 1)}
    assert json.loads(json.dumps(result)) == result


def test_another_target_or_policy_is_noted():
    result = compare(report(BEFORE, target="redis://other:1/0", complete=False), report(AFTER))
    assert result["notes"] == ["the previous run had another target: 'redis://other:1/0'",
                               "the previous run was partial"]


@pytest.mark.parametrize("text, words", [
    ("{", "not JSON"),
    ('{"keys": 1}', "not the JSON report of redis-guard audit"),
    ("[]", "not the JSON report"),
])
def test_only_an_audit_report_is_accepted(tmp_path, text, words):
    path = tmp_path / "previous.json"
    path.write_text(text)
    with pytest.raises(CompareError, match=words):
        load_previous(str(path))
    with pytest.raises(CompareError, match="No such file"):
        load_previous(str(tmp_path / "missing.json"))

"""The report's accumulation: counts per rule are keys (a key counts once per rule), namespaces
by the first segment, bounded offender lists (the biggest first), the size histogram, and the
bounds on what it keeps whatever the keyspace."""

import json

import pytest

from proxy.audit import report as report_module
from proxy.audit.facts import KeyFacts
from proxy.audit.report import NO_NAMESPACE, OTHER_NAMESPACES, Report
from proxy.policy.base import Finding


def finding(rule):
    return Finding(rule, f"title {rule}", "key", f"advice {rule}")


def test_counts_namespaces_and_offenders():
    report = Report(top=2, meta={"target": "t"})
    rows = [
        (b"user:1", "string", 100, ["K2"]),
        (b"user:2", "string", 300, ["K2", "O1"]),
        (b"user:3", "hash", 200, ["K2", "K2"]),  # one key breaking a rule twice counts once
        (b"user:4", "hash", 50, []),
        (b"order:1", "set", 1000, ["O1"]),
        (b"plain", "string", 10, ["K1"]),
    ]
    for key, kind, memory, rules in rows:
        report.add(KeyFacts(key, kind, -1, memory, 1), [finding(rule) for rule in rules])
    report.add_vanished(2)
    data = report.to_dict()
    assert data["target"] == "t"
    assert data["keys"] == {"scanned": 6, "vanished": 2, "with_findings": 5, "memory_bytes": 1660,
                            "by_type": {"hash": 2, "set": 1, "string": 3}}
    assert {rule: entry["keys"] for rule, entry in data["rules"].items()} == {"O1": 2, "K1": 1, "K2": 3}
    assert list(data["rules"]) == ["O1", "K1", "K2"]  # the rules' order, O1 first
    assert [item["key"] for item in data["rules"]["K2"]["top"]] == ["user:2", "user:3"]  # the 2 biggest
    spaces = {space["namespace"]: space for space in data["namespaces"]}
    assert data["namespaces"][0]["namespace"] == "user"  # most keys with findings first
    assert spaces["user"]["keys"] == 4 and spaces["user"]["keys_with_findings"] == 3
    assert spaces["user"]["rules"] == {"O1": 1, "K2": 3}
    assert spaces["user"]["top"][0] == {"key": "user:2", "size": 300, "rules": ["O1", "K2"]}
    assert spaces[NO_NAMESPACE]["keys"] == 1
    assert [item["key"] for item in data["biggest"]] == ["order:1", "user:2"]
    assert json.loads(json.dumps(data)) == data  # plain data


@pytest.mark.parametrize("memory, bucket", [(1, (1, 1)), (64, (64, 127)), (100, (64, 127)), (1 << 20, (1 << 20, (1 << 21) - 1))])
def test_size_histogram_buckets(memory, bucket):
    report = Report()
    report.add(KeyFacts(b"k", "string", -1, memory, 1), [])
    (entry,) = report.to_dict()["size_histogram"]
    assert (entry["min_bytes"], entry["max_bytes"]) == bucket and entry["keys"] == {"string": 1}


def test_unknown_memory_ranks_by_length_and_is_not_in_the_histogram():
    report = Report()
    report.add(KeyFacts(b"a:1", "list", -1, None, 5000), [])
    report.add(KeyFacts(b"a:2", "list", -1, 70, 1), [])
    data = report.to_dict()
    assert data["biggest"][0]["key"] == "a:1"
    assert sum(sum(b["keys"].values()) for b in data["size_histogram"]) == 1


def test_namespaces_are_bounded(monkeypatch):
    monkeypatch.setattr(report_module, "MAX_NAMESPACES", 3)
    report = Report(delimiter=b"/")
    for i in range(10):
        report.add(KeyFacts(f"ns{i}/k".encode(), "string", -1, 10, 1), [])
    names = [space["namespace"] for space in report.to_dict()["namespaces"]]
    assert len(names) == 4 and OTHER_NAMESPACES in names
    assert sum(space["keys"] for space in report.to_dict()["namespaces"]) == 10


def test_keys_that_are_not_utf8_are_shown_escaped():
    report = Report()
    report.add(KeyFacts(b"bin:\xff", "string", -1, 10, 1), [finding("K3")])
    assert report.to_dict()["rules"]["K3"]["top"][0]["key"] == "bin:\\xff"


@pytest.mark.parametrize("ttl_ms, group", [
    (-1, "no TTL"), (0, "< 1 h"), (3_599_999, "< 1 h"), (3_600_000, "< 1 day"), (86_399_999, "< 1 day"),
    (86_400_000, "< 1 week"), (604_799_999, "< 1 week"), (604_800_000, "longer"), (10 ** 12, "longer"),
])
def test_ttl_groups(ttl_ms, group):
    report = Report()
    report.add(KeyFacts(b"k", "string", ttl_ms, 70, 1), [])
    report.add(KeyFacts(b"j", "string", 3_600_000, None, 1), [])  # memory unknown: counted, 0 bytes
    groups = {entry["ttl"]: (entry["keys"], entry["memory"]) for entry in report.to_dict()["ttl_distribution"]}
    assert list(groups) == ["no TTL", "< 1 h", "< 1 day", "< 1 week", "longer"]
    expected = {name: (0, 0) for name in groups}
    expected["< 1 day"] = (1, 0)
    keys, memory = expected[group]
    expected[group] = (keys + 1, memory + 70)
    assert groups == expected


def test_recommendations_count_each_key_once_per_code():
    report = Report()
    report.add(KeyFacts(b"Big:1", "string", -1, 500, 1), [finding("K1"), finding("K2"), finding("O1")])
    report.add(KeyFacts(b"Big:2", "string", -1, 400, 1), [finding("K2"), finding("T1"), finding("V1")])
    report.add(KeyFacts(b"big:3", "string", 10, 300, 1), [finding("V1")])
    recommendations = report.to_dict()["recommendations"]
    assert [(item["code"], item["keys"], item["rules"]) for item in recommendations] == [
        ("rename-keys", 2, ["K1", "K2"]), ("set-ttls", 2, ["O1", "T1"]), ("split-big-strings", 2, ["V1"])]
    assert recommendations[0]["examples"] == ["Big:1", "Big:2"]
    assert all(item["advice"] for item in recommendations)


def test_every_rule_the_audit_reports_has_a_recommendation():
    from proxy.audit.classify import NAME_RULES
    from proxy.audit.recommend import GROUPS

    assert set(GROUPS) == {*NAME_RULES, "O1", "T1", "T3", "K6", "K10", "V1", "V2", "V4"}

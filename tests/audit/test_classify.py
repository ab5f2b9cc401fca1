"""The audit's classification of one key's facts, on tables: which rules fire for which facts
under which policy, thresholds from the command line, the policy or the defaults, the rules
reported as not checked, and the key schema (K10)."""

import pytest

from proxy.audit.classify import DEFAULT_ELEMENTS, DEFAULT_STRING_BYTES, Auditor, Thresholds
from proxy.audit.facts import KeyFacts
from proxy.commands.table import CommandTable
from proxy.policy.engine import Engine
from proxy.policy.loader import load_policy_text

TABLE = CommandTable.from_snapshot()

POLICY = """
name: audit-test
rules:
  K1: {delimiter: ":", min_segments: 3, max_segments: 6}
  K2: {style: lowercase}
  K4: {max_length: 40}
  K6: {position: last, required: true}
  T1: {action: reject, persistent: ["config:*"]}
  T3: {max_ttl: 86400}
  V1: {max_bytes: 100}
  V2: {max_elements: 50, per_type: {hash: 10}}
  V4: {sample_bytes: 64}
"""


def auditor(text=POLICY, thresholds=Thresholds()):
    policy = load_policy_text(text)
    return Auditor(policy, Engine(policy, TABLE), thresholds)


HOUR = 3_600_000
CASES = [
    # facts, the rules that fire
    (KeyFacts(b"app:item:1:string", "string", HOUR, 60, 5, b"hello"), set()),
    (KeyFacts(b"app:item:1:string", "string", -1, 60, 5, b"hello"), {"T1"}),  # T1's, not O1's too
    (KeyFacts(b"config:flag:1:string", "string", -1, 60, 5, b"on"), {"O1"}),  # T1 persistent
    (KeyFacts(b"App:item:1:string", "string", HOUR, 60, 5, b"x"), {"K2"}),
    (KeyFacts(b"app:1", "string", HOUR, 60, 1, b"x"), {"K1", "K6"}),  # K6 required: no type word
    (KeyFacts(b"app:item:1:string", "hash", HOUR, 60, 3), {"K6"}),
    (KeyFacts(b"app:item:1:hash", "hash", HOUR, 60, 3), set()),
    (KeyFacts(b"app:" + b"x" * 40 + b":1:string", "string", HOUR, 90, 1, b"x"), {"K4"}),
    (KeyFacts(b"app:item:1:string", "string", HOUR, 300, 101, b"a" * 64), {"V1"}),
    (KeyFacts(b"app:item:1:string", "string", HOUR, 300, 100, b"a" * 64), set()),
    (KeyFacts(b"app:item:1:hash", "hash", HOUR, 900, 11), {"V2"}),  # per_type hash 10
    (KeyFacts(b"app:item:1:set", "set", HOUR, 900, 11), set()),
    (KeyFacts(b"app:item:1:set", "set", HOUR, 900, 51), {"V2"}),
    (KeyFacts(b"app:item:1:stream", "stream", HOUR, 900, 51), {"V2"}),  # streams: max_elements
    (KeyFacts(b"app:item:1:string", "string", 86_400_001, 60, 5, b"x"), {"T3"}),
    (KeyFacts(b"app:item:1:string", "string", 86_400_000, 60, 5, b"x"), set()),
    (KeyFacts(b"app:item:1:string", "string", HOUR, 60, 9, b'{"a": 1}'), {"V4"}),
    (KeyFacts(b"app:item:1:string", "string", HOUR, 60, 7, b'{"a": 1'), set()),  # whole, not JSON
    (KeyFacts(b"app:item:1:string", "string", HOUR, 60, 500, b'{"a": "' + b"x" * 57), {"V4", "V1"}),
    (KeyFacts(b"app:item:1:string", "string", -1, 2000, 500, b"[1, 2"), {"T1", "V1"}),
    (KeyFacts(b"App:1", "hash", -1, 2000, 20), {"K1", "K2", "K6", "T1", "V2"}),
    (KeyFacts(b"app:item:1:rejson", "ReJSON-RL", HOUR, 60, None), set()),  # a module type: no size
]


@pytest.mark.parametrize("facts, rules", CASES, ids=[repr(case[0].key)[:40] for case in CASES])
def test_rules_that_fire(facts, rules):
    found = auditor().classify(facts)
    assert {finding.rule for finding in found} == rules
    assert all(finding.subject == f"key '{facts.key.decode()}'" and finding.advice for finding in found)


NO_POLICY = [
    (KeyFacts(b"Anything Goes", "string", HOUR, 60, DEFAULT_STRING_BYTES, b"x"), set()),
    (KeyFacts(b"Anything Goes", "string", HOUR, 60, DEFAULT_STRING_BYTES + 1, b'{"a": 1}'), {"V1"}),
    (KeyFacts(b"k", "list", -1, 60, DEFAULT_ELEMENTS + 1), {"O1", "V2"}),
    (KeyFacts(b"k", "hash", HOUR, 60, DEFAULT_ELEMENTS), set()),
]


@pytest.mark.parametrize("facts, rules", NO_POLICY)
def test_without_a_policy_only_ttl_and_big_keys(facts, rules):
    audit = Auditor()
    assert {finding.rule for finding in audit.classify(facts)} == rules
    assert audit.sample_bytes == 0  # no V4: string values are not read
    assert {"K1", "T1", "V4", "K10"} <= set(audit.not_checked)
    assert audit.not_checked["K1"] == "not in the policy"


@pytest.mark.parametrize("thresholds, facts, fires", [
    (Thresholds(string_bytes=10), KeyFacts(b"app:a:1:string", "string", HOUR, 60, 11, b"x"), True),
    (Thresholds(string_bytes=1000), KeyFacts(b"app:a:1:string", "string", HOUR, 60, 101, b"x"), False),
    (Thresholds(elements=100), KeyFacts(b"app:a:1:hash", "hash", HOUR, 60, 11), False),
    (Thresholds(elements=5), KeyFacts(b"app:a:1:set", "set", HOUR, 60, 6), True),
])
def test_command_line_thresholds_override_the_policy(thresholds, facts, fires):
    rules = {finding.rule for finding in auditor(thresholds=thresholds).classify(facts)}
    assert (rules & {"V1", "V2"} != set()) == fires
    checked = {item.rule: item.what for item in auditor(thresholds=thresholds).checked}
    assert "command line" in checked["V1" if thresholds.string_bytes else "V2"]


def test_rules_off_or_absent_are_named_as_not_checked():
    audit = auditor(POLICY.replace("K2: {style: lowercase}", "K2: off"))
    assert audit.not_checked["K2"] == "off in the policy"
    assert audit.not_checked["K3"] == "not in the policy"
    assert audit.not_checked["C1"] == "a command rule"
    assert "K2" not in {item.rule for item in audit.checked}
    assert {finding.rule for finding in audit.classify(KeyFacts(b"App:a:1:string", "string", HOUR, 60, 1, b"x"))} == set()


SCHEMA_POLICY = """
name: schema
rules:
  K10: {mode: audit}
  T1: {mode: off}
  T3: {mode: off}
  V1: {mode: off}
  V2: {mode: off}
schema:
  - key: "book:{id}"
    type: hash
    placeholders: {id: digits}
    ttl: {min: 60, max: 600}
    limits: {max_elements: 5}
  - key: "books:genre:{genre}"
    type: set
    ttl: none
  - key: "cover:{id}"
    type: string
    limits: {max_bytes: 10}
"""


@pytest.mark.parametrize("facts, detail", [
    (KeyFacts(b"book:1", "hash", HOUR, 60, 3), None),
    (KeyFacts(b"film:1", "hash", HOUR, 60, 3), "matches no pattern"),
    (KeyFacts(b"book:1", "string", HOUR, 60, 3, b"x"), "declares a hash but the key holds a string"),
    (KeyFacts(b"book:1", "hash", HOUR, 60, 6), "6 elements, above the 5 elements"),
    (KeyFacts(b"cover:1", "string", HOUR, 60, 11, b"x"), "11 bytes, above the 10 bytes"),
    (KeyFacts(b"book:1", "hash", -1, 60, 3), "declares its TTL: required, 1 min to 10 min"),  # T1 is off
    (KeyFacts(b"books:genre:sf", "set", -1, 60, 3), None),
])
def test_key_schema(facts, detail):
    audit = auditor(SCHEMA_POLICY)
    found = [finding for finding in audit.classify(facts) if finding.rule == "K10"]
    if detail is None:
        assert found == []
    else:
        assert len(found) == 1 and detail in found[0].advice
    assert "K10" in {item.rule for item in audit.checked}

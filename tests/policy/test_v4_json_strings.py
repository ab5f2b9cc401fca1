"""V4: which stored string values are JSON objects (the audit's check), on a table of samples,
whole values and truncated ones; and the rule in a policy file."""

import pytest

from proxy.policy.loader import load_policy_text
from proxy.policy.rules.v4_json_strings import json_object_kind

from .helpers import load_error

LONG = 10_000  # a value longer than its sample: judged on the sample alone

CASES = [
    # sample, length of the whole value, kind
    (b'{"name": "alice", "age": 35}', None, "object"),
    (b' \n\t{ "a" : 1 }', None, "object"),
    (b"{}", None, "object"),
    (b'[{"a": 1}, {"a": 2}]', None, "array of objects"),
    (b"[{}]", None, "array of objects"),
    (b'{"name": "ali', LONG, "object"),
    (b'[ {"na', LONG, None),  # the first member name is not complete in the sample
    (b'[ {"name":', LONG, "array of objects"),
    (b'{"name": "ali', None, None),  # the whole value, and it is not JSON
    (b'{"a": 1} trailing', None, None),
    (b"[1, 2, 3]", None, None),  # an array of scalars is not an object
    (b'[{"a": 1}, 2]', None, None),
    (b"[]", None, None),
    (b'"{\\"a\\": 1}"', None, None),  # a JSON string
    (b"42", None, None),
    (b"{not json}", None, None),
    (b"{a: 1}", LONG, None),
    (b"hello", None, None),
    (b"", None, None),
    (b'{"caf\xc3\xa9": 1}', None, "object"),
    (b'{"a": "\xff"}', None, None),  # not UTF-8: not JSON
    (b"\x82\xa1a\x01", None, None),  # MessagePack is not detected
]


@pytest.mark.parametrize("sample, length, kind", CASES)
def test_json_object_kind(sample, length, kind):
    assert json_object_kind(sample, len(sample) if length is None else length) == kind


def test_rule_settings_and_finding():
    policy = load_policy_text("name: p\nrules:\n  V4: {sample_bytes: 128}\n")
    rule = policy.rule("V4")
    assert rule.sample_bytes == 128
    finding = rule.check_value(b"user:1", b'{"a": 1}', 8)
    assert finding.rule == "V4" and "hash" in finding.advice and finding.subject == "key 'user:1'"
    assert rule.check_value(b"user:1", b"plain", 5) is None
    assert "sample_bytes" in str(load_error("name: p\nrules:\n  V4: {sample_bytes: 4}\n"))

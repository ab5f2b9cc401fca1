"""The JSON Schema of the policy language (`docs/policy.schema.json`, `policy/json_schema.py`): it is
what the rule registry generates (a test fails when they drift: regenerate with `redis-guard policy
schema -o docs/policy.schema.json`), every preset carries its modeline and validates, and broken
files do not, checked with the `jsonschema` package as an editor would."""

from __future__ import annotations

import glob
import json
import os

import jsonschema
import pytest
import yaml

from proxy import cli
from proxy.policy import json_schema
from proxy.policy.base import REGISTRY
from tests.servers import REPO

SCHEMA_FILE = os.path.join(REPO, "docs", "policy.schema.json")
PRESETS = sorted(glob.glob(os.path.join(REPO, "configs", "policies", "*.yaml")))
MODELINE = "# yaml-language-server: $schema=../../docs/policy.schema.json"


@pytest.fixture(scope="module")
def validator():
    with open(SCHEMA_FILE, encoding="utf-8") as handle:
        schema = json.load(handle)
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_the_file_is_what_the_registry_generates(capsys):
    with open(SCHEMA_FILE, encoding="utf-8") as handle:
        assert handle.read() == json_schema.text(), \
            "docs/policy.schema.json is stale: redis-guard policy schema -o docs/policy.schema.json"
    assert cli.main(["policy", "schema"]) == 0
    assert capsys.readouterr().out == json_schema.text()


def test_every_rule_and_setting_is_in_it():
    defs = json_schema.policy_schema()["$defs"]
    for rule_id, rule_class in REGISTRY.items():
        recorder = json_schema.Recorder(rule_id)
        rule_class.from_settings(recorder)
        properties = defs[rule_id]["anyOf"][2]["properties"]
        assert set(properties) == set(recorder.read) | {"mode"}, rule_id


@pytest.mark.parametrize("path", PRESETS, ids=os.path.basename)
def test_every_preset_carries_the_modeline_and_validates(validator, path):
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    assert text.splitlines()[0] == MODELINE
    target = MODELINE.split("$schema=")[1]
    assert os.path.samefile(os.path.join(os.path.dirname(path), target), SCHEMA_FILE)
    errors = [error.message for error in validator.iter_errors(yaml.safe_load(text))]
    assert errors == []


@pytest.mark.parametrize("text", [
    "name: ok\nrules:\n  K2: {style: camelCase}\n  k9: off\n  C4:\n",
    "rules:\n  C3: {commands: {HGETALL: warn, LRANGE: {action: limit, max: 10}}}\n",
    "rules:\n  V2: {per_type: {hash: 100}}\n  K6: {words: {list: [list, lst]}}\n",
    "schema:\n  - {key: 'a:{id}', type: hash, placeholders: {id: digits}, ttl: {max: 60}, limits: {max_elements: 5}}\n",
])
def test_good_files_validate(validator, text):
    assert [error.message for error in validator.iter_errors(yaml.safe_load(text))] == []


@pytest.mark.parametrize("text, where", [
    ("nmae: x\n", []),
    ("mode: dry-run\n", ["mode"]),
    ("rules:\n  C4: on\n", ["rules", "C4"]),
    ("rules:\n  X1: {}\n", ["rules"]),
    ("rules:\n  K2: {style: snake}\n", ["rules", "K2"]),
    ("rules:\n  K2: {delimeter: ':'}\n", ["rules", "K2"]),
    ("rules:\n  K4: {max_length: ten}\n", ["rules", "K4"]),
    ("rules:\n  K4: {min_length: -1}\n", ["rules", "K4"]),
    ("rules:\n  C2: {deny: ['FLUSH ALL']}\n", ["rules", "C2"]),
    ("rules:\n  C3: {commands: {HGETALL: sometimes}}\n", ["rules", "C3"]),
    ("rules:\n  V2: {per_type: {bitmap: 3}}\n", ["rules", "V2"]),
    ("rules:\n  T1: {action: inject, default_ttl: 0}\n", ["rules", "T1"]),
    ("applications:\n  a: {prefixes: ['a:']}\n", ["applications", "a"]),
    ("applications:\n  a: {password_hash: '$scrypt$x', colour: red}\n", ["applications", "a"]),
    ("schema:\n  - {key: 'a:{id}', type: hashmap}\n", ["schema", 0, "type"]),
    ("schema:\n  - {key: 'a:{id}', type: hash, ttl: forever}\n", ["schema", 0, "ttl"]),
    ("schema:\n  - {type: hash}\n", ["schema", 0]),
])
def test_broken_files_do_not_validate(validator, text, where):
    errors = list(validator.iter_errors(yaml.safe_load(text)))
    assert errors, text
    assert any(list(error.absolute_path)[:len(where)] == where for error in errors), \
        [(list(error.absolute_path), error.message) for error in errors]

"""The policy language as a JSON Schema (`docs/policy.schema.json`), generated from the rule registry.

Nothing here describes a rule by hand: every registered rule is built once from an empty mapping
with a `Recorder` in place of its `Settings`, which keeps each setting the rule reads with its
default, kind, choices and minimum (and the `schema=` fragment of a mapping's items); the top
level, applications and key patterns come from the loader's and the key schema's own tables. A
rule's description is the first paragraph of its module's docstring. Editors read the file through
the modeline every preset carries (`# yaml-language-server: $schema=...`); `redis-guard policy
schema` prints it, and a test fails when the file and the registry drift apart.

The schema checks shapes (names, types, choices, bounds); `policy check` checks the rest (command
names, cross-setting rules, the key schema's overlaps).
"""

from __future__ import annotations

import json
import sys

from .base import MODES, REGISTRY, Settings
from .loader import APPLICATION_SETTINGS, TOP_LEVEL  # the loader registers every rule
from .rules._types import TYPES
from .schema import CONSTRAINTS, FIELDS, LIMITS, PERSISTENT_WORDS

DRAFT = "https://json-schema.org/draft/2020-12/schema"


class Recorder(Settings):
    """A `Settings` with no values that remembers what the rule reads: key -> JSON Schema."""

    def __init__(self, rule_id: str):
        super().__init__(rule_id, {})
        self.read: dict[str, dict] = {}

    def get(self, key, default=None, kind=None, choices=None, minimum=None, schema=None):
        if key not in self.read:
            self.read[key] = _setting(default, kind, choices, minimum, schema)
        return super().get(key, default, kind, choices, minimum, schema)


def _setting(default, kind, choices, minimum, extra) -> dict:
    kinds = kind if isinstance(kind, tuple) else (kind,) if kind is not None else ()
    names = {bool: "boolean", int: "integer", float: "number", str: "string", list: "array", tuple: "array",
             dict: "object"}
    types = list(dict.fromkeys(names[k] for k in kinds))
    if "number" in types and "integer" in types:
        types.remove("integer")
    fragment: dict = {}
    if choices is not None:
        fragment["enum"] = list(choices)
    elif types:
        fragment["type"] = types[0] if len(types) == 1 else types
    if minimum is not None:
        fragment["minimum"] = minimum
    if "array" in types and not extra:
        fragment["items"] = {"type": ["string", "integer"]}
    fragment.update(extra or {})
    if default is not None:
        fragment["default"] = list(default) if isinstance(default, tuple) else default
    return fragment


def _summary(rule_class) -> str:
    doc = sys.modules[rule_class.__module__].__doc__ or rule_class.__doc__ or ""
    return " ".join(doc.strip().split("\n\n")[0].split())


def rule_schema(rule_id: str) -> dict:
    """One rule's entry under `rules:`: empty (defaults), a mode, or its settings."""
    rule_class = REGISTRY[rule_id]
    recorder = Recorder(rule_id)
    rule_class.from_settings(recorder)
    settings = {"mode": {"$ref": "#/$defs/mode", "default": "enforce"}}
    settings.update((key, value) for key, value in recorder.read.items() if key != "mode")
    return {
        "title": f"{rule_id}: {rule_class.title}",
        "description": f"{_summary(rule_class)} See docs/rules.md#{rule_id.lower()}.",
        "anyOf": [
            {"type": "null"},
            {"$ref": "#/$defs/mode"},
            {"type": "object", "properties": settings, "additionalProperties": False},
        ],
    }


def _rules() -> dict:
    ids = list(REGISTRY)  # in rule order
    return {
        "description": "Rule ids (docs/rules.md) and their settings; `K9: off` is short for {mode: off}.",
        "type": ["object", "null"],
        "properties": {rule_id: {"$ref": f"#/$defs/{rule_id}"} for rule_id in ids},
        # the loader takes the ids in any case; editors offer the upper-case spelling
        "patternProperties": {f"^{rule_id.lower()}$": {"$ref": f"#/$defs/{rule_id}"} for rule_id in ids},
        "additionalProperties": False,
    }


def _application() -> dict:
    properties = {
        "user": {"type": "string", "pattern": r"^\S+$",
                 "description": "the user the service authenticates to the proxy as (default: the name)"},
        "password_hash": {"type": "string", "pattern": r"^\$scrypt\$",
                          "description": "made with `redis-guard policy hash-password`"},
        "prefixes": {"type": ["array", "string"], "items": {"type": "string", "minLength": 1},
                     "description": "the key prefixes the application applied for"},
        "read_only": {"type": "boolean", "default": False},
        "rules": {"$ref": "#/$defs/rules"},
    }
    assert tuple(properties) == APPLICATION_SETTINGS, "the loader's application settings changed"
    return {"type": "object", "required": ["password_hash"], "properties": properties,
            "additionalProperties": False}


def _key_pattern() -> dict:
    constraint = {"anyOf": [
        {"enum": ["any", *CONSTRAINTS]},
        {"type": "object", "properties": {"enum": {"type": "array", "minItems": 1,
                                                   "items": {"type": ["string", "integer"]}}},
         "required": ["enum"], "additionalProperties": False},
        {"type": "object", "properties": {"regex": {"type": "string", "minLength": 1}},
         "required": ["regex"], "additionalProperties": False},
    ]}
    seconds = {"type": "integer", "minimum": 1}
    properties = {
        "key": {"type": "string", "minLength": 1, "description": "literal text and {placeholders}: book:{id}"},
        "type": {"enum": list(TYPES)},
        "description": {"type": ["string", "number", "null"]},
        "placeholders": {"type": "object", "additionalProperties": constraint},
        "ttl": {"anyOf": [{"enum": ["required", *PERSISTENT_WORDS]},
                          {"type": "object", "minProperties": 1, "additionalProperties": False,
                           "properties": {"min": seconds, "max": seconds}}]},
        "limits": {"type": "object", "minProperties": 1, "additionalProperties": False,
                   "properties": {name: {"type": "integer", "minimum": 1} for name in LIMITS}},
        "owner": {"type": ["string", "number", "null"]},
        "relationships": {"anyOf": [{"type": ["string", "null"]},
                                    {"type": "array", "items": {"type": "string", "minLength": 1}}]},
    }
    assert tuple(properties) == FIELDS, "the key schema's fields changed"
    return {"type": "object", "required": ["key", "type"], "properties": properties, "additionalProperties": False}


def policy_schema() -> dict:
    top = {
        "name": {"type": "string", "description": "shown by `policy check`, in logs and metrics"},
        "description": {"type": "string"},
        "seed": {"type": ["string", "integer"], "description": "the convention the policy implements "
                                                              "(docs/conventions.md), e.g. \"003\""},
        "mode": {"enum": ["enforce", "audit"], "default": "enforce",
                 "description": "audit: a dry run of the whole policy (every rule logs and counts only)"},
        "rules": {"$ref": "#/$defs/rules"},
        "auth": {"enum": ["required", "optional"], "description": "with applications: whether clients must "
                                                                  "authenticate to the proxy"},
        "applications": {"type": "object", "additionalProperties": {"$ref": "#/$defs/application"},
                         "description": "services and the key prefixes they applied for (rule K7)"},
        "schema": {"type": ["array", "null"], "items": {"$ref": "#/$defs/keyPattern"},
                   "description": "the key schema (rule K10)"},
    }
    assert set(top) == set(TOP_LEVEL), "the loader's top-level settings changed"
    defs = {
        "mode": {"enum": [*MODES, False], "description": "enforce, audit or off (YAML 1.1 reads a bare off as false)"},
        "rules": _rules(),
        "application": _application(),
        "keyPattern": _key_pattern(),
    }
    defs.update((rule_id, rule_schema(rule_id)) for rule_id in REGISTRY)
    return {
        "$schema": DRAFT,
        "title": "Redis Guard policy",
        "description": "A policy file of Redis Guard (docs/policy.md). Generated from the rule registry by "
                       "`redis-guard policy schema`: do not edit by hand.",
        "type": "object",
        "properties": top,
        "additionalProperties": False,
        "$defs": defs,
    }


def text() -> str:
    """The schema as written to docs/policy.schema.json."""
    return json.dumps(policy_schema(), indent=2, ensure_ascii=False) + "\n"

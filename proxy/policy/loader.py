"""Policy files: YAML in, a validated `Policy` out, every mistake reported with its line.

A policy file has a name, an optional description and seed reference, a `mode` (`enforce`, or
`audit` for a dry run of the whole policy), a `rules:` mapping from rule ids (C1..., K1...,
T1..., V1...) to each rule's settings, and an optional `schema:` of key patterns (`schema.py`),
handed to every rule once they are built (`Rule.use_schema`). Rules run in the order of RULES.md,
whatever the order in the file: command rules, then key rules, then TTL and value rules.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import yaml

from . import rules as _rules  # noqa: F401  (registers every rule)
from .base import AUDIT, ENFORCE, REGISTRY, PolicyError, Rule, Settings
from .schema import Schema, enforcing_rules, parse_schema

ORDER = ["C1", "C2", "C5", "C6", "C3", "C4", "K1", "K2", "K3", "K4", "K5", "K6", "K8", "K9", "K10", "K11",
         "T1", "T2", "T3", "V1", "V2", "V3", "V4"]


@dataclass(frozen=True)
class Policy:
    name: str
    mode: str
    rules: tuple[Rule, ...]
    description: str = ""
    seed: str = ""
    source: str | None = None
    settings: dict = field(default_factory=dict, compare=False)
    schema: Schema | None = None  # the declared key patterns (K10), None without a `schema:`

    def rule(self, rule_id: str) -> Rule | None:
        for rule in self.rules:
            if rule.id == rule_id:
                return rule
        return None


PASSTHROUGH = Policy("passthrough", ENFORCE, ())


def _plain(node):
    """A composed YAML node as plain Python values."""
    return yaml.safe_load(yaml.serialize(node)) if node is not None else None


def _line(node) -> int:
    return node.start_mark.line + 1


def load_policy_text(text: str, source: str | None = None) -> Policy:
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise PolicyError(f"invalid YAML: {getattr(exc, 'problem', exc)}",
                          mark.line + 1 if mark else None, source) from None
    if root is None:
        raise PolicyError("the policy file is empty", 1, source)
    if not isinstance(root, yaml.MappingNode):
        raise PolicyError("the top level must be a mapping", _line(root), source)
    top = {}
    top_lines = {}
    for key_node, value_node in root.value:
        key = str(key_node.value)
        if key in top:
            raise PolicyError(f"'{key}' appears twice", _line(key_node), source)
        top[key] = value_node
        top_lines[key] = _line(key_node)
    known = {"name", "description", "seed", "mode", "rules", "schema", "policy"}
    for key in top:
        if key not in known:
            raise PolicyError(f"unknown top-level setting '{key}' (expected one of: "
                              f"{', '.join(sorted(known - {'policy'}))})", top_lines[key], source)
    name = _plain(top.get("name")) or (source or "policy")
    mode = _plain(top.get("mode")) or ENFORCE
    if mode not in (ENFORCE, AUDIT):
        raise PolicyError(f"'mode' must be enforce or audit, got {mode!r}", top_lines.get("mode"), source)
    rules_node = top.get("rules")
    built: dict[str, Rule] = {}
    rule_lines: dict[str, int] = {}
    if rules_node is not None and not (isinstance(rules_node, yaml.ScalarNode) and rules_node.value in ("", "null", "~")):
        if not isinstance(rules_node, yaml.MappingNode):
            raise PolicyError("'rules' must be a mapping of rule ids to settings", _line(rules_node), source)
        for key_node, value_node in rules_node.value:
            rule_id = str(key_node.value).upper()
            line = _line(key_node)
            cls = REGISTRY.get(rule_id)
            if cls is None:
                raise PolicyError(f"unknown rule '{key_node.value}' (known: {', '.join(ORDER)})", line, source)
            if rule_id in built:
                raise PolicyError(f"rule {rule_id} appears twice", line, source)
            if isinstance(value_node, yaml.ScalarNode) and value_node.value in ("", "null", "~"):
                values, lines = {}, {}
            elif isinstance(value_node, yaml.ScalarNode):
                # `K2: off` is short for `K2: {mode: off}`
                values, lines = {"mode": _plain(value_node)}, {"mode": line}
            elif isinstance(value_node, yaml.MappingNode):
                values, lines = {}, {}
                for setting_key, setting_value in value_node.value:
                    values[str(setting_key.value)] = _plain(setting_value)
                    lines[str(setting_key.value)] = _line(setting_key)
            else:
                raise PolicyError(f"rule {rule_id}: settings must be a mapping", line, source)
            if values.get("mode") is False:  # YAML reads a bare `off` as false
                values["mode"] = "off"
            try:
                built[rule_id] = cls.from_settings(Settings(rule_id, values, lines, line))
            except PolicyError as exc:
                raise PolicyError(exc.message, exc.line or line, source) from None
            rule_lines[rule_id] = line
    ordered = tuple(built[rule_id] for rule_id in ORDER if rule_id in built)
    schema = _schema(top.get("schema"), ordered, built, source)
    for rule in ordered:
        try:
            rule.use_schema(schema)
        except PolicyError as exc:
            raise PolicyError(exc.message, exc.line or rule_lines[rule.id], source) from None
    return Policy(
        name=str(name), mode=mode, rules=ordered,
        description=str(_plain(top.get("description")) or ""),
        seed=str(_plain(top.get("seed")) or ""), source=source, schema=schema,
    )


def _schema(node, ordered, built, source) -> Schema | None:
    """The `schema:` section; its placeholders span one segment of the key rules' delimiter."""
    if node is None:
        return None
    delimiter = next((rule.delimiter for rule in ordered if isinstance(getattr(rule, "delimiter", None), str)), ":")
    schema = parse_schema(node, delimiter, source)
    for pattern in schema or ():
        for rule_id, what in enforcing_rules(pattern):
            if rule_id not in built:
                raise PolicyError(f"schema: pattern '{pattern.pattern}' sets {what}, which rule {rule_id} "
                                  f"enforces: add {rule_id} to 'rules:' ({rule_id}: off to only document it)",
                                  pattern.line, source)
    return schema


def load_policy(path: str) -> Policy:
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as exc:
        raise PolicyError(exc.strerror or str(exc), None, path) from None
    return load_policy_text(text, path)

"""Policy files: YAML in, a validated `Policy` out, every mistake reported with its line.

A policy file has a name, an optional description and seed reference, a `mode` (`enforce`, or
`audit` for a dry run of the whole policy), a `rules:` mapping from rule ids (C1..., K1...,
T1..., V1...) to each rule's settings, and an optional `schema:` of key patterns (`schema.py`),
handed to every rule once they are built (`Rule.use_schema`). Rules run in the order they declare
(`Rule.order`, kept by `base.REGISTRY`), whatever the order in the file: command rules, then key
rules, then TTL and value rules.

With an `applications:` section (and `auth: required|optional`) each application's entry is
read here too: its `rules:` are merged setting by setting over the top-level ones and built into
a rule chain of its own, with its K7 checks (prefixes, read-only) compiled in.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import yaml

from ..yamlcheck import compose as _compose
from ..yamlcheck import line as _line
from ..yamlcheck import plain as _plain
from . import rules as _rules  # noqa: F401  (registers every rule)
from .applications import Application
from .base import AUDIT, ENFORCE, OFF, REGISTRY, PolicyError, Rule, Settings
from .passwords import HashFormatError, PasswordHash
from .problems import Problems, did_you_mean, shorthand, yaml_error
from .rules.k7_namespaces import OwnKeysOnly, Prefixes, ReadOnly
from .schema import Schema, enforcing_rules, parse_schema


@dataclass(frozen=True)
class Policy:
    name: str
    mode: str
    rules: tuple[Rule, ...]
    description: str = ""
    seed: str = ""
    source: str | None = None
    settings: dict = field(default_factory=dict, compare=False)
    auth: str = ""  # required | optional when the policy declares applications
    applications: tuple[Application, ...] = ()
    schema: Schema | None = None  # the declared key patterns (K10), None without a `schema:`
    baseline_implied: bool = False  # C2 added with its defaults: the file does not name it

    def baseline(self) -> str:
        """Whether the baseline guard (C2's `baseline`) holds, and why, for `policy check`."""
        rule = self.rule(BASELINE_RULE)
        if rule is None:
            return "off (no policy)"
        if not rule.baseline:
            return "off (C2: {baseline: false})"
        if rule.mode == OFF or self.mode == AUDIT or rule.mode == AUDIT:
            why = "C2: off" if rule.mode == OFF else "audit mode"
            return f"not enforced ({why}); C2: {{baseline: false}} states it is meant"
        if self.baseline_implied:
            return "on (C2 not named: the baseline applies to every policy; C2: {baseline: false} turns it off)"
        return "on (C2; C2: {baseline: false} turns it off)"

    def rule(self, rule_id: str) -> Rule | None:
        for rule in self.rules:
            if rule.id == rule_id:
                return rule
        return None


PASSTHROUGH = Policy("passthrough", ENFORCE, ())
BASELINE_RULE = "C2"  # the rule that holds the baseline guard

# The policy of a proxy given none (`redis-guard serve` without --policy or `policy:`).
BUILTIN = Path(__file__).with_name("data") / "baseline.yaml"




TOP_LEVEL = ("name", "description", "seed", "mode", "rules", "auth", "applications", "schema")


def load_policy_text(text: str, source: str | None = None, table=None) -> Policy:
    """The policy in `text`; every mistake is reported at once (`PolicyError.errors`). Command
    names in settings are checked against `table` (default: the snapshot of the package)."""
    try:
        root = _compose(text)
    except yaml.YAMLError as exc:
        raise yaml_error(exc, text, source) from None
    if root is None:
        raise PolicyError("the policy file is empty", 1, source)
    if not isinstance(root, yaml.MappingNode):
        raise PolicyError("the top level must be a mapping", _line(root), source)
    problems = Problems(source)
    top = {}
    top_lines = {}
    for key_node, value_node in root.value:
        key = str(key_node.value)
        if key in top:
            problems.report(f"'{key}' appears twice", _line(key_node))
        elif key not in TOP_LEVEL and key != "policy":  # `policy:` is accepted and ignored
            problems.report(f"unknown top-level setting '{key}'{did_you_mean(key, TOP_LEVEL)} (expected one "
                            f"of: {', '.join(sorted(TOP_LEVEL))})", _line(key_node))
        else:
            top[key] = value_node
            top_lines[key] = _line(key_node)
    name = _plain(top.get("name")) or (source or "policy")
    mode = _plain(top.get("mode")) or ENFORCE
    if mode not in (ENFORCE, AUDIT):
        problems.report(f"'mode' must be enforce or audit, got {mode!r}{did_you_mean(mode, (ENFORCE, AUDIT))}",
                        top_lines.get("mode"))
        mode = ENFORCE
    raw = _rule_settings(top.get("rules"), "rules", problems)
    # The baseline guard is not lost by omission: a policy that does not name C2 gets it with its
    # defaults (the baseline on); only `C2: {baseline: false}` (or `C2: off`) turns it off.
    baseline_implied = BASELINE_RULE not in raw
    if baseline_implied:
        raw[BASELINE_RULE] = ({}, {}, top_lines.get("rules"))
    auth, applications = "", ()
    with problems.collecting():
        auth, applications = _applications(top, top_lines, raw, problems, table)
    rules = _build_rules(raw, problems, table)
    for chain in (rules, *(app.rules for app in applications)):
        for rule in chain:
            with problems.collecting(raw.get(rule.id, ({}, {}, None))[2]):
                rule.use_source(source)
    schema = None
    before = len(problems.errors)
    with problems.collecting():
        schema = _schema(top.get("schema"), rules, problems)
    if len(problems.errors) == before:  # a schema with mistakes would only add consequences of them
        for chain in (rules, *(app.rules for app in applications)):
            for rule in chain:
                with problems.collecting(raw.get(rule.id, ({}, {}, None))[2]):
                    rule.use_schema(schema)
    problems.raise_any()
    if applications:
        rules = _with_namespace(rules, None, ())
    return Policy(
        name=str(name), mode=mode, rules=rules, auth=auth, applications=applications,
        description=str(_plain(top.get("description")) or ""),
        seed=str(_plain(top.get("seed")) or ""), source=source, schema=schema, baseline_implied=baseline_implied,
    )


def _schema(node, rules, problems: Problems) -> Schema | None:
    """The `schema:` section; its placeholders span one segment of the key rules' delimiter."""
    if node is None:
        return None
    delimiter = next((rule.delimiter for rule in rules if isinstance(getattr(rule, "delimiter", None), str)), ":")
    schema = parse_schema(node, delimiter, problems.source, problems)
    named = {rule.id for rule in rules}
    for pattern in schema or ():
        for rule_id, what in enforcing_rules(pattern):
            if rule_id not in named:
                problems.report(f"schema: pattern '{pattern.pattern}' sets {what}, which rule {rule_id} "
                                f"enforces: add {rule_id} to 'rules:' ({rule_id}: off to only document it)",
                                pattern.line)
    return schema


def _is_empty(node) -> bool:
    return node is None or (isinstance(node, yaml.ScalarNode) and node.value in ("", "null", "~"))


def _rule_settings(rules_node, where: str, problems: Problems) -> dict[str, tuple[dict, dict, int]]:
    """rule id -> (settings, line of each setting, line of the rule) from a `rules:` mapping. A
    rule with a mistake here is reported and left out."""
    raw: dict[str, tuple[dict, dict, int]] = {}
    if _is_empty(rules_node):
        return raw
    if not isinstance(rules_node, yaml.MappingNode):
        problems.report(f"'{where}' must be a mapping of rule ids to settings", _line(rules_node))
        return raw
    for key_node, value_node in rules_node.value:
        rule_id = str(key_node.value).upper()
        line = _line(key_node)
        if rule_id not in REGISTRY:
            problems.report(f"unknown rule '{key_node.value}'{did_you_mean(rule_id, REGISTRY)} (known: "
                            f"{', '.join(REGISTRY)})", line)
            continue
        if rule_id in raw:
            problems.report(f"rule {rule_id} appears twice", line)
            continue
        if _is_empty(value_node):
            values, lines = {}, {}
        elif isinstance(value_node, yaml.MappingNode):
            values, lines = {}, {}
            for setting_key, setting_value in value_node.value:
                values[str(setting_key.value)] = _plain(setting_value)
                lines[str(setting_key.value)] = _line(setting_key)
        else:
            # `K2: off` is short for `K2: {mode: off}` (YAML reads a bare `off` as false)
            value = _plain(value_node)
            wrong = shorthand(rule_id, value)
            if wrong is not None:
                problems.report(wrong, line)
                continue
            values, lines = {"mode": value}, {"mode": line}
        if values.get("mode") is False:
            values["mode"] = "off"
        raw[rule_id] = (values, lines, line)
    return raw


def _build_rules(raw: dict[str, tuple[dict, dict, int]], problems: Problems, table=None) -> tuple[Rule, ...]:
    """The rules, in the order of REGISTRY; a rule with mistakes is reported (all of them) and left out."""
    built: dict[str, Rule] = {}
    for rule_id, (values, lines, line) in raw.items():
        settings = Settings(rule_id, values, lines, line, table)
        try:
            rule = REGISTRY[rule_id].from_settings(settings)
        except PolicyError as exc:  # a mistake the rule's constructor could not go on after
            settings.problems.append(exc)
        if settings.problems:
            for error in settings.problems:
                problems.add(error, line)
            continue
        built[rule_id] = rule
    return tuple(built[rule_id] for rule_id in REGISTRY if rule_id in built)


def _with_namespace(rules: tuple[Rule, ...], app: str | None, prefixes, read_only: bool = False):
    """The rules with K7 compiled in: for an application its prefixes (and read-only check),
    for clients that are no application (app None) the `anonymous` setting."""
    namespace = next((rule for rule in rules if rule.id == "K7"), None)
    if namespace is None or namespace.mode == OFF:  # None: K7 has a mistake, reported
        return rules
    checks = []
    if app is not None:
        checks.append(Prefixes(namespace.mode, app, tuple(prefixes)))
        checks.append(OwnKeysOnly(namespace.mode, app, tuple(prefixes)))
        if read_only:
            checks.append(ReadOnly(namespace.mode, app))
    elif namespace.anonymous == "reject":
        checks.append(Prefixes(namespace.mode, None, ()))
        checks.append(OwnKeysOnly(namespace.mode, None, ()))
    at = rules.index(namespace) + 1
    return rules[:at] + tuple(checks) + rules[at:]


APPLICATION_SETTINGS = ("user", "password_hash", "prefixes", "read_only", "rules")


def _applications(top: dict, top_lines: dict, raw: dict, problems: Problems, table=None):
    """(auth, applications) from the top-level `auth:` and `applications:` settings. Adds the
    default K7 entry to `raw` when there are applications and the file has none. Each
    application's first mistake is reported, and the next application is read."""
    node = top.get("applications")
    auth = _plain(top.get("auth"))
    if _is_empty(node):
        if auth is not None:
            problems.report("'auth' needs an 'applications' section to authenticate against", top_lines["auth"])
        if "K7" in raw:
            problems.report("rule K7 needs an 'applications' section (the prefixes each application "
                            "applied for)", raw["K7"][2])
        return "", ()
    if auth is None:
        auth = "required"
    if auth not in ("required", "optional"):
        problems.report(f"'auth' must be required or optional, got {auth!r}", top_lines["auth"])
    if not isinstance(node, yaml.MappingNode):
        raise PolicyError("'applications' must be a mapping of application names to their settings", _line(node))
    raw.setdefault("K7", ({}, {}, top_lines["applications"]))
    apps, users = [], {}
    for name_node, app_node in node.value:
        name = str(name_node.value)
        line = _line(name_node)
        if any(app.name == name for app in apps):
            problems.report(f"application '{name}' appears twice", line)
            continue
        with problems.collecting(line):
            apps.append(_application(name, app_node, line, raw, users, problems, table))
    return auth, tuple(apps)


def _application(name: str, node, line: int, raw: dict, users: dict, problems: Problems, table) -> Application:
    """One entry of `applications:`; raises its first mistake (unknown settings are reported too)."""
    if not isinstance(node, yaml.MappingNode):
        raise PolicyError(f"application '{name}': settings must be a mapping", line)
    settings, lines = {}, {}
    for key_node, value_node in node.value:
        key = str(key_node.value)
        if key not in APPLICATION_SETTINGS:
            problems.report(f"application '{name}': unknown setting '{key}'{did_you_mean(key, APPLICATION_SETTINGS)} "
                            f"(expected one of: {', '.join(APPLICATION_SETTINGS)})", _line(key_node))
            continue
        settings[key] = value_node
        lines[key] = _line(key_node)

    def error(key, message):
        return PolicyError(f"application '{name}': {message}", lines.get(key, line))

    user = _plain(settings.get("user")) if "user" in settings else name
    if not isinstance(user, (str, int)) or isinstance(user, bool) or not str(user) or any(
            c.isspace() for c in str(user)):
        raise error("user", f"'user' must be a user name without spaces, got {user!r}")
    user = str(user)
    if user in users:
        raise error("user", f"user '{user}' already belongs to application '{users[user]}'")
    users[user] = name
    if "password_hash" not in settings:
        raise error(None, "'password_hash' is missing (make one with: redis-guard policy hash-password)")
    try:
        password = PasswordHash.parse(str(_plain(settings["password_hash"])))
    except HashFormatError as exc:
        raise error("password_hash", f"'password_hash': {exc}") from None
    prefixes = _plain(settings.get("prefixes")) if "prefixes" in settings else []
    if isinstance(prefixes, str):
        prefixes = [prefixes]
    if not isinstance(prefixes, list) or not all(isinstance(p, str) and p for p in prefixes):
        raise error("prefixes", f"'prefixes' must be a list of non-empty key prefixes, got {prefixes!r}")
    read_only = _plain(settings.get("read_only")) if "read_only" in settings else False
    if not isinstance(read_only, bool):
        raise error("read_only", f"'read_only' must be true/false, got {read_only!r}")
    overrides = _rule_settings(settings.get("rules"), f"applications: {name}: rules", problems)
    merged = dict(raw)
    for rule_id, (values, value_lines, rule_line) in overrides.items():
        base_values, base_lines, _ = raw.get(rule_id, ({}, {}, rule_line))
        merged[rule_id] = ({**base_values, **values}, {**base_lines, **value_lines}, rule_line)
    rules = _with_namespace(_build_rules(merged, problems, table), name, prefixes, read_only)
    return Application(name, user, password, tuple(prefixes), read_only, rules, tuple(overrides))


def load_builtin(table=None) -> Policy:
    """The built-in baseline policy (`BUILTIN`)."""
    return load_policy(str(BUILTIN), table)


def load_policy(path: str, table=None) -> Policy:
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as exc:
        raise PolicyError(exc.strerror or str(exc), None, path) from None
    return load_policy_text(text, path, table)

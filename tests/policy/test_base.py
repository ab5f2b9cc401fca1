"""The rule registry (`base.register`): every rule declares its place, the registry keeps the
rules in that order, and a rule it cannot place stops the import."""

import ast
from pathlib import Path

import pytest

from proxy.policy import rules
from proxy.policy.base import REGISTRY, CommandRule, RegistrationError, register
from proxy.policy.loader import load_policy_text

# The order rules run in (docs/rules.md; the refusals C5, C6 before the rewrites C3, C4).
EXPECTED_ORDER = ["C1", "C2", "C5", "C6", "C3", "C4", "K1", "K2", "K3", "K4", "K5", "K6", "K7", "K8", "K9", "K10",
                  "K11", "T1", "T2", "T3", "V1", "V2", "V3", "V4"]


@pytest.fixture
def registry():
    """REGISTRY as it is, put back after the test (throwaway rules leave no trace)."""
    before = dict(REGISTRY)
    yield REGISTRY
    REGISTRY.clear()
    REGISTRY.update(before)


def throwaway(rule_id, place, name="Throwaway"):
    """A rule class that applies to no command, not yet registered."""
    return type(name, (CommandRule,), {"id": rule_id, "title": "throwaway", "order": place,
                                       "applies_to": lambda self, spec: False})


def test_the_registry_yields_the_rules_in_their_declared_order():
    assert list(REGISTRY) == EXPECTED_ORDER
    assert [rule.order for rule in REGISTRY.values()] == sorted(rule.order for rule in REGISTRY.values())


def test_a_policy_runs_its_rules_in_registry_order_whatever_the_file_says():
    # K7 needs an `applications:` section, K10 a `schema:`
    expected = [rule_id for rule_id in EXPECTED_ORDER if rule_id not in ("K7", "K10")]
    listed = list(reversed(expected))
    policy = load_policy_text("name: t\nrules:\n" + "".join(f"  {rule_id}: {{}}\n" for rule_id in listed))
    assert [rule.id for rule in policy.rules] == expected


def test_a_new_rule_runs_at_the_place_it_declares(registry):
    register(throwaway("X1", 150))  # between the command rules (1xx) and the key rules (2xx)
    assert list(registry) == [*EXPECTED_ORDER[:6], "X1", *EXPECTED_ORDER[6:]]
    policy = load_policy_text("name: t\nrules:\n  K1: {}\n  X1: {}\n  C1: {}\n")
    assert [rule.id for rule in policy.rules] == ["C1", "C2", "X1", "K1"]  # C2: every policy's baseline


@pytest.mark.parametrize("rule_id, place, message", [
    ("X1", None, "rule X1 (Throwaway) declares no place"),
    ("X1", True, "rule X1 (Throwaway) declares no place"),
    ("X1", "150", "rule X1 (Throwaway) declares no place"),
    ("X1", 101, "rules C1 and X1 both declare order = 101"),
    ("C1", 999, "rule C1 is registered twice (NoKeysCommand, Throwaway)"),
    ("", 999, "rule class Throwaway has no id"),
])
def test_a_rule_that_cannot_be_placed_is_an_error_at_import(registry, rule_id, place, message):
    before = list(registry.items())
    with pytest.raises(RegistrationError, match=message.replace("(", r"\(").replace(")", r"\)")):
        register(throwaway(rule_id, place))
    assert list(registry.items()) == before


def test_a_subclass_of_a_registered_rule_inherits_its_place_and_is_refused(registry):
    parent = throwaway("X1", 150)
    register(parent)
    child = type("Child", (parent,), {"id": "X2"})
    with pytest.raises(RegistrationError, match="rules X1 and X2 both declare order = 150"):
        register(child)


def test_no_rule_module_imports_from_another_rule_module():
    """What rules share lives in the `_` modules of the package (`_ttl`, `_commands`, `_types`...)."""
    package = Path(rules.__file__).parent
    rule_modules = {path.stem for path in package.glob("[a-z]*.py")}
    found = []
    for path in sorted(package.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module in rule_modules:
                found.append(f"{path.name} imports from {node.module}")
    assert len(rule_modules) == len(EXPECTED_ORDER)
    assert found == []

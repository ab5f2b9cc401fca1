"""The engine's compiled plans and its cache of names that passed the key rules."""

from proxy.commands.table import CommandTable
from proxy.policy.engine import Engine
from proxy.policy.loader import load_policy_text

TABLE = CommandTable.from_snapshot()
POLICY = "name: t\nrules:\n  K2: {style: lowercase}\n  C1: {}\n"


def decide(engine, *words):
    args = [word.encode() for word in words]
    plan = engine.plan_for(args)
    return None if plan is None else engine.decide(plan, args)


def test_commands_without_rules_have_no_plan():
    engine = Engine(load_policy_text(POLICY), TABLE)
    assert engine.plan_for([b"PING"]) is None
    assert engine.plan_for([b"get", b"k"]).keys_only
    assert not engine.plan_for([b"KEYS", b"*"]).keys_only


def test_key_cache_holds_only_names_that_passed_and_stays_bounded(monkeypatch):
    engine = Engine(load_policy_text(POLICY), TABLE)
    assert decide(engine, "GET", "good:key") is None
    assert b"good:key".translate(engine.key_classes) in engine.good_keys
    for _ in range(2):  # a bad name is never remembered as good
        assert decide(engine, "GET", "Bad:Key").reject.rule == "K2"
        assert decide(engine, "GET", "bad:Key").reject.rule == "K2"
    assert len(engine.good_keys) == 1
    assert decide(engine, "GET", "new:keys") is None  # the same class as good:key: nothing new
    assert len(engine.good_keys) == 1
    monkeypatch.setattr(Engine, "GOOD_KEYS_MAX", 4)
    for i in range(1, 11):
        assert engine.key_ok(b"k" * i)
    assert len(engine.good_keys) <= 4


def test_each_policy_load_starts_a_new_cache():
    first = Engine(load_policy_text(POLICY), TABLE)
    first.key_ok(b"mixed:key")
    second = Engine(load_policy_text("name: u\nrules:\n  K2: {style: UPPERCASE}\n"), TABLE)
    assert decide(second, "GET", "mixed:key").reject.rule == "K2"

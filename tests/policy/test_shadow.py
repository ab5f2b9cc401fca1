"""The shadow policy (`policy/shadow.py`) without sockets: what a candidate would reject, rewrite or
audit is counted under its own name and logged with sampling; it never changes a command or the
session's state, decides a command it passed before through the engine's fast paths, follows
transactions, applications and reloads. And audit mode counts the rewrites it does not do."""

from __future__ import annotations

import itertools
import json
import logging

import pytest

from proxy import metrics
from proxy.commands.table import CommandTable
from proxy.policy.base import AUDIT, REGISTRY, RewriteRule
from proxy.policy.decision import SessionState
from proxy.policy.engine import Engine
from proxy.policy.loader import load_policy_text
from proxy.policy.shadow import LOG_INTERVAL, ShadowPolicy
from tests.policy.helpers import no_baseline

TABLE = CommandTable.from_snapshot()
NAMES = (f"candidate-{n}" for n in itertools.count())  # a policy label of its own per test


def shadow_of(rules: str, mode: str = "enforce", extra: str = "", clock=None) -> ShadowPolicy:
    name = next(NAMES)
    engine = Engine(load_policy_text(no_baseline(f"name: {name}\nmode: {mode}\nrules:\n{rules}\n{extra}")), TABLE)
    return ShadowPolicy(engine, clock) if clock is not None else ShadowPolicy(engine)


def count(policy: str, rule: str, outcome: str, mode: str = "enforce", app: str = "") -> float:
    value = metrics.REGISTRY.get_sample_value("redis_guard_policy_findings_total", {
        "rule": rule, "mode": mode, "outcome": outcome, "policy": policy, "app": app})
    return value or 0.0


def words(line: str) -> list[bytes]:
    return [word.encode() for word in line.split()]


def observe(shadow, state, *lines, app=None):
    commands = [words(line) for line in lines]
    for index in range(len(commands)):
        shadow.observe(commands, index, state, app, ("127.0.0.1", 5000))
    return commands


@pytest.mark.parametrize("rules, command, rule, outcome, mode", [
    ("  K2: {style: lowercase}", "SET User:1 v", "K2", "would-reject", "enforce"),
    ("  C1: {}", "KEYS *", "C1", "would-reject", "enforce"),
    ("  C2: {deny: [FLUSHALL]}", "FLUSHALL", "C2", "would-reject", "enforce"),
    ("  T1: {action: reject}", "SET user:1 v", "T1", "would-reject", "enforce"),
    ("  K2: {style: lowercase, mode: audit}", "GET User:1", "K2", "would-audit", "audit"),
    ("  C4: {}", "DEL user:1", "C4", "would-rewrite", "enforce"),
    ("  T1: {action: inject}", "SET user:1 v", "T1", "would-rewrite", "enforce"),
    ("  C4: {mode: audit}", "DEL user:1", "C4", "would-audit", "audit"),  # audit mode's unapplied rewrite
])
def test_what_the_candidate_would_do_is_counted_under_its_name(rules, command, rule, outcome, mode):
    shadow = shadow_of(rules)
    state = SessionState()
    observe(shadow, state, command)
    assert count(shadow.name, rule, outcome, mode) == 1
    assert state.in_multi is False and not state.expiring and not state.owed


def test_a_command_it_passes_counts_nothing_and_is_decided_once_per_shape(monkeypatch):
    shadow = shadow_of("  K2: {style: lowercase}\n  T1: {action: reject}\n  V1: {max_bytes: 100}")
    engine = shadow.engine
    decided = []
    real = engine.decide
    monkeypatch.setattr(engine, "decide", lambda *args: decided.append(args[1][0]) or real(*args))
    state = SessionState()
    observe(shadow, state, *(f"SET user:{n} v EX 60" for n in range(100)), *(f"GET user:{n}" for n in range(100)))
    # one decision per key class (user:<digit>, user:<digit><digit>): then the memo of passes for
    # SET, and the key classes already seen for GET
    assert decided == [b"SET", b"SET"]
    assert shadow.sampled == {}


def test_it_never_changes_the_command_or_the_session_state():
    shadow = shadow_of("  C4: {}\n  T1: {action: inject}\n  K2: {style: lowercase}")
    state = SessionState()
    state.in_multi = True
    commands = observe(shadow, state, "DEL user:1", "SET User:2 v", "SET user:3 v")
    assert commands == [words("DEL user:1"), words("SET User:2 v"), words("SET user:3 v")]
    assert state.in_multi is True and not state.expiring and not state.owed and state.protocol == 2


def test_rewrites_that_are_checks_on_the_server_are_not_counted():
    shadow = shadow_of("  V2: {max_elements: 10}\n  C3: {commands: {HGETALL: {action: limit, max: 5}}}")
    observe(shadow, SessionState(), "HSET h f v", "HGETALL h")
    assert count(shadow.name, "V2", "would-rewrite") == 0 and count(shadow.name, "C3", "would-rewrite") == 0
    assert [rule for rule, cls in REGISTRY.items()
            if isinstance(cls, type) and issubclass(cls, RewriteRule) and cls.checks_on_server] == ["C6", "C3", "V1", "V2"]


def test_a_transaction_owing_a_ttl_at_exec_would_be_rejected():
    shadow = shadow_of("  T1: {action: reject}")
    state = SessionState()
    observe(shadow, state, "MULTI")
    state.in_multi = True  # what the session does for MULTI
    observe(shadow, state, "SET user:1 v", "SET user:2 v", "EXPIRE user:2 60", "EXEC")
    assert count(shadow.name, "T1", "would-reject") == 1  # user:1, at EXEC
    assert not state.owed  # the session's own state was not touched
    state.in_multi = False
    observe(shadow, state, "MULTI")
    state.in_multi = True
    observe(shadow, state, "SET user:3 v", "DISCARD")
    state.in_multi = False
    observe(shadow, state, "GET user:3")
    assert count(shadow.name, "T1", "would-reject") == 1 and not state.shadow.owed


def test_a_command_dispatched_again_is_observed_once():
    shadow = shadow_of("  K2: {style: lowercase}")
    state = SessionState()
    commands = [words("SET User:1 v")]
    for _ in range(3):  # the session runs a command again after switching connections
        shadow.observe(commands, 0, state, None, None)
    assert count(shadow.name, "K2", "would-reject") == 1


def test_the_log_is_sampled_per_rule_and_outcome(caplog):
    now = [1000.0]
    shadow = shadow_of("  K2: {style: lowercase}\n  C1: {}", clock=lambda: now[0])
    state = SessionState()
    with caplog.at_level(logging.INFO, logger="redis_guard.decisions"):
        observe(shadow, state, "SET User:1 v", "SET User:2 v", "KEYS *", "SET User:3 v")
        now[0] += LOG_INTERVAL
        observe(shadow, state, "SET User:4 v")
    lines = [json.loads(record.message) for record in caplog.records if record.name == "redis_guard.decisions"]
    assert [(line["rule"], line["subject"], line["suppressed"]) for line in lines] == [
        ("K2", "key 'User:1'", 0), ("C1", "command KEYS", 0), ("K2", "key 'User:4'", 2)]
    assert all(line["event"] == "shadow" and line["policy"] == shadow.name and line["outcome"] == "would-reject"
               and line["client"] == "127.0.0.1:5000" for line in lines)
    assert count(shadow.name, "K2", "would-reject") == 4


PASSWORD = "$scrypt$ln=14,r=8,p=1$8aGMc/neQzV4UYaPbmzNqA$AIrGz1UR7Wma2EeaAUkWbcx6NeMnIiy/kcuIJhbn0AM"


def test_each_application_is_decided_by_the_candidate_engine_of_its_name():
    apps = f"applications:\n  shop: {{password_hash: '{PASSWORD}', prefixes: ['shop:']}}\nauth: optional\n"
    shadow = shadow_of("  K7: {anonymous: allow}", extra=apps)
    state = SessionState()
    observe(shadow, state, "GET shop:1", "GET other:1", app="shop")
    assert count(shadow.name, "K7", "would-reject", app="shop") == 1
    observe(shadow, state, "GET other:2", app="gone")  # an application the candidate does not have
    observe(shadow, state, "GET other:3")
    assert count(shadow.name, "K7", "would-reject", app="gone") == 0
    assert count(shadow.name, "K7", "would-reject") == 0


def test_a_new_candidate_starts_a_fresh_state():
    first = shadow_of("  T1: {action: reject}")
    state = SessionState()
    state.in_multi = True
    observe(first, state, "SET user:1 v")
    assert state.shadow.owed
    second = shadow_of("  T1: {action: reject}")
    observe(second, state, "GET user:1")
    assert state.shadow.policy is second and not state.shadow.owed


def test_a_failing_candidate_rule_is_logged_and_changes_nothing(monkeypatch, caplog):
    shadow = shadow_of("  K2: {style: lowercase}")

    def broken(*args):
        raise RuntimeError("bug in a rule")

    monkeypatch.setattr(shadow.engine, "decide", broken)
    with caplog.at_level(logging.ERROR, logger="redis_guard.shadow"):
        observe(shadow, SessionState(), "SET User:1 v")
    assert "shadow policy" in caplog.text and "bug in a rule" in caplog.text


@pytest.mark.parametrize("rules, command, advice", [
    ("  C4: {mode: audit}", "DEL a b", "UNLINK a b"),
    ("  T1: {action: inject, default_ttl: 60, mode: audit}", "SET user:1 v", "SET user:1 v EX 60"),
    ("  T1: {action: inject, default_ttl: 60, mode: audit}", "HSET user:1 f v", "HSET user:1 f v; EXPIRE user:1 60 NX"),
])
def test_audit_mode_counts_the_rewrites_it_does_not_do(rules, command, advice):
    engine = Engine(load_policy_text(f"name: a\nrules:\n{rules}\n"), TABLE)
    args = words(command)
    verdict = engine.decide(engine.plan_for(args), args)
    assert verdict.reject is None and verdict.commands is None  # forwarded as it is
    [finding] = verdict.findings
    assert finding.mode == AUDIT and finding.advice.endswith(f"it is sent as: {advice}")

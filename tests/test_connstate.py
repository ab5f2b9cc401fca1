"""The session's dispatch table: one lookup per command finds its action and, under a policy,
its plan (`connstate.dispatch_table`)."""

import pytest

from proxy import connstate
from proxy.commands.table import CommandTable
from proxy.connstate import PASS, STREAM, SUBCOMMAND, Guard
from proxy.policy import Engine, load_policy_text

TABLE = CommandTable.from_snapshot()
SHARED, DEDICATED = connstate.build_actions([spec.name for spec in TABLE if "|" not in spec.name],
                                            [spec.name for spec in TABLE if "blocking" in spec.flags])
POLICY = """
name: dispatch
rules:
  K2: {style: lowercase}
  C2: {deny: ["@pubsub", "MONITOR", "CLIENT"]}
  T1: {action: reject}
"""
ENGINE = Engine(load_policy_text(POLICY), TABLE)


@pytest.mark.parametrize("actions", [SHARED, DEDICATED], ids=["shared", "dedicated"])
def test_every_planned_name_gets_a_guard_with_its_action(actions):
    dispatch = connstate.dispatch_table(actions, ENGINE.plans)
    assert ENGINE.plans
    for name, plan in ENGINE.plans.items():
        entry = dispatch[name]
        assert type(entry) is Guard and entry.plan is plan
        assert entry.action == actions.get(name, PASS)
    unplanned = [name for name in actions if name not in ENGINE.plans]
    assert unplanned and all(dispatch[name] == actions[name] for name in unplanned)
    assert set(dispatch) == set(actions) | set(ENGINE.plans)


@pytest.mark.parametrize("name, action", [
    (b"GET", PASS), (b"set", PASS), (b"SUBSCRIBE", STREAM), (b"monitor", STREAM), (b"CLIENT", SUBCOMMAND),
])
def test_a_guard_keeps_the_action_the_name_has_without_the_policy(name, action):
    entry = connstate.dispatch_table(SHARED, ENGINE.plans)[name]
    assert type(entry) is Guard and entry.action == action == SHARED[name]


def test_a_guard_reads_the_plan_once():
    dispatch = connstate.dispatch_table(SHARED, ENGINE.plans)
    get, set_, publish = dispatch[b"GET"], dispatch[b"SET"], dispatch[b"PUBLISH"]
    assert get.keys_only and not set_.keys_only and not publish.keys_only
    assert set_.passed_before is set_.plan.passed_before is not None  # the memo of passes
    # No memo: every command goes to the engine.
    assert publish.plan.passed_before is None and publish.passed_before([b"PUBLISH", b"c", b"m"], None) is False


def test_without_plans_the_actions_are_the_table():
    assert connstate.dispatch_table(SHARED, {}) is SHARED

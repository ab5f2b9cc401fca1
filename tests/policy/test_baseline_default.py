"""The baseline guard is not lost by omission (policy/loader.py): a policy that does not name C2
gets it with its defaults, in the engine, in its applications, in its ACL users and in `policy
explain`; only `C2: {baseline: false}` (or `C2: off`) turns it off, and `policy check` says which
holds."""

from __future__ import annotations

import pytest

from proxy import cli
from proxy.commands.table import CommandTable
from proxy.policy.acl import compile_users
from proxy.policy.engine import Engine
from proxy.policy.loader import load_policy_text
from proxy.policy.passwords import hash_password

TABLE = CommandTable.from_snapshot()
HASH = hash_password(b"pw", log_n=4)


def rejected_by(policy: str, *args) -> str | None:
    engine = Engine(load_policy_text(policy), TABLE)
    words = [a.encode() for a in args]
    plan = engine.plan_for(words)
    if plan is None:  # no rule applies to the command
        return None
    verdict = engine.decide(plan, words)
    return verdict.reject.rule if verdict is not None and verdict.reject is not None else None


@pytest.mark.parametrize("policy", [
    "name: t\n", "name: t\nrules: {}\n", "name: t\nrules:\n  K2: {style: lowercase}\n", "rules:\n  C1: {}\n",
])
@pytest.mark.parametrize("command", [("KEYS", "*"), ("FLUSHALL",), ("FLUSHDB",), ("CONFIG", "SET", "x", "y"),
                                     ("CLIENT", "KILL", "ID", "1"), ("SWAPDB", "0", "1")])
def test_a_policy_without_c2_keeps_the_baseline(policy, command):
    expected = "C1" if command[0] == "KEYS" and "C1" in policy else "C2"
    assert rejected_by(policy, *command) == expected
    assert load_policy_text(policy).baseline().startswith("on (")


@pytest.mark.parametrize("policy, keys, flushall, holds", [
    ("rules:\n  C2: {baseline: false}\n", None, "C2", "off (C2: {baseline: false})"),
    ("rules:\n  C2: {baseline: false, deny: []}\n", None, None, "off (C2: {baseline: false})"),
    ("rules:\n  C2: off\n", None, None, "not enforced (C2: off)"),
    ("rules:\n  C2: {}\n", "C2", "C2", "on (C2;"),
    ("mode: audit\nrules: {}\n", None, None, "not enforced (audit mode)"),
])
def test_only_saying_so_turns_it_off(policy, keys, flushall, holds):
    assert rejected_by(policy, "KEYS", "*") == keys
    assert rejected_by(policy, "FLUSHALL") == flushall
    assert load_policy_text(policy).baseline().startswith(holds)


def test_applications_and_acl_users_get_it():
    policy = load_policy_text(f"name: shop\napplications:\n  ops:\n    password_hash: '{HASH}'\n"
                              "    prefixes: ['a:']\n    rules:\n      C2: {allow: [FLUSHDB]}\n"
                              f"  app:\n    password_hash: '{HASH}'\n    prefixes: ['b:']\n")
    engine = Engine(policy, TABLE)
    users = {user.app: user.rules for user in compile_users(engine, None).users}
    assert "-keys" in users[None] and "-flushall" in users["app"]
    assert "-flushdb" in users["app"] and "-flushdb" not in users["ops"]  # allowed by name for ops


def test_policy_check_and_explain_say_it(tmp_path, capsys):
    bare = tmp_path / "bare.yaml"
    bare.write_text("name: bare\nrules: {}\n")
    off = tmp_path / "off.yaml"
    off.write_text("name: off\nrules:\n  C2: {baseline: false}\n")
    assert cli.main(["policy", "check", str(bare)]) == 0
    out = capsys.readouterr().out
    assert "baseline guard: on (C2 not named: the baseline applies to every policy" in out
    assert "C2   enforce  denied command: the baseline guard: deny" in out
    assert cli.main(["policy", "check", str(off)]) == 0
    assert "baseline guard: off (C2: {baseline: false})" in capsys.readouterr().out
    assert cli.main(["policy", "explain", str(bare), "--", "FLUSHALL"]) != 0
    assert "rejected by C2" in capsys.readouterr().out
    assert cli.main(["policy", "explain", str(off), "--", "KEYS", "*"]) == 0
    assert "forwarded unchanged" in capsys.readouterr().out
    assert cli.main(["policy", "check", "--builtin"]) == 0
    assert "baseline guard: on (C2;" in capsys.readouterr().out

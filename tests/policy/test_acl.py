"""The ACL compiler (policy/acl.py), without a server: users, names, passwords, patterns, and the
commands it refuses, which must be exactly those the proxy refuses whatever their arguments."""

from __future__ import annotations

import hashlib
import hmac
from functools import cache

import pytest

from proxy.commands.table import CommandTable
from proxy.policy.acl import ALWAYS_KEEP, compile_users, denied_commands, password_for, user_name
from proxy.policy.engine import Engine
from proxy.policy.loader import load_builtin, load_policy, load_policy_text
from proxy.policy.passwords import hash_password
from proxy.policy.rules.c6_scripts import RUNS
from tests.servers import REPO

HASH = hash_password(b"pw", log_n=4)
POLICY = f"""
name: shop
auth: optional
applications:
  checkout:
    password_hash: "{HASH}"
    prefixes: ["shop:order:", "shop:c*rt["]
  reports:
    password_hash: "{HASH}"
    prefixes: ["shop:"]
    read_only: true
  ops:
    password_hash: "{HASH}"
    prefixes: ["shop:"]
    rules:
      C2: {{allow: [FLUSHDB, "CONFIG|SET"]}}
rules:
  K7: {{anonymous: allow}}
  C2: {{}}
  C5: {{deny: ["@pubsub"]}}
  C6: {{scripts: deny}}
  V2: {{}}
"""


@cache
def table() -> CommandTable:
    return CommandTable.from_snapshot()


@cache
def engine(text: str = POLICY) -> Engine:
    return Engine(load_policy_text(text), table())


def users(text: str = POLICY, password: str | None = "up-pw"):
    return {user.app: user for user in compile_users(engine(text), password).users}


def test_one_user_per_application_and_one_for_no_application():
    found = users()
    assert set(found) == {None, "checkout", "reports", "ops"}
    assert found[None].name == "redis-guard:shop" and found["checkout"].name == "redis-guard:shop:checkout"
    assert user_name("my policy", "a:b/c") == "redis-guard:my%20policy:a%3Ab%2Fc"


def test_passwords_are_deterministic_and_keyed_by_the_upstream_password():
    first, again, other = users(), users(), users(password="another")
    for app in first:
        assert first[app].password == again[app].password != other[app].password
        expected = hmac.new(b"up-pw", b"redis-guard acl v1\0" + first[app].name.encode(), hashlib.sha256).hexdigest()
        assert first[app].password == expected == password_for(first[app].name, "up-pw")
        rules = first[app].rules
        assert rules[:3] == ("reset", "on", "#" + hashlib.sha256(expected.encode()).hexdigest())
        assert expected not in " ".join(first[app].setuser())  # only its hash is sent
    assert compile_users(engine(), "up-pw").credentials_for("checkout") == (first["checkout"].name,
                                                                          first["checkout"].password)
    assert compile_users(engine(), "up-pw").credentials_for(None)[0] == "redis-guard:shop"


def test_keys_and_channels_are_the_prefixes_with_glob_characters_escaped():
    found = users()
    assert [r for r in found["checkout"].rules if r[0] in "~%&"] == [
        "~shop:order:*", "~shop:c\\*rt\\[*", "&shop:order:*", "&shop:c\\*rt\\[*", "&__redis_guard__:*"]
    assert [r for r in found["reports"].rules if r[0] in "~%&"] == ["%R~shop:*", "&shop:*", "&__redis_guard__:*"]
    assert [r for r in found[None].rules if r[0] in "~%&"] == ["~*", "&*"]  # anonymous: allow
    rejecting = users(POLICY.replace("anonymous: allow", "anonymous: reject"))
    assert [r for r in rejecting[None].rules if r[0] in "~%&"] == ["&__redis_guard__:*"]  # no key; WAIT's mark
    audited = users(POLICY.replace("K7: {anonymous: allow}", "K7: {mode: audit}"))
    assert [r for r in audited["checkout"].rules if r[0] in "~%&"] == ["~*", "&*"]


def test_an_application_gets_back_what_its_rules_allow():
    found = users()
    assert "-flushdb" in found["checkout"].rules and "-flushdb" not in found["ops"].rules
    assert "-config|set" not in found["ops"].rules and "-config|get" in found["ops"].rules


def test_what_the_proxy_sends_itself_stays_allowed():
    found = users()
    for app in found:
        denied = {rule[1:] for rule in found[app].rules if rule.startswith("-")}
        # C6 denies scripting, but V2 sends its checks as EVAL; SELECT is the proxy's own
        assert not denied & (ALWAYS_KEEP | {"eval", "hlen", "scard"}), (app, denied & ALWAYS_KEEP)
        assert {"evalsha", "fcall", "function"} <= denied  # every FUNCTION subcommand: the container
    no_scripts = users(POLICY.replace("  V2: {}\n", ""))
    assert "-eval" in no_scripts["checkout"].rules


def test_an_audit_policy_applies_nothing():
    text = POLICY.replace("name: shop", "name: shop\nmode: audit")
    assert compile_users(engine(text), None).audit and not compile_users(engine(), None).audit


def approved_script(verdict, spec) -> bool:
    """C6 `scripts: approved` refuses these unless the script is approved: the arguments decide."""
    return verdict.reject.rule == "C6" and spec.name in (*RUNS, "script|load", "script|exists") and "approved" in verdict.reject.title


def command_args(spec) -> list[bytes]:
    return [*(part.encode() for part in spec.name.split("|")), b"a", b"b", b"c"]


def _presets():
    yield "built-in", load_builtin()
    for name in ("lowercase-colon", "key-value-design", "camelcase-namespace", "strict-dotted", "key-schema",
                 "applications"):
        yield name, load_policy(f"{REPO}/configs/policies/{name}.yaml")


@pytest.mark.parametrize("name, policy", list(_presets()), ids=lambda v: v if isinstance(v, str) else "")
def test_the_acl_refuses_what_the_proxy_refuses_whatever_the_arguments(name, policy):
    """For every command and subcommand: denied in the ACL exactly when a rule of the proxy
    refuses it whatever its arguments (and the proxy does refuse a call of it), unless the proxy
    sends it itself."""
    base = Engine(policy, table())
    for each in [base, *(base.tenants.engines.values() if base.tenants else ())]:
        denied = set(denied_commands(each))
        for spec in table().walk():
            if spec.subcommands:
                continue
            name_denied = spec.name in denied or spec.name.partition("|")[0] in denied
            args = command_args(spec)
            verdict = each.decide(each.plan_for(args), args) if each.plan_for(args) else None
            refused = verdict is not None and verdict.reject is not None
            if name_denied:
                assert refused, f"{spec.name}: denied in the ACL, passed by the proxy"
            elif refused and verdict.reject.rule in ("C1", "C2", "C5", "C6") and not approved_script(verdict, spec):
                assert spec.name in ALWAYS_KEEP or any(spec.name in rule.server_commands for rule in
                                                       (*each.command_rules, *each.rewrite_rules)), spec.name

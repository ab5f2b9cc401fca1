"""Rule C6 `scripts: approved`: only the library's scripts run, under every shipped preset; the
library's loading and static review (`policy check`); `policy test` fixtures calling scripts by name."""

from __future__ import annotations

import hashlib
import io
import os
from functools import cache

import pytest

from proxy import cli
from proxy.commands.table import CommandTable
from proxy.policy.base import PolicyError
from proxy.policy.engine import Engine
from proxy.policy.fixtures import run as run_fixtures
from proxy.policy.loader import load_policy, load_policy_text
from proxy.policy.offline import ALLOW, REJECT, REWRITE, decide
from proxy.policy.rules._scripts import BUILTIN_DIR, load_library, review
from tests.servers import REPO

PRESETS = ("lowercase-colon", "key-value-design", "camelcase-namespace", "strict-dotted", "key-schema", "applications")
# A key of each preset that its rules accept for a string (the application: checkout).
LOCK_KEYS = {"lowercase-colon": "user:lock:id:1", "key-value-design": "users:lock:1000",
             "camelcase-namespace": "userAdmin:lock:id:18", "strict-dotted": "user:basic.lock:42:string",
             "key-schema": "global:book", "applications": "shop:order:lock:1"}
RELEASE = (BUILTIN_DIR / "redis-py-lock-release.lua").read_bytes()
RELEASE_SHA = hashlib.sha1(RELEASE).hexdigest()


@cache
def table():
    return CommandTable.from_snapshot()


@cache
def preset_engine(name):
    engine = Engine(load_policy(os.path.join(REPO, "configs", "policies", f"{name}.yaml"), table()), table())
    return engine.tenants.engine("checkout") if engine.tenants is not None else engine


def outcome(engine, *args):
    return decide(engine, [a if isinstance(a, bytes) else str(a).encode() for a in args])


def refused_by_c6(engine, *args):
    found = outcome(engine, *args)
    return found.verdict == REJECT and found.reject.rule == "C6" and "approved scripts only" in found.reject.title


# -- the bypasses of `declared`, refused under every preset -----------------------------------------

@pytest.mark.parametrize("name", PRESETS)
def test_the_script_bypasses_are_refused_under_every_preset(name):
    engine = preset_engine(name)
    key = LOCK_KEYS[name]
    assert refused_by_c6(engine, "EVAL", "redis.call('SET', 'BadKey NoTTL', 'x')", "0")  # K2, K3, K6, T1
    big = "redis.call('SET', KEYS[1], string.rep('x', 102400)) return 1"  # V1, T1 on a good key
    assert refused_by_c6(engine, "EVAL", big, "1", key)
    assert refused_by_c6(engine, "EVAL", "redis.call('SET', 'books:nothing', 'x')", "0")  # K10
    assert refused_by_c6(engine, "EVAL", "return redis.call('SET', KEYS[1], 'x')", "1", key)  # T1 inject
    # the same scripts by SHA, as functions, or loaded first
    assert refused_by_c6(engine, "EVALSHA", hashlib.sha1(big.encode()).hexdigest(), "1", key)
    assert refused_by_c6(engine, "FCALL", "anything", "1", key)
    assert refused_by_c6(engine, "SCRIPT", "LOAD", big)
    assert refused_by_c6(engine, "EVAL_RO", "return redis.call('GET', KEYS[1])", "1", key)
    text = outcome(engine, "EVAL", "return 1", "0").reject.advice
    assert "library" in text and "policy check" in text  # the way to get a script approved


@pytest.mark.parametrize("name", PRESETS)
def test_the_builtin_lock_scripts_run_under_every_preset(name):
    engine = preset_engine(name)
    key = LOCK_KEYS[name]
    assert outcome(engine, "EVAL", RELEASE, "1", key, "token").verdict == ALLOW
    sent = outcome(engine, "EVALSHA", RELEASE_SHA.upper(), "1", key, "token")
    assert sent.verdict == REWRITE and sent.commands == ((b"EVAL", RELEASE, b"1", key.encode(), b"token"),)
    assert outcome(engine, "SCRIPT", "LOAD", RELEASE).verdict == ALLOW
    assert outcome(engine, "SCRIPT", "EXISTS", RELEASE_SHA).verdict == ALLOW


@pytest.mark.parametrize("name", PRESETS)
def test_an_approved_script_s_declared_keys_still_pass_the_key_rules(name):
    found = outcome(preset_engine(name), "EVALSHA", RELEASE_SHA, "1", "Bad Key", "token")
    assert found.verdict == REJECT and found.reject.rule != "C6"


def test_read_only_allow_and_managing_commands():
    # (the baseline off: C6's own refusals, not C2's, which deny some of these too)
    text = "rules:\n  C2: {baseline: false}\n  C6: {scripts: approved, read_only: allow}\n"
    engine = Engine(load_policy_text(text, None, table()), table())
    assert outcome(engine, "EVAL_RO", "return 1", "0").verdict == ALLOW
    assert outcome(engine, "FCALL_RO", "f", "0").verdict == ALLOW
    assert refused_by_c6(engine, "EVAL", "return 1", "0")
    for command in (["SCRIPT", "FLUSH"], ["FUNCTION", "LOAD", "#!lua name=x\n"], ["FUNCTION", "DELETE", "x"],
                    ["FUNCTION", "FLUSH"], ["SCRIPT", "DEBUG", "YES"]):
        assert refused_by_c6(engine, *command), command
    for command in (["SCRIPT", "KILL"], ["FUNCTION", "LIST"], ["FUNCTION", "STATS"]):
        assert outcome(engine, *command).verdict == ALLOW, command
    assert outcome(engine, "SCRIPT", "EXISTS", RELEASE_SHA, RELEASE_SHA.upper()).verdict == ALLOW
    assert refused_by_c6(engine, "SCRIPT", "EXISTS", RELEASE_SHA, "0" * 40)  # another's SHA: not answered
    declared = Engine(load_policy_text("rules:\n  C6: {scripts: declared}\n", None, table()), table())
    assert outcome(declared, "EVAL", "return 1", "0").verdict == ALLOW


# -- the policy's own library -----------------------------------------------------------------------

FUNCTIONS = "#!lua name=mylib\nredis.register_function('hello', function(keys, args) return 'hi' end)\n"


def write_library(folder):
    lib = folder / "scripts"
    lib.mkdir()
    (lib / "keys.lua").write_text("-- lists everything\nlocal all = redis.call('KEYS', '*')\nreturn #all\n")
    (lib / "computed.lua").write_text("local cmd = ARGV[1]\nreturn redis.call(cmd, KEYS[1])\n")
    (lib / "nottl.lua").write_text("redis.call('SET', KEYS[1], ARGV[1])\n"
                                   "redis.call('hset', 'app:' .. ARGV[2], 'f', 'v')\nreturn 1\n")
    (lib / "good.lua").write_text("return redis.call('SET', KEYS[1], ARGV[1], 'EX', 60)\n")
    (lib / "mylib.lua").write_text(FUNCTIONS)
    policy = folder / "policy.yaml"
    policy.write_text("name: t\nrules:\n  C2: {}\n  C6: {scripts: approved, library: scripts}\n  K2: {}\n"
                      "  T1: {action: reject, persistent: []}\n")
    return policy


def test_the_library_directory_is_relative_to_the_policy(tmp_path):
    policy = write_library(tmp_path)
    engine = Engine(load_policy(str(policy), table()), table())
    good = (tmp_path / "scripts" / "good.lua").read_bytes()
    assert outcome(engine, "EVAL", good, "1", "k").verdict == ALLOW
    assert outcome(engine, "EVALSHA", hashlib.sha1(good).hexdigest(), "1", "k", "v").verdict == REWRITE
    assert outcome(engine, "EVAL", RELEASE, "1", "k", "t").verdict == ALLOW  # the built-in ones too
    assert outcome(engine, "FCALL", "hello", "0").verdict == ALLOW
    assert refused_by_c6(engine, "FCALL", "other", "0")
    assert outcome(engine, "EVAL", good, "1", "Bad").reject.rule == "K2"


def test_library_mistakes_are_policy_errors(tmp_path):
    with pytest.raises(PolicyError, match="not a directory") as caught:
        load_policy_text("rules:\n  C6:\n    scripts: approved\n    library: nowhere\n", str(tmp_path / "p.yaml"))
    assert caught.value.line == 4
    with pytest.raises(PolicyError, match="'library' is for 'scripts: approved'"):
        load_policy_text("rules:\n  C6: {scripts: declared, library: x}\n")
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "f.lua").write_text("#!lua name=x\nreturn 1\n")
    with pytest.raises(PolicyError, match="registers no function"):
        load_policy_text("rules:\n  C6: {scripts: approved, library: lib}\n", str(tmp_path / "p.yaml"))


def test_the_static_review_finds_keys_computed_names_and_writes_without_ttl(tmp_path):
    policy = write_library(tmp_path)
    engine = Engine(load_policy(str(policy), table()), table())
    found = review(engine.policy.rule("C6").library, engine.policy.rules, table(), True)
    shown = [(os.path.basename(r.path), r.line, r.level, r.message) for r in found]
    assert ("keys.lua", 2, "error", "command KEYS is refused by rule C2 of this policy") in shown
    assert any(f == "computed.lua" and line == 2 and level == "warning" and "not a string literal" in m
               for f, line, level, m in shown)
    assert any(f == "nottl.lua" and line == 1 and "no TTL" in m for f, line, _, m in shown)
    assert any(f == "nottl.lua" and line == 2 and "not taken from KEYS" in m for f, line, _, m in shown)
    assert not any(f in ("good.lua", "mylib.lua") for f, *_ in shown)
    assert not review(load_library([BUILTIN_DIR]), engine.policy.rules, table(), True)  # the locks are clean


def test_policy_check_prints_the_review_and_fails_on_an_error(tmp_path, capsys):
    policy = write_library(tmp_path)
    assert cli.main(["policy", "check", str(policy)]) == 1
    out = capsys.readouterr().out
    assert "keys.lua:2: error: command KEYS is refused by rule C2" in out
    assert "nottl.lua:1: warning: SET may create a key and the script gives it no TTL" in out
    (tmp_path / "scripts" / "keys.lua").unlink()
    assert cli.main(["policy", "check", str(policy)]) == 0  # warnings only


@pytest.mark.parametrize("name", PRESETS)
def test_every_preset_passes_its_review(name, capsys):
    assert cli.main(["policy", "check", os.path.join(REPO, "configs", "policies", f"{name}.yaml")]) == 0
    assert "warning" not in capsys.readouterr().out


def test_fixtures_call_approved_scripts_by_file_name(tmp_path):
    policy = write_library(tmp_path)
    (tmp_path / "cases.yaml").write_text(f"""policy: {policy.name}
cases:
  - command: EVALSHA good 1 k v
    expect: {{by: C6}}
  - command: EVALSHA redis-py-lock-release.lua 1 k t
    expect: allow
  - command: EVALSHA unknown 1 k t
    expect: {{reject: C6}}
  - command: EVAL "return 1" 0
    expect: {{reject: C6}}
  - command: FCALL hello 0
    expect: allow
""")
    out = io.StringIO()
    assert run_fixtures([str(tmp_path / "cases.yaml")], out) == 0, out.getvalue()
    assert "5 passed, 0 failed" in out.getvalue()

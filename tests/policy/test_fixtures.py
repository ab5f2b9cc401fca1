"""`redis-guard policy test` (`policy/fixtures.py`): the shipped fixtures of every preset pass (this is
how CI runs them), every form of `expect` passes and fails where it should, failures are reported
like a test runner's, and broken files exit 2."""

from __future__ import annotations

import glob
import io
import os

import pytest
import yaml

from proxy import cli
from proxy.policy.fixtures import run
from tests.servers import REPO

PRESETS = os.path.join(REPO, "configs", "policies")
FIXTURES = os.path.join(PRESETS, "tests")


def test_the_shipped_fixtures_pass():
    out = io.StringIO()
    assert run([FIXTURES], out) == 0, out.getvalue()
    summary = out.getvalue().splitlines()[-1]
    passed = int(summary.split()[0])
    assert summary == f"{passed} passed, 0 failed" and passed >= 100
    out = io.StringIO()  # the presets' own directory: the policies are not taken for fixtures
    assert run([PRESETS], out) == 0 and out.getvalue().splitlines()[-1] == summary


@pytest.mark.parametrize("preset", sorted(glob.glob(os.path.join(PRESETS, "*.yaml"))), ids=os.path.basename)
def test_every_preset_has_fixtures_of_its_convention(preset):
    path = os.path.join(FIXTURES, os.path.basename(preset))
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    fixture = yaml.safe_load(text)
    assert os.path.normpath(os.path.join(FIXTURES, fixture["policy"])) == preset
    assert "convention" in text.split("\npolicy:")[0], "the header names the convention"
    verdicts = {str(case["expect"] if isinstance(case["expect"], str) else next(iter(case["expect"])))
                for case in fixture["cases"]}
    assert {"reject"} < verdicts, "good and bad examples"


def _fixture(tmp_path, cases: str, policy: str = "rules:\n  K2: {style: lowercase}\n  C4: {}\n  C3: {}\n",
             extra: str = "") -> str:
    (tmp_path / "policy.yaml").write_text("name: p\n" + policy)
    path = tmp_path / "fixture.yaml"
    path.write_text(f"policy: policy.yaml\n{extra}cases:\n{cases}")
    return str(path)


# (case, passes): each form of `expect` against the policy of `_fixture` (K2 lowercase, C4, C3 defaults)
EXPECTATIONS = [
    ("{command: GET user:1, expect: allow}", True),
    ("{command: GET user:1, expect: unchanged}", True),
    ("{command: DEL user:1, expect: allow}", True),
    ("{command: DEL user:1, expect: unchanged}", False),
    ("{command: GET User:1, expect: allow}", False),
    ("{command: GET User:1, expect: reject}", True),
    ("{command: GET User:1, expect: {reject: K2}}", True),
    ("{command: GET User:1, expect: {reject: [K1, K2]}}", True),
    ("{command: GET User:1, expect: {reject: K3}}", False),
    ("{command: GET user:1, expect: reject}", False),
    ("{command: DEL user:1, expect: rewrite}", True),
    ("{command: DEL user:1, expect: {rewrite: UNLINK user:1}}", True),
    ("{command: DEL user:1 user:2, expect: {rewrite: 'UNLINK user:1 user:2'}}", True),
    ("{command: DEL user:1, expect: {rewrite: [UNLINK user:1]}}", True),
    ("{command: DEL user:1, expect: {rewrite: [[UNLINK, 'user:1']]}}", True),
    ("{command: DEL user:1, expect: {rewrite: UNLINK user:2}}", False),
    ("{command: DEL user:1, expect: {by: C4}}", True),
    ("{command: DEL user:1, expect: {rewrite: UNLINK user:1, by: C4}}", True),
    ("{command: DEL user:1, expect: {by: T1}}", False),
    ("{command: GET user:1, expect: rewrite}", False),
    ("{command: 'GET \"user 1\"', expect: {reject: K2}}", False),  # one key: 'user 1', lower case
    ("{command: [GET, 'User 1'], expect: {reject: K2}}", True),
    ("{command: SMEMBERS user:1, expect: {audit: C3}}", True),  # C3's default: SMEMBERS warns
    ("{command: SMEMBERS user:1, expect: unchanged}", True),
    ("{command: GET user:1, expect: {audit: C3}}", False),
]


@pytest.mark.parametrize("case, passes", EXPECTATIONS)
def test_each_expectation(tmp_path, case, passes):
    out = io.StringIO()
    assert run([_fixture(tmp_path, f"  - {case}\n")], out) == (0 if passes else 1), out.getvalue()
    assert out.getvalue().splitlines()[-1] == ("1 passed, 0 failed" if passes else "0 passed, 1 failed")


def test_a_failure_names_its_line_the_expectation_and_the_decision(tmp_path, capsys):
    path = _fixture(tmp_path, "  - command: GET user:1\n    expect: allow\n"
                              "  - command: SET user:1 v\n    then: [EXPIRE user:1 60]\n    name: a TTL after\n"
                              "    expect: {reject: K2}\n")
    assert cli.main(["policy", "test", path]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out == [
        f"{path}: policy 'p', 2 cases, 1 FAILED",
        f"  FAIL {path}:5 (a TTL after): SET user:1 v",
        "       then: EXPIRE user:1 60",
        "    expected: rejected by K2",
        "    decided:  allowed, forwarded unchanged",
        "1 passed, 1 failed",
    ]


def test_cases_decide_as_an_application(tmp_path):
    policy = ("applications:\n  shop:\n    password_hash: \"$scrypt$ln=14,r=8,p=1$8aGMc/neQzV4UYaPbmzNqA$AIrGz1"
              "UR7Wma2EeaAUkWbcx6NeMnIiy/kcuIJhbn0AM\"\n    prefixes: ['shop:']\nrules:\n  K7: {}\n")
    cases = ("  - {command: GET shop:1, expect: unchanged}\n  - {command: GET other:1, expect: {reject: K7}}\n"
             "  - {command: GET shop:1, app: null, expect: {reject: K7}}\n")
    out = io.StringIO()
    assert run([_fixture(tmp_path, cases, policy, "app: shop\n")], out) == 0, out.getvalue()
    out = io.StringIO()
    assert run([_fixture(tmp_path, cases, policy, "app: nobody\n")], out) == 2
    assert "no application 'nobody' (applications: shop)" in out.getvalue()


@pytest.mark.parametrize("text, words", [
    ("policy: [x\n", "invalid YAML"),
    ("- a\n", "a fixture file is a mapping"),
    ("cases: []\n", "'policy:' must name the policy file"),
    ("policy: policy.yaml\n", "'cases:' must be a list"),
    ("policy: policy.yaml\npolcy: x\ncases: [{command: GET a, expect: allow}]\n",
     "unknown setting 'polcy' (did you mean policy?)"),
    ("policy: policy.yaml\ncases: [{command: SETX a b, expect: allow}]\n", "unknown command 'SETX' (did you mean"),
    ("policy: policy.yaml\ncases: [{command: SET a, expect: allow}]\n", "wrong number of arguments for 'set'"),
    ("policy: policy.yaml\ncases: [{command: 'GET \"a', expect: allow}]\n", "unbalanced quotes"),
    ("policy: policy.yaml\ncases: [{command: GET a, expect: alow}]\n", "(did you mean allow?)"),
    ("policy: policy.yaml\ncases: [{command: GET a, expect: {rejected: K1}}]\n",
     "unknown key 'rejected' (did you mean reject?)"),
    ("policy: policy.yaml\ncases: [{command: GET a, expect: {reject: K1, audit: K2}}]\n", "not reject and audit"),
    ("policy: policy.yaml\ncases: [{command: GET a, expect: {audit: K1, by: K2}}]\n", "goes with rewrite only"),
    ("policy: policy.yaml\ncases: [{command: GET a}]\n", "needs 'command' and 'expect'"),
    ("policy: policy.yaml\ncases: [{comand: GET a, expect: allow}]\n", "unknown key 'comand' (did you mean command?)"),
    ("policy: missing.yaml\ncases: [{command: GET a, expect: allow}]\n", "missing.yaml"),
    ("policy: broken.yaml\ncases: [{command: GET a, expect: allow}]\n", "unknown command 'FLUSHAL'"),
])
def test_a_broken_file_exits_2_and_says_why(tmp_path, text, words):
    (tmp_path / "policy.yaml").write_text("rules:\n  K2: {}\n")
    (tmp_path / "broken.yaml").write_text("rules:\n  C2: {deny: [FLUSHAL]}\n")
    path = tmp_path / "fixture.yaml"
    path.write_text(text)
    out = io.StringIO()
    assert run([str(path)], out) == 2
    lines = out.getvalue().splitlines()
    assert lines[0] == f"BROKEN {path}" and words in out.getvalue(), out.getvalue()
    assert lines[-1] == "0 passed, 0 failed, 1 broken file"


def test_a_directory_runs_every_file_and_a_broken_one_wins(tmp_path):
    good = _fixture(tmp_path, "  - {command: GET user:1, expect: allow}\n")
    sub = tmp_path / "more"
    sub.mkdir()
    (sub / "bad.yml").write_text("policy: ../policy.yaml\ncases: [{command: GET User:1, expect: allow}]\n")
    out = io.StringIO()
    assert run([str(tmp_path)], out) == 1
    assert out.getvalue().splitlines()[-1] == "1 passed, 1 failed"
    assert f"{sub / 'bad.yml'}:2:" in out.getvalue()
    (sub / "broken.yaml").write_text("nothing: here\n")
    assert run([str(tmp_path)], io.StringIO()) == 2
    assert run([good], io.StringIO()) == 0
    empty = tmp_path / "empty"
    empty.mkdir()
    assert run([str(empty)], io.StringIO()) == 2

"""`policy check` that helps: every mistake of a file at once, "did you mean" for command names, rule
ids and settings, messages for the shorthand the user wrote, YAML errors in words (`policy/problems.py`
and the loader)."""

from __future__ import annotations

import pytest

from proxy import cli
from proxy.policy.problems import did_you_mean, unknown_command
from tests.policy.helpers import load_error


def test_every_mistake_of_a_file_is_reported_with_its_line():
    text = ("name: three\n"             # 1
            "mode: enforc\n"            # 2
            "rules:\n"                  # 3
            "  C2: {deny: [FLUSHAL]}\n"  # 4
            "  K2: {style: lowercase}\n"  # 5
            "  K4: {max_lenght: 10}\n"  # 6
            "  C4: on\n")               # 7
    error = load_error(text, "three.yaml")
    assert [(each.line, each.message) for each in error.errors] == [
        (2, "'mode' must be enforce or audit, got 'enforc' (did you mean enforce?)"),
        (4, "rule C2: 'deny': unknown command 'FLUSHAL' (did you mean FLUSHALL?)"),
        (6, "rule K4: unknown setting(s): max_lenght (did you mean max_length?)"),
        (7, ("rule C4: `C4: on` (or yes/true) is true to YAML, not a mode: write `C4: {}` or `C4: enforce` to "
             "turn it on, `C4: off` to turn it off")),
    ]
    assert (error.line, error.message) == (error.errors[0].line, error.errors[0].message)
    assert str(error).splitlines() == [f"three.yaml:{each.line}: {each.message}" for each in error.errors]


def test_several_mistakes_of_one_rule_are_all_reported():
    error = load_error("rules:\n  K1:\n    min_segments: x\n    max_segments: true\n    segmnts: 3\n")
    assert [each.line for each in error.errors] == [3, 4, 5]
    assert "'min_segments' must be a whole number" in error.errors[0].message
    assert "segmnts (did you mean" in error.errors[2].message


@pytest.mark.parametrize("rules, message", [
    ("C2: {deny: [FLUSHAL]}", "rule C2: 'deny': unknown command 'FLUSHAL' (did you mean FLUSHALL?)"),
    ("C2: {allow: [CONFIG|GETT]}", "rule C2: 'allow': unknown command 'CONFIG|GETT' (did you mean CONFIG|GET"),
    ("C2: {deny: ['@dangerus']}", "rule C2: unknown ACL category '@dangerus' (did you mean @dangerous?)"),
    ("C5: {deny: [BLPOPP]}", "rule C5: 'deny': unknown command 'BLPOPP' (did you mean BLPOP"),
    ("C1: {commands: [KEY]}", "rule C1: 'commands': unknown command 'KEY' (did you mean KEYS"),
    ("C3: {commands: {HGETAL: warn}}", "rule C3: 'commands': unknown command 'HGETAL' (did you mean HGETALL"),
])
def test_unknown_command_names_are_errors_with_the_nearest_name(rules, message):
    error = load_error(f"rules:\n  {rules}\n")
    assert error.line == 2 and error.message.startswith(message), error.message


def test_a_real_subcommand_and_a_category_pass():
    assert unknown_command("CONFIG|SET") == "" and unknown_command("flushall") == ""
    assert unknown_command("FLUSHAL").startswith("unknown command 'FLUSHAL'")


@pytest.mark.parametrize("rules, message", [
    ("C4: on", "`C4: on` (or yes/true) is true to YAML"),
    ("K9: maybe", "`K9: maybe` is short for {mode: maybe}, and the mode must be enforce, audit or off"),
    ("K2: audi", "(did you mean audit?)"),
    ("C2: [FLUSHALL]", "settings must be a mapping, got a list: write `C2: {setting: [...]}`"),
    ("K4: 12", "settings must be a mapping or one of enforce, audit, off, got 12"),
    ("K02: {}", "unknown rule 'K02' (did you mean K2?)"),
])
def test_shorthand_mistakes_are_worded_for_what_was_written(rules, message):
    error = load_error(f"rules:\n  {rules}\n")
    assert error.line == 2 and message in error.message, error.message


def test_unknown_settings_name_the_nearest():
    error = load_error("nmae: x\nrules:\n  K2: {style: lowercase, delimeter: ':'}\n")
    assert [each.message for each in error.errors] == [
        ("unknown top-level setting 'nmae' (did you mean name?) (expected one of: applications, auth, "
         "description, mode, name, rules, schema, seed)"),
        "rule K2: unknown setting(s): delimeter (did you mean delimiter?)",
    ]


@pytest.mark.parametrize("text, line, words", [
    ("rules:\n  K2: {style: lowercase}\n   K3: {}\n", 3, "indented differently"),
    ("rules:\n  K2:\n    style: lowercase\n   first: x\n", 4, "indented differently"),
    ("rules:\n\tK2: {}\n", 2, "a tab: YAML is indented with spaces only"),
    ("rules:\n  C2: {deny: [FLUSHALL}\n", 2, "a list in brackets is not closed"),
    ("rules:\n  C2: {deny: [@admin]}\n", 2, "quote it ('@admin')"),
])
def test_yaml_errors_say_what_to_do_and_show_the_line(text, line, words):
    error = load_error(text, "bad.yaml")
    assert error.line == line and words in error.message, error.message
    shown, caret = error.message.splitlines()[1:3]
    assert shown.strip() == text.splitlines()[line - 1].replace("\t", " ").strip()
    assert caret.strip().startswith("^ (column ")


def test_application_and_schema_mistakes_are_all_reported():
    text = ("applications:\n"
            "  a: {password_hash: nope, prefixes: ['a:']}\n"      # 2
            "  b: {user: b, passwrd_hash: x}\n"                   # 3
            "rules:\n  K10: {}\n"
            "schema:\n"
            "  - {key: 'x:{id}', type: hashmap}\n"                # 7
            "  - {key: 'y:{id}', type: set, colour: red}\n")      # 8
    lines = [each.line for each in load_error(text).errors]
    assert lines == [2, 3, 3, 7, 8], lines


def test_did_you_mean():
    assert did_you_mean("delimeter", ["delimiter", "mode"]) == " (did you mean delimiter?)"
    assert did_you_mean("snake_case", ["lowercase", "camelCase"]) == ""  # another style, not a typo
    assert did_you_mean("lowercse", ["lowercase", "camelCase"]) == " (did you mean lowercase?)"
    assert did_you_mean("SETX", ["SET", "SETEX", "SETNX", "GET"], 3).startswith(" (did you mean ")
    assert did_you_mean("zzz", ["mode"]) == ""


def test_policy_check_prints_every_mistake_and_fails(tmp_path, capsys):
    path = tmp_path / "p.yaml"
    path.write_text("rules:\n  C2: {deny: [FLUSHAL]}\n  K2: {style: lowercse}\n")
    assert cli.main(["policy", "check", str(path)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith(f"{path}:2: rule C2: 'deny': unknown command 'FLUSHAL'")
    assert err[1].startswith(f"{path}:3: rule K2: 'style' must be one of")
    assert err[2] == "2 mistakes"

"""`redis-guard policy test FILE|DIR`: fixture files of commands and the verdicts a policy must give
them, run like a test suite (as `opa test` and `kyverno test` run theirs).

A fixture file is YAML::

    policy: ../strict-dotted.yaml           # relative to the fixture file
    app: checkout                           # optional: decide as this application (rule K7)
    cases:
      - command: SET user:basic.info:1:string v EX 60   # a string is split like redis-cli
        expect: allow
      - command: [SET, "key with space", v]            # a list is taken as it is
        expect: {reject: K3}
      - command: DEL user:basic.info:1:string
        expect: {rewrite: "UNLINK user:basic.info:1:string"}

`expect` is `allow` (let through: forwarded, possibly rewritten), `unchanged` (forwarded exactly
as sent; audit findings allowed), `reject` or `{reject: K3}` / `{reject: [K3, K5]}` (rejected, with
one of these rules among those that fired: the reply names the first in the engine's order),
`rewrite` or `{rewrite: COMMAND}` (the command whose reply the client gets) / `{rewrite: [COMMAND,
...]}` (every command sent, hidden ones included), with `by: T1` for the rules that rewrote it
(`{by: T1}` alone: any rewrite by them), or `{audit: C3}` (let through, and the rule fired in audit
mode). `EVALSHA <file name>` calls an approved script of rule C6's library by its file
name (`EVALSHA redis-py-lock-release 1 k token`). A case may add `then:` (the commands after it
in the same pipeline: T1 accepts an EXPIRE there), `app:` (`null`: no application) and `name:`.

A directory is searched for .yaml/.yml files, policy files left out. Every case of every file runs;
the output names each failing case by file and line with what was expected and what was decided,
and ends with `N passed, N failed`. `run` returns the exit status: 0 when every case passes, 1 when
one fails, 2 when a file is broken (not a fixture, a policy that does not load, an unknown command
or expectation, an unknown application): a broken file must not pass CI by testing nothing.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import yaml

from .base import ENFORCE, PolicyError
from .engine import Engine
from .loader import load_policy
from .offline import ALLOW, REJECT, REWRITE, command_args, decide, shown, unknown
from .problems import did_you_mean, snapshot_table

FILE_KEYS = ("policy", "app", "description", "cases")
CASE_KEYS = ("command", "expect", "then", "app", "name")
EXPECT_KEYS = ("reject", "rewrite", "by", "audit")
UNCHANGED = "unchanged"
VERDICTS = (ALLOW, UNCHANGED, REJECT, REWRITE)


class FixtureError(Exception):
    """A broken fixture file: the message names the file and line."""


@dataclass(frozen=True)
class Expectation:
    verdict: str  # ALLOW, UNCHANGED, REJECT, REWRITE, or "audit"
    rules: tuple[str, ...] = ()  # reject: one of these; rewrite: all of these among the rewriters; audit
    commands: tuple[tuple[bytes, ...], ...] | None = None  # rewrite: the commands sent
    first_only: bool = True  # rewrite: `commands` is the first command sent

    def __str__(self) -> str:
        if self.verdict == ALLOW:
            return "allowed (forwarded, possibly rewritten)"
        if self.verdict == UNCHANGED:
            return "allowed, forwarded unchanged"
        if self.verdict == REJECT:
            return f"rejected by {' or '.join(self.rules)}" if self.rules else "rejected"
        if self.verdict == "audit":
            return f"forwarded, with an audit finding of {', '.join(self.rules)}"
        what = "rewritten"
        if self.rules:
            what += f" by {', '.join(self.rules)}"
        if self.commands is not None:
            sent = "; ".join(shown(command) for command in self.commands)
            what += f", sent as: {sent}" + (" (first command)" if self.first_only else "")
        return what

    def met_by(self, outcome) -> bool:
        if self.verdict == "audit":
            return outcome.verdict != REJECT and set(self.rules) <= set(outcome.audited())
        if self.verdict == ALLOW:
            return outcome.verdict != REJECT
        if outcome.verdict != (ALLOW if self.verdict == UNCHANGED else self.verdict):
            return False
        if self.verdict == REJECT:  # one of the rules among those that fired (the reply names the first)
            return not self.rules or any(f.rule in self.rules for f in outcome.findings if f.mode == ENFORCE)
        if self.verdict == REWRITE:
            if self.rules and not set(self.rules) <= set(outcome.rewritten_by):
                return False
            if self.commands is not None:
                sent = outcome.commands[:1] if self.first_only else outcome.commands
                return [list(c) for c in sent] == [list(c) for c in self.commands]
        return True


@dataclass(frozen=True)
class Case:
    line: int
    args: list[bytes]
    expect: Expectation
    later: tuple[list[bytes], ...] = ()
    app: str | None = None
    name: str = ""


@dataclass(frozen=True)
class Fixture:
    path: str
    policy: str  # the policy file's path
    cases: tuple[Case, ...]


def _line(node) -> int:
    return node.start_mark.line + 1


def _plain(node):
    return yaml.safe_load(yaml.serialize(node))


def _rules(value, where) -> tuple[str, ...]:
    items = value if isinstance(value, list) else [value]
    if not items or not all(isinstance(item, str) and item for item in items):
        raise where(f"rule ids must be a string or a list of strings, got {value!r}")
    return tuple(item.upper() for item in items)


def _commands(value, where) -> tuple[tuple[bytes, ...], ...]:
    """A command string (split like redis-cli), or a list of them (each may be a list of words)."""
    commands = []
    for item in value if isinstance(value, list) else [value]:
        args = command_args(item) if isinstance(item, (str, list)) else None
        if not args:
            raise where(f"cannot read the command {item!r}")
        commands.append(tuple(args))
    return tuple(commands)


def parse_expectation(value, where) -> Expectation:
    """An `expect:` value; `where(message)` makes the error for its line."""
    if isinstance(value, str):
        if value not in VERDICTS:
            raise where(f"expect must be allow, unchanged, reject or rewrite (or a mapping), got {value!r}"
                        f"{did_you_mean(value, VERDICTS)}")
        return Expectation(value)
    if not isinstance(value, dict) or not value:
        raise where(f"expect must be allow, reject, rewrite, {{reject: RULE}}, {{rewrite: COMMAND}} or "
                    f"{{audit: RULE}}, got {value!r}")
    unknown_keys = [key for key in value if key not in EXPECT_KEYS]
    if unknown_keys:
        raise where(f"expect: unknown key '{unknown_keys[0]}'{did_you_mean(unknown_keys[0], EXPECT_KEYS)} "
                    f"(known: {', '.join(EXPECT_KEYS)})")
    kinds = [key for key in ("reject", "rewrite", "audit") if key in value]
    if len(kinds) > 1:
        raise where(f"expect: give one of reject, rewrite, audit, not {' and '.join(kinds)}")
    if "by" in value and kinds not in ([], ["rewrite"]):
        raise where("expect: 'by' names the rules that rewrite: it goes with rewrite only")
    if "reject" in value:
        return Expectation(REJECT, _rules(value["reject"], where) if value["reject"] is not None else ())
    if "audit" in value:
        return Expectation("audit", _rules(value["audit"], where))
    by = _rules(value["by"], where) if "by" in value else ()
    sent = value.get("rewrite")
    if sent is None:
        return Expectation(REWRITE, by)
    return Expectation(REWRITE, by, _commands(sent, where), first_only=not isinstance(sent, list))


def load_fixture(path: str, table) -> Fixture:
    """The fixture file at `path`; FixtureError for anything that makes it untestable."""
    def fail(message: str, line: int | None = None) -> FixtureError:
        return FixtureError(f"{path}:{line}: {message}" if line else f"{path}: {message}")

    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except OSError as exc:
        raise fail(exc.strerror or str(exc)) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise fail(f"invalid YAML: {getattr(exc, 'problem', exc)}", mark.line + 1 if mark else None) from None
    if not isinstance(root, yaml.MappingNode):
        raise fail("a fixture file is a mapping with 'policy:' and 'cases:'")
    top = {str(key.value): (value, _line(key)) for key, value in root.value}
    for key, (_, line) in top.items():
        if key not in FILE_KEYS:
            raise fail(f"unknown setting '{key}'{did_you_mean(key, FILE_KEYS)} (known: {', '.join(FILE_KEYS)})", line)
    if "policy" not in top or not isinstance(_plain(top["policy"][0]), str):
        raise fail("'policy:' must name the policy file under test (relative to this file)")
    policy = os.path.join(os.path.dirname(os.path.abspath(path)), _plain(top["policy"][0]))
    app = _plain(top["app"][0]) if "app" in top else None
    node = top.get("cases", (None, None))[0]
    if not isinstance(node, yaml.SequenceNode) or not node.value:
        raise fail("'cases:' must be a list of {command: ..., expect: ...}", top.get("cases", (None, None))[1])
    cases = []
    for item in node.value:
        line = _line(item)

        def where(message: str, line=line) -> FixtureError:
            return fail(message, line)

        if not isinstance(item, yaml.MappingNode):
            raise where("a case is a mapping: {command: ..., expect: ...}")
        case = _plain(item)
        extra = [key for key in case if key not in CASE_KEYS]
        if extra:
            raise where(f"unknown key '{extra[0]}'{did_you_mean(extra[0], CASE_KEYS)} (known: {', '.join(CASE_KEYS)})")
        if "command" not in case or "expect" not in case:
            raise where("a case needs 'command' and 'expect'")
        args = command_args(case["command"]) if isinstance(case["command"], (str, list)) else None
        if not args:
            raise where(f"cannot read the command {case['command']!r} (unbalanced quotes?)")
        refused = unknown(table, args)
        if refused:
            raise where(f"{refused}: Redis refuses it whatever the policy, so it tests nothing")
        later = case.get("then") or []
        later = tuple(command_args(command) for command in (later if isinstance(later, list) else [later]))
        if not all(later):
            raise where("'then' must be a list of commands")
        cases.append(Case(line, args, parse_expectation(case["expect"], where), later,
                          case.get("app", app), str(case.get("name") or "")))
    return Fixture(path, policy, tuple(cases))


def fixture_files(target: str) -> list[str]:
    """The fixture files a FILE|DIR argument names: a file, or every .yaml/.yml under a directory
    except policy files (a mapping with `rules:`, `schema:` or `applications:` and no `cases:`),
    so fixtures may live next to the policies they test."""
    if not os.path.isdir(target):
        return [target]
    found = []
    for folder, _, names in os.walk(target):
        for name in names:
            path = os.path.join(folder, name)
            if name.endswith((".yaml", ".yml")) and not _is_policy(path):
                found.append(path)
    return sorted(found)


def _is_policy(path: str) -> bool:
    try:
        with open(path, encoding="utf-8") as handle:
            data = yaml.safe_load(handle)
    except (OSError, yaml.YAMLError, UnicodeDecodeError):
        return False  # reported as broken when read as a fixture
    return isinstance(data, dict) and "cases" not in data and bool({"rules", "schema", "applications"} & set(data))


class Runner:
    """Runs fixture files and writes a test runner's report to `out`."""

    def __init__(self, out, table=None):
        self.out = out
        self.table = table if table is not None else snapshot_table()
        self.engines: dict[str, object] = {}
        self.passed = self.failed = self.broken = 0

    def engine(self, path: str, app: str | None):
        engine = self.engines.get(path)
        if engine is None:
            engine = self.engines[path] = Engine(load_policy(path, self.table), self.table)
        if app is None:
            return engine
        found = engine.tenants.engine(app) if engine.tenants is not None else None
        if found is None:
            names = [each.name for each in engine.policy.applications]
            raise FixtureError(f"{path}: no application '{app}' (applications: {', '.join(names) or 'none'})")
        return found

    def run_file(self, path: str) -> None:
        write = self.out.write
        try:
            fixture = load_fixture(path, self.table)
            engines = {app: self.engine(fixture.policy, app) for app in {case.app for case in fixture.cases}}
        except (FixtureError, PolicyError) as exc:
            self.broken += 1
            write(f"BROKEN {path}\n  " + str(exc).replace("\n", "\n  ") + "\n")
            return
        failures = []
        for case in fixture.cases:
            engine = engines[case.app]
            outcome = decide(engine, scripts_by_name(engine, case.args), case.later)
            if case.expect.met_by(outcome):
                self.passed += 1
                continue
            self.failed += 1
            failures.append((case, outcome))
        policy = next(iter(engines.values())).policy.name
        status = "ok" if not failures else f"{len(failures)} FAILED"
        write(f"{path}: policy '{policy}', {len(fixture.cases)} cases, {status}\n")
        for case, outcome in failures:
            title = f" ({case.name})" if case.name else ""
            app = f" as application '{case.app}'" if case.app else ""
            write(f"  FAIL {path}:{case.line}{title}: {shown(case.args)}{app}\n")
            for command in case.later:
                write(f"       then: {shown(command)}\n")
            write(f"    expected: {case.expect}\n    decided:  {outcome.describe()}\n")

    def status(self) -> int:
        return 2 if self.broken else 1 if self.failed else 0

    def summary(self) -> str:
        line = f"{self.passed} passed, {self.failed} failed"
        return line + (f", {self.broken} broken file{'s' if self.broken != 1 else ''}" if self.broken else "")


def scripts_by_name(engine, args: list[bytes]) -> list[bytes]:
    """`EVALSHA <file name> ...` (`redis-py-lock-release`, `mine.lua`): the SHA of that approved
    script of rule C6's library, so a fixture calls scripts by name; anything else as it is."""
    if len(args) < 2 or args[0].lower() not in (b"evalsha", b"evalsha_ro"):
        return args
    rule = engine.policy.rule("C6")
    library = getattr(rule, "library", None)
    sha = library.sha_of(args[1].decode("utf-8", "replace")) if library is not None else None
    return args if sha is None else [args[0], sha, *args[2:]]


def run(targets: list[str], out) -> int:
    """`policy test`: every fixture file of `targets`; the exit status."""
    runner = Runner(out)
    files = [path for target in targets for path in fixture_files(target)]
    if not files:
        out.write(f"no fixture files (.yaml, .yml) in {', '.join(targets)}\n")
        return 2
    for path in files:
        runner.run_file(path)
    out.write(runner.summary() + "\n")
    return runner.status()

"""Every mistake of a policy file at once, each with its line, in words for the person who wrote it.

`Problems` collects the `PolicyError`s of one load: the loader goes on with the next rule,
application or schema pattern after a mistake and raises them together at the end
(`PolicyError.several`). `did_you_mean` and `unknown_command` name the nearest real rule id,
setting or command (a typo in a deny list must not leave the command allowed); `shorthand` words
the mistakes of `K2: off`-style values; `yaml_error` turns PyYAML's parser messages into advice
about indentation and quoting, with the line and column (`did_you_mean` and the YAML advice live in
`proxy/yamlcheck.py`, shared with the configuration loader). No I/O here.
"""

from __future__ import annotations

from contextlib import contextmanager
from functools import lru_cache

from ..commands.table import CommandTable
from ..yamlcheck import YAML_ADVICE, did_you_mean, yaml_problem  # noqa: F401  (shared with config.py)
from .base import MODES, PolicyError


class Problems:
    """The mistakes of one policy file, in the order found."""

    def __init__(self, source: str | None):
        self.source = source
        self.errors: list[PolicyError] = []

    def add(self, error: PolicyError, line: int | None = None) -> None:
        """Keep `error` (each of its `errors`), placed in this file; `line` when it has none. A
        mistake found twice (a rule an application's overrides build again) is kept once."""
        for each in error.errors:
            self.report(each.message, each.line or line)

    def report(self, message: str, line: int | None) -> None:
        if not any(known.message == message and known.line == line for known in self.errors):
            self.errors.append(PolicyError(message, line, self.source))

    @contextmanager
    def collecting(self, line: int | None = None):
        """Run a step of the load; a PolicyError it raises is kept, and the load goes on."""
        try:
            yield
        except PolicyError as exc:
            self.add(exc, line)

    def raise_any(self) -> None:
        """Raise every mistake kept, by line (mistakes without a line first, as found)."""
        if self.errors:
            raise PolicyError.several(sorted(self.errors, key=lambda error: error.line or 0))


@lru_cache(maxsize=1)
def snapshot_table():
    return CommandTable.from_snapshot()


@lru_cache(maxsize=4)
def _spelled(table) -> tuple[str, ...]:
    """Every command and subcommand as a policy spells it: FLUSHALL, CONFIG|SET."""
    return tuple(spec.name.upper() for spec in table.walk())


def unknown_command(name: str, table=None) -> str:
    """'' for a command (or `container|sub`) the table knows, else the mistake in words."""
    table = table if table is not None else snapshot_table()
    if table.get(name) is not None:
        return ""
    return f"unknown command '{name}'{did_you_mean(name, _spelled(table), 3)}"


def shorthand(rule_id: str, value) -> str | None:
    """The mistake in `RULE: value` written instead of a mapping, or None when it is a mode."""
    if value in MODES or value is False or value is None:
        return None
    if value is True:
        return (f"rule {rule_id}: `{rule_id}: on` (or yes/true) is true to YAML, not a mode: write "
                f"`{rule_id}: {{}}` or `{rule_id}: enforce` to turn it on, `{rule_id}: off` to turn it off")
    if isinstance(value, str):
        return (f"rule {rule_id}: `{rule_id}: {value}` is short for {{mode: {value}}}, and the mode must be "
                f"enforce, audit or off{did_you_mean(value, MODES)}; settings go in a mapping: "
                f"`{rule_id}: {{setting: value}}`")
    if isinstance(value, list):
        return (f"rule {rule_id}: settings must be a mapping, got a list: write `{rule_id}: {{setting: [...]}}` "
                f"(see docs/rules.md for {rule_id}'s settings)")
    return f"rule {rule_id}: settings must be a mapping or one of enforce, audit, off, got {value!r}"


def yaml_error(exc, text: str, source: str | None) -> PolicyError:
    """A PyYAML error as a PolicyError: the problem, advice, and the line with a caret."""
    message, line = yaml_problem(exc, text)
    return PolicyError(message, line, source)

"""Every mistake of a policy file at once, each with its line, in words for the person who wrote it.

`Problems` collects the `PolicyError`s of one load: the loader goes on with the next rule,
application or schema pattern after a mistake and raises them together at the end
(`PolicyError.several`). `did_you_mean` and `unknown_command` name the nearest real rule id,
setting or command (a typo in a deny list must not leave the command allowed); `shorthand` words
the mistakes of `K2: off`-style values; `yaml_error` turns PyYAML's parser messages into advice
about indentation and quoting, with the line and column. No I/O here.
"""

from __future__ import annotations

import difflib
from contextlib import contextmanager
from functools import lru_cache

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


def did_you_mean(word: str, candidates, n: int = 1) -> str:
    """' (did you mean X?)' for the closest candidate, and up to n - 1 more about as close; else ''.
    Case is ignored."""
    by_lower = {str(c).lower(): str(c) for c in candidates}
    close = difflib.get_close_matches(str(word).lower(), list(by_lower), n=n, cutoff=0.7)
    if not close:
        return ""
    score = difflib.SequenceMatcher(None, str(word).lower(), close[0]).ratio()
    close = [by_lower[close[0]]] + [by_lower[c] for c in close[1:]
                                     if difflib.SequenceMatcher(None, str(word).lower(), c).ratio() >= score - 0.1]
    return f" (did you mean {' or '.join(filter(None, [', '.join(close[:-1]), close[-1]]))}?)"


@lru_cache(maxsize=1)
def snapshot_table():
    from ..commands.table import CommandTable

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


# PyYAML's problems, as the person who wrote the file can act on them.
YAML_ADVICE = {
    "mapping values are not allowed here": "a ':' where YAML expected none: this line is probably indented "
                                           "more or less than the lines around it, or a value holding ': ' "
                                           "needs quotes",
    "could not find expected ':'": "a line without 'key: value' inside a mapping: check the indentation "
                                   "and that every setting has a ':' after its name",
    "did not find expected key": "this line's indentation does not match the mapping it belongs to: "
                                 "settings of one rule line up under each other",
    "did not find expected '-' indicator": "this line's indentation does not match the list it belongs to",
    "found character '\\t' that cannot start any token": "a tab: YAML is indented with spaces only",
    "found undefined alias": "'*' starts an alias in YAML: quote the value ('*')",
    "found character '@' that cannot start any token": "'@' cannot start a plain YAML value: quote it ('@admin')",
    "found character '`' that cannot start any token": "'`' cannot start a plain YAML value: quote it",
    "found unexpected end of stream": "a quote or bracket opened and never closed",
    "expected ',' or ']', but got": "a list in brackets is not closed, or an item needs quotes",
    "expected ',' or '}', but got": "a mapping in braces is not closed, or a value needs quotes",
}


def yaml_error(exc, text: str, source: str | None) -> PolicyError:
    """A PyYAML error as a PolicyError: the problem, advice, and the line with a caret."""
    problem = str(getattr(exc, "problem", None) or exc).strip()
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    advice = next((words for start, words in YAML_ADVICE.items() if problem.startswith(start)), "")
    if "expected <block end>" in problem:
        advice = "this line is indented differently from the lines of the block it belongs to"
    message = f"invalid YAML: {advice} (the parser says: {problem})" if advice else f"invalid YAML: {problem}"
    if mark is None:
        return PolicyError(message, None, source)
    lines = text.splitlines()
    if 0 <= mark.line < len(lines):
        shown = lines[mark.line].replace("\t", " ")
        message += f"\n    {shown}\n    {' ' * mark.column}^ (column {mark.column + 1})"
    return PolicyError(message, mark.line + 1, source)

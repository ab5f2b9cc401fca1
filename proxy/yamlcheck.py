"""YAML read with the line of every value, and mistakes worded for the person who wrote the file.

Shared by the configuration (`config.py`) and policy (`policy/loader.py`, `policy/problems.py`)
loaders, so that both report a mistake the same way: `compose` keeps PyYAML's nodes, whose marks
give each key's line; `plain` turns a node into Python values; `did_you_mean` names the closest
known word (difflib); `yaml_problem` turns PyYAML's parser messages into advice about indentation
and quoting, with the line and a caret under the column. No I/O, no import of the rest of the
proxy: both loaders import this module, and neither imports the other.
"""

from __future__ import annotations

import difflib

import yaml


def compose(text: str):
    """The YAML document's node tree (None for an empty document); raises yaml.YAMLError."""
    return yaml.compose(text, Loader=yaml.SafeLoader)


def plain(node):
    """A composed YAML node as plain Python values."""
    return yaml.safe_load(yaml.serialize(node)) if node is not None else None


def line(node) -> int:
    """The 1-based line a node starts on."""
    return node.start_mark.line + 1


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


def yaml_problem(exc, text: str) -> tuple[str, int | None]:
    """(message, 1-based line or None) for a PyYAML error: the problem, advice, and the line with
    a caret."""
    problem = str(getattr(exc, "problem", None) or exc).strip()
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    advice = next((words for start, words in YAML_ADVICE.items() if problem.startswith(start)), "")
    if "expected <block end>" in problem:
        advice = "this line is indented differently from the lines of the block it belongs to"
    message = f"invalid YAML: {advice} (the parser says: {problem})" if advice else f"invalid YAML: {problem}"
    if mark is None:
        return message, None
    lines = text.splitlines()
    if 0 <= mark.line < len(lines):
        shown = lines[mark.line].replace("\t", " ")
        message += f"\n    {shown}\n    {' ' * mark.column}^ (column {mark.column + 1})"
    return message, mark.line + 1

"""Commands as the policy's settings name them: `CommandMatcher`, one setting's mix of command
names and ACL categories (`deny:` of C2 and C5, `allow:` of C2) and how specifically it names a
command; `command_words`, a command's name as users type it, for every rule's messages.
"""

from __future__ import annotations

import re
from functools import lru_cache

from ...commands.table import CommandTable
from ..base import COMMAND_LIST
from ..problems import did_you_mean, unknown_command


@lru_cache(maxsize=1)
def known_categories() -> frozenset[str]:
    """Every ACL category Redis's command table names, plus `all` (which ACL rules accept)."""
    table = CommandTable.from_snapshot()
    return frozenset(c for spec in table.walk() for c in spec.acl_categories) | {"all"}


def category_set(settings, key: str, default=()) -> tuple[frozenset[str], frozenset[str]]:
    """(command names, ACL categories) from a list mixing `KEYS` and `@dangerous` (`default`
    when the setting is absent). A name the command table does not know is a mistake."""
    names, categories = set(), set()
    for item in settings.strings(key, default, schema=COMMAND_LIST):
        if item.startswith("@"):
            categories.add(item[1:].lower())
        elif re.fullmatch(r"[A-Za-z][\w|-]*", item):
            wrong = unknown_command(item, settings.table)
            if wrong:
                settings.problem(key, f"'{key}': {wrong}")
            names.add(item.lower())
        else:
            settings.problem(key, f"'{item}' is neither a command name nor an @category")
    return frozenset(names), frozenset(categories)


class CommandMatcher:
    """Command names and ACL categories read from one setting; `level(spec)` says how
    specifically the setting names a command: 3 by its own name, 2 by its container's name
    (`CONFIG` for `config|set`), 1 by a category, 0 not at all."""

    __slots__ = ("names", "categories", "every")

    def __init__(self, settings, key: str, default=(), add=()):
        names, categories = category_set(settings, key, default)
        if add:
            more_names, more_categories = _spelled(add)
            names, categories = names | more_names, categories | more_categories
        unknown = sorted(categories - known_categories())
        if unknown:
            spelled = sorted("@" + category for category in known_categories())
            settings.problem(key, f"unknown ACL category '@{unknown[0]}'{did_you_mean('@' + unknown[0], spelled)} "
                                  f"(Redis's categories: {', '.join(spelled)})")
        self.names = names
        self.every = "all" in categories
        self.categories = categories - {"all"}

    def level(self, spec) -> int:
        name = spec.name
        names = self.names
        if name in names:
            return 3
        head, sep, _ = name.partition("|")
        if sep and head in names:
            return 2
        if self.every or not self.categories.isdisjoint(spec.acl_categories):
            return 1
        return 0

    def why(self, spec) -> str:
        """The entry that matched, as the policy file spells it."""
        name = spec.name
        if name in self.names:
            return command_words(name)
        head, sep, _ = name.partition("|")
        if sep and head in self.names:
            return head.upper()
        if self.every:
            return "@all"
        return ", ".join(f"@{c}" for c in sorted(self.categories & spec.acl_categories))

    def spelled(self) -> list[str]:
        return sorted([command_words(n) for n in self.names] + [f"@{c}" for c in self.categories]
                      + (["@all"] if self.every else []))


def _spelled(entries) -> tuple[frozenset[str], frozenset[str]]:
    """(command names, categories) of a built-in list such as BASELINE_DENY."""
    return (frozenset(name.lower() for name in entries if not name.startswith("@")),
            frozenset(name[1:].lower() for name in entries if name.startswith("@")))


def command_words(name: str) -> str:
    """'config|set' as users type it: 'CONFIG SET'."""
    return name.replace("|", " ").upper()

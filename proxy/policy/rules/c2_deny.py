"""C2: FLUSHALL / FLUSHDB, and the other commands an application must not run, denied.

`deny` and `allow` mix command names and Redis ACL categories: `FLUSHALL`, `CONFIG|SET` (one
subcommand), `CONFIG` (the container and every subcommand), `@dangerous`. The categories are Redis's
own (`COMMAND INFO`), so `@dangerous` means here what it means to Redis's ACL. When a command is
both denied and allowed, the more specific entry wins (a subcommand's own name, then its
container's name, then a category); on a tie `allow` wins, as it names the exceptions.
"""

from __future__ import annotations

from functools import lru_cache

from ..base import CommandRule, category_set, register
from ..problems import did_you_mean

DEFAULT_DENY = ("FLUSHALL", "FLUSHDB")

# What to do instead, where there is something better to say than "ask the operators".
ALTERNATIVES = {
    "flushall": "delete keys by pattern with SCAN + UNLINK",
    "flushdb": "delete keys by pattern with SCAN + UNLINK",
    "keys": "use SCAN 0 MATCH <pattern> COUNT 100, repeated until the cursor is 0",
    "monitor": "read the proxy's decision log or Redis's SLOWLOG instead",
    "debug": "run diagnostics from an operator's session, not from the application",
    "swapdb": "use separate key prefixes instead of swapping databases",
}


@lru_cache(maxsize=1)
def known_categories() -> frozenset[str]:
    """Every ACL category Redis's command table names, plus `all` (which ACL rules accept)."""
    from ...commands.table import CommandTable

    table = CommandTable.from_snapshot()
    return frozenset(c for spec in table.walk() for c in spec.acl_categories) | {"all"}


class CommandMatcher:
    """Command names and ACL categories read from one setting; `level(spec)` says how
    specifically the setting names a command: 3 by its own name, 2 by its container's name
    (`CONFIG` for `config|set`), 1 by a category, 0 not at all."""

    __slots__ = ("names", "categories", "every")

    def __init__(self, settings, key: str, default=()):
        names, categories = category_set(settings, key, default)
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


def command_words(name: str) -> str:
    """'config|set' as users type it: 'CONFIG SET'."""
    return name.replace("|", " ").upper()


@register
class DeniedCommands(CommandRule):
    id = "C2"
    title = "denied command"

    def __init__(self, settings):
        super().__init__(settings)
        self.deny = CommandMatcher(settings, "deny", DEFAULT_DENY)
        self.allow = CommandMatcher(settings, "allow")
        self.advice: dict[str, str] = {}  # per denied command, built at load

    def applies_to(self, spec) -> bool:
        level = self.deny.level(spec)
        if not level or self.allow.level(spec) >= level:
            return False
        if spec.name not in self.advice:
            alternative = ALTERNATIVES.get(spec.name)
            why = f"this policy denies {self.deny.why(spec)}"
            self.advice[spec.name] = (f"{alternative}; {why}" if alternative
                                      else f"{why}; ask the operators if the application needs it")
        return True

    def check(self, call):
        advice = self.advice.get(call.name)
        if advice is None:  # a spec the engine did not show at load (a container's subcommand)
            self.applies_to(call.spec)
            advice = self.advice[call.name]
        return self.finding(f"command {command_words(call.name)}", advice)

    def describe(self) -> str:
        text = f"deny {', '.join(self.deny.spelled())}"
        allowed = self.allow.spelled()
        return text + (f" except {', '.join(allowed)}" if allowed else "")

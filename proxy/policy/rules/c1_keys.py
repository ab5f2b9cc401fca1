"""C1: KEYS is forbidden in production; the reply suggests SCAN."""

from ..base import COMMAND_LIST, CommandRule, register
from ..problems import unknown_command


@register
class NoKeysCommand(CommandRule):
    id = "C1"
    order = 101
    title = "no KEYS"

    def __init__(self, settings):
        super().__init__(settings)
        names = settings.strings("commands", ["KEYS"], schema=COMMAND_LIST)
        self.commands = frozenset(name.lower() for name in names)
        for name in names:
            wrong = unknown_command(name, settings.table)
            if wrong:
                settings.problem("commands", f"'commands': {wrong}")
        self.suggest = settings.get("suggest", "SCAN 0 MATCH <pattern> COUNT 100, repeated until the cursor is 0",
                                    kind=str)

    def applies_to(self, spec) -> bool:
        return spec.name in self.commands

    def denies(self, spec) -> bool:
        return spec.name in self.commands

    def check(self, call):
        return self.finding(f"command {call.name.upper()}", f"use {self.suggest}")

    def describe(self) -> str:
        return f"deny {', '.join(sorted(c.upper() for c in self.commands))}; suggest {self.suggest}"

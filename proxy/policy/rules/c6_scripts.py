"""C6: server-side scripts must not be a way around the rules.

`scripts: declared` (the default) lets EVAL/EVALSHA/FCALL (and their _RO forms) run: the keys they
declare (`numkeys` keys) are found by the command table's key specs, so every key rule checks them
like any other key; a script can still reach keys it does not declare, which operators who cannot
accept that rule out with `scripts: deny`. When `numkeys` is not a valid count no key is found and
Redis answers with its own error. `scripts: deny` rejects every command of Redis's `@scripting`
ACL category: running code (EVAL*, FCALL*), installing it (SCRIPT LOAD, FUNCTION LOAD/RESTORE) and
managing it (SCRIPT FLUSH, FUNCTION DELETE, ...).

The other half of C6 (destination keys checked like source keys, every command inside MULTI
checked as it is queued) is the engine's: key rules run on every key the key specs find, and the
session hands queued commands to the engine one by one.
"""

from __future__ import annotations

from ..base import CommandRule, register
from ._commands import command_words

ADVICE = ("this policy allows no server-side scripts: send the commands themselves "
          "(inside MULTI/EXEC if they must run together)")


@register
class ScriptsWithinTheRules(CommandRule):
    id = "C6"
    order = 104
    title = "no scripts"

    def __init__(self, settings):
        super().__init__(settings)
        self.scripts = settings.get("scripts", "declared", kind=str, choices=("declared", "deny"))
        if self.scripts == "declared":
            self.title = "scripts with declared keys"

    def applies_to(self, spec) -> bool:
        return self.scripts == "deny" and "scripting" in spec.acl_categories

    def denies(self, spec) -> bool:
        return self.applies_to(spec)

    def check(self, call):
        return self.finding(f"command {command_words(call.name)}", ADVICE)

    def describe(self) -> str:
        if self.scripts == "deny":
            return "deny scripts and functions (@scripting)"
        return "scripts and functions only with declared keys, which the key rules check"

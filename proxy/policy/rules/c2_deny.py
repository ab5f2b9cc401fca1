"""C2: the baseline guard, and the other commands an application must not run, denied.

`deny` and `allow` mix command names and Redis ACL categories: `FLUSHALL`, `CONFIG|SET` (one
subcommand), `CONFIG` (the container and every subcommand), `@dangerous`. The categories are Redis's
own (`COMMAND INFO`), so `@dangerous` means here what it means to Redis's ACL. When a command is
both denied and allowed, the more specific entry wins (a subcommand's own name, then its
container's name, then a category); on a tie `allow` wins, as it names the exceptions.

The baseline (`baseline: true`, the default) is added to whatever `deny` and `allow` say: the
commands with which one client hurts every other (`BASELINE_DENY`: KEYS, FLUSHALL, @admin,
@dangerous, and by name those Redis's categories miss or that must stay denied when a category is
allowed: SWAPDB and MOVE are not @admin, SCRIPT DEBUG and FUNCTION LOAD only @scripting), except
the short `BASELINE_ALLOW`. Redis's categories alone are not a safe deny list (SWAPDB is
@dangerous but not @admin, MOVE neither): a policy that lists its own categories keeps the
baseline, and turning it off takes `baseline: false`. A policy that does not name C2 gets it
with its defaults (the loader adds it): the baseline is never lost by omission. An operator
re-enables one command by naming it in `allow` (an application's own `rules:` do this for an
admin application).
"""

from __future__ import annotations

from ..base import CommandRule, register
from ._commands import CommandMatcher, command_words

DEFAULT_DENY = ("FLUSHALL", "FLUSHDB")  # with `baseline: false` and no `deny`

# The baseline guard: what one client may not do to the others. Named commands are denied at the
# level of their name, so allowing a category (`allow: ["@admin"]`) does not re-enable them.
BASELINE_DENY = (
    "@admin", "@dangerous",  # Redis's own: CONFIG, DEBUG, SHUTDOWN, REPLICAOF, ACL, MONITOR, ...
    "KEYS", "FLUSHALL", "FLUSHDB",  # the whole keyspace at once
    "SWAPDB", "MOVE",  # everybody's data moved between databases (MOVE is no category of these)
    "SCRIPT|DEBUG", "SCRIPT|FLUSH",  # the Lua debugger on a shared connection; every script gone
    "FUNCTION|LOAD", "FUNCTION|DELETE", "FUNCTION|FLUSH", "FUNCTION|RESTORE",  # everybody's functions
    "CLIENT|KILL", "CLIENT|PAUSE", "CLIENT|UNPAUSE", "CLIENT|UNBLOCK", "CLIENT|NO-EVICT",  # other clients
    "CONFIG|SET", "CONFIG|REWRITE", "CONFIG|RESETSTAT", "DEBUG", "SHUTDOWN", "REPLICAOF", "SLAVEOF",
    "FAILOVER", "MONITOR", "SYNC", "PSYNC", "REPLCONF", "MIGRATE", "RESTORE", "RESTORE-ASKING",
)
# @dangerous commands that hurt nobody else: health checks and client libraries ask INFO and ROLE;
# SORT is @dangerous for its BY/GET patterns, which Redis's ACL refuses to users restricted to
# some keys and K7 checks for applications.
BASELINE_ALLOW = ("INFO", "ROLE", "LASTSAVE", "SORT", "SORT_RO")

# What to do instead, where there is something better to say than "ask the operators".
ALTERNATIVES = {
    "flushall": "delete keys by pattern with SCAN + UNLINK",
    "flushdb": "delete keys by pattern with SCAN + UNLINK",
    "keys": "use SCAN 0 MATCH <pattern> COUNT 100, repeated until the cursor is 0",
    "monitor": "read the proxy's decision log instead",
    "debug": "run diagnostics from an operator's session, not from the application",
    "swapdb": "use separate key prefixes instead of swapping databases",
    "move": "use separate key prefixes instead of moving keys between databases",
    "restore": "write the value with the commands of its type, which the policy checks",
}


def _in_baseline(entry: str) -> bool:
    """Is the deny entry `why` names (`CONFIG SET`, `@admin, @dangerous`) one of the baseline's?"""
    baseline = {name.replace("|", " ").upper() for name in BASELINE_DENY}
    return all(part.strip().upper() in baseline for part in entry.split(","))


@register
class DeniedCommands(CommandRule):
    id = "C2"
    order = 102
    title = "denied command"

    def __init__(self, settings):
        super().__init__(settings)
        self.baseline = settings.get("baseline", True, kind=bool, schema={
            "description": "the baseline guard, in every policy whether it names C2 or not; false turns it off"})
        self.deny = CommandMatcher(settings, "deny", () if self.baseline else DEFAULT_DENY,
                                   BASELINE_DENY if self.baseline else ())
        self.allow = CommandMatcher(settings, "allow", (), BASELINE_ALLOW if self.baseline else ())
        self.advice: dict[str, str] = {}  # per denied command, built at load

    def applies_to(self, spec) -> bool:
        if not self.denies(spec):
            return False
        if spec.name not in self.advice:
            alternative = ALTERNATIVES.get(spec.name)
            entry = self.deny.why(spec)
            whose = "the baseline guard" if self.baseline and _in_baseline(entry) else "this policy"
            why = f"{whose} denies {entry}"
            self.advice[spec.name] = (f"{alternative}; {why}" if alternative
                                      else f"{why}; ask the operators if the application needs it")
        return True

    def check(self, call):
        advice = self.advice.get(call.name)
        if advice is None:  # a spec the engine did not show at load (a container's subcommand)
            self.applies_to(call.spec)
            advice = self.advice[call.name]
        return self.finding(f"command {command_words(call.name)}", advice)

    def denies(self, spec) -> bool:
        """Does this rule deny the command (or subcommand)? For the ACL compiler too."""
        level = self.deny.level(spec)
        return bool(level) and self.allow.level(spec) < level

    def describe(self) -> str:
        text = "the baseline guard: " if self.baseline else ""
        text += f"deny {', '.join(self.deny.spelled())}"
        allowed = self.allow.spelled()
        return text + (f" except {', '.join(allowed)}" if allowed else "")

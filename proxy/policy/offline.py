"""Deciding one command without Redis, as the proxy would: what `policy explain` and `policy test`
share.

`command_args` turns what a person writes into the arguments a client sends: a string is split as
redis-cli splits a line (quotes and escapes, `resp.exact.sdssplitargs`), a list is taken as it is.
`unknown` says why Redis would refuse a command before any policy sees it (a name the command table
does not know, with the nearest real ones, or a wrong number of arguments), else ''. `decide`
runs the engine on one command (and the commands after it in the same pipeline) and returns an
`Outcome`: allowed, rejected by a rule, or rewritten into other commands, with every finding.
No I/O here.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import violation_text
from ..resp.exact import sdssplitargs
from .base import AUDIT, Finding
from .decision import SessionState
from .problems import did_you_mean

ALLOW, REJECT, REWRITE = "allow", "reject", "rewrite"


def command_args(command) -> list[bytes] | None:
    """A command string split like redis-cli (None: unbalanced quotes), or a list taken as is."""
    if isinstance(command, (list, tuple)):
        return [word if isinstance(word, bytes) else str(word).encode() for word in command]
    line = command if isinstance(command, bytes) else str(command).encode()
    return sdssplitargs(line)


def unknown(table, args: list[bytes]) -> str:
    """Why Redis would refuse the command whatever the policy, or ''."""
    if not args:
        return "an empty command"
    name = args[0].decode("utf-8", "backslashreplace")
    spec = table.lookup(args)
    if spec is None:
        names = [spec.name.upper() for spec in table]
        return f"unknown command '{name}'{did_you_mean(name, names, 3)}"
    if spec.subcommands and len(args) > 1:
        sub = args[1].decode("utf-8", "backslashreplace")
        names = [short.upper() for short in spec.subcommands]
        return f"unknown subcommand '{sub}' of {name.upper()}{did_you_mean(sub, names, 3)}"
    arity = spec.arity
    if (arity > 0 and len(args) != arity) or (arity < 0 and len(args) < -arity):
        return f"wrong number of arguments for '{spec.name.replace('|', ' ')}' command"
    return ""


def shown(args) -> str:
    """A command as a person reads it; a script's source by its first line."""
    def word(arg: bytes) -> str:
        text = bytes(arg).decode("utf-8", "backslashreplace")
        if "\n" in text:
            return f"<script: {(text.strip().splitlines() or [''])[0]}>"  # (its first line that says something)
        return f'"{text}"' if not text or any(c.isspace() or c in "\"'" for c in text) else text

    return " ".join(word(arg) for arg in args)


@dataclass(frozen=True)
class Outcome:
    """What the proxy does with one command: `verdict` ALLOW (forwarded as it is), REJECT (`reject`
    is the finding the client gets) or REWRITE (`commands` are sent instead, by `rewritten_by`).
    `findings` are every rule that fired, audit ones included."""

    verdict: str
    findings: tuple[Finding, ...] = ()
    reject: Finding | None = None
    commands: tuple[tuple[bytes, ...], ...] = ()
    rewritten_by: tuple[str, ...] = ()

    def audited(self) -> tuple[str, ...]:
        return tuple(finding.rule for finding in self.findings if finding.mode == AUDIT)

    def describe(self) -> str:
        if self.verdict == REJECT:
            return f"rejected by {self.reject.rule}: -{violation_text(self.reject)}"
        audit = f" (audit: {', '.join(self.audited())})" if self.audited() else ""
        if self.verdict == REWRITE:
            sent = "; ".join(shown(command) for command in self.commands)
            return f"rewritten by {', '.join(self.rewritten_by)}, sent as: {sent}{audit}"
        return f"allowed, forwarded unchanged{audit}"


def decide(engine, args: list[bytes], later=(), state: SessionState | None = None) -> Outcome:
    """The engine's decision on `args`, followed by `later` in the same pipeline."""
    plan = engine.plan_for(args)
    verdict = engine.decide(plan, args, later, state or SessionState()) if plan is not None else None
    if verdict is None:
        return Outcome(ALLOW)
    findings = tuple(verdict.findings)
    if verdict.reject is not None:
        return Outcome(REJECT, findings, verdict.reject)
    if verdict.commands is not None:
        return Outcome(REWRITE, findings, commands=tuple(tuple(command) for command in verdict.commands),
                       rewritten_by=tuple(rule.id for rule in verdict.rewritten_by))
    return Outcome(ALLOW, findings)

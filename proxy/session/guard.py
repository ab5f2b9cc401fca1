"""What the session asks of the policy for every command it checks, before the engine: the
dispatch table's `Guard` for the name.

Under a policy, the session's dispatch table maps every name whose plan has something to check to
a Guard (`behaviour.dispatch_table`) instead of its action. The session's loop reads it for every
such command: the command passes without the engine when its plan checks only the name of
argument 1 and that name's class is among the engine's good keys (`keys_only`), or when the
plan's Memo (policy/memo.py) says a command of its shape, on a key of its class, passed before
(or was refused before: `Memo.refused`); otherwise the engine decides on the `plan`. Compiled
with the session core (`guard.pxd`), so these checks are C field reads, not Python calls.
"""

from __future__ import annotations

from .. import compiled


class Guard:
    """A name's entry in a session's dispatch table when the policy checks the command: the
    engine's plan, what the session's loop reads of it, and the name's action once it passes."""

    __slots__ = compiled.declared_fields(__file__, "Guard")

    def __init__(self, plan, action: int):
        self.plan = plan
        self.action = action  # once counted (`counted`), PASS is the name's Tally
        self.code = action  # the action as a number, for the verdict's handling
        self.keys_only = plan.keys_only
        self.memo = plan.memo_check  # None: no memo, the engine decides every command

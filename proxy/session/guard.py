"""What the session asks of the policy for every command it checks, before the engine: the
dispatch table's `Guard` for the name, and the plan's `Memo` of passes.

Theory of operation: under a policy, the session's dispatch table maps every name whose plan has
something to check to a Guard (`behaviour.dispatch_table`) instead of its action. The session's
loop reads it for every such command: the command passes without the engine when its plan checks
only the name of argument 1 and that name's class is among the engine's good keys (`keys_only`),
or when the plan's Memo says a command of its shape, on a key of its class, passed before;
otherwise the engine decides on the `plan`. The engine remembers the commands that passed by
their shape (policy/engine.py, "The memo of passes": the key's class, the lengths of the
arguments no rule reads, the bytes of the ones they do) and writes the memo; a Memo only reads
it. The SET family's shape (the value's length, then the options) is compared in place, without
building it. Both are compiled with the session core (`guard.pxd`), so these checks are C field
reads and a dict lookup, not Python calls; a key's class is `key_class` (session/classes.py, in C
when built, a C call from here), and the last class that passed is kept (by the session for the
good keys, by each Memo for its shapes), so the usual command compares its key's class with it as
it is read (`same_class`), instead of making the class and hashing it.
"""

from __future__ import annotations

from .classes import key_class, same_class


class Memo:
    """A plan's memo (`memo`: the key's class -> its shape, or a frozenset of shapes), the
    translate table of key classes, the plan's shape function and the first argument whose
    bytes are part of the shape (`start`: 3 for the SET family). The last class that passed is
    kept with what the memo held for it: commands mostly name keys of one class, and comparing
    two short byte strings costs less than hashing one. What the engine remembered since is
    looked up when the kept shapes do not fit (a pass, once remembered, stays true)."""

    __slots__ = ("memo", "key_classes", "shape", "start", "last_class", "last_known")

    def __init__(self, memo: dict, key_classes, shape, start: int):
        self.memo = memo
        self.key_classes = key_classes
        self.shape = shape
        self.start = start
        self.last_class = None
        self.last_known = None

    def passed(self, args, state) -> bool:
        """True when a command of this shape on a key of this class passed before, outside a
        transaction (the engine decides the rest)."""
        if len(args) < 2 or state.in_multi:
            return False
        key = args[1]
        if same_class(key, self.key_classes, self.last_class) and self.fits(args, self.last_known):
            return True
        found = key_class(key, self.key_classes)
        known = self.memo.get(found)
        if known is None or not self.fits(args, known):
            return False
        self.last_class = found
        self.last_known = known
        return True

    def fits(self, args, known) -> bool:
        """Is the shape of `args` `known` (a shape) or among them (a frozenset)?"""
        if self.start == 3:  # SET k v [options]
            if len(args) < 3:
                return False
            if len(args) == 5 and type(known) is tuple:  # SET k v EX n, its shape unbuilt
                return (len(known) == 3 and known[0] == len(args[2]) and known[1] == args[3]
                        and known[2] == args[4])
            found = (len(args[2]), *args[3:])
        else:
            found = self.shape(args)
        return found == known or (type(known) is frozenset and found in known)


class Guard:
    """A name's entry in a session's dispatch table when the policy checks the command: the
    engine's plan, what the session's loop reads of it, and the name's action once it passes."""

    __slots__ = ("plan", "action", "code", "keys_only", "memo")

    def __init__(self, plan, action: int):
        self.plan = plan
        self.action = action  # once counted (`counted`), PASS is the name's Tally
        self.code = action  # the action as a number, for the verdict's handling
        self.keys_only = plan.keys_only
        self.memo = plan.memo_check  # None: no memo, the engine decides every command

"""A plan's `Memo`: what the session's loop reads of the engine's memo of passes and of refusals
before asking the engine (session/guard.py's Guard holds it, policy/engine.py's Plan makes it).

The engine remembers the commands that passed by their shape (policy/engine.py, "The memo of
passes": the key's class, the lengths of the arguments no rule reads, the bytes of the ones they
do) and writes the memo; a Memo only reads it. The SET family's shape (the value's length, then
the options) is compared in place, without building it. Compiled with the session core
(`memo.pxd`), so these checks are C field reads and a dict lookup, not Python calls; a key's
class is `key_class` (policy/classes.py, in C when built, a C call from here), and the last class
that passed is kept (by the session for the good keys, by each Memo for its shapes), so the usual
command compares its key's class with it as it is read (`same_class`), instead of making the
class and hashing it.

A Memo also reads the plan's memo of refusals (policy/refusals.py: the engine writes it too): a
command refused before by its shape and class is refused again by the session's loop without the
engine (`Memo.refused`), its reply the refusal's template around the key (`Memo.reply`). The last
refusal found is kept as the last pass is, with its template, as C fields.
"""

from __future__ import annotations

from .. import compiled
from .classes import key_class, same_class


class Memo:
    """A plan's memo (`memo`: the key's class -> its shape, or a frozenset of shapes), the
    translate table of key classes, the plan's shape function and the first argument whose
    bytes are part of the shape (`start`: 3 for the SET family). The last class that passed is
    kept with what the memo held for it: commands mostly name keys of one class, and comparing
    two short byte strings costs less than hashing one. What the engine remembered since is
    looked up when the kept shapes do not fit (a pass, once remembered, stays true)."""

    __slots__ = compiled.declared_fields(__file__, "Memo")

    def __init__(self, memo: dict, key_classes, shape, start: int, refusals: dict | None = None):
        self.memo = memo
        self.key_classes = key_classes
        self.shape = shape
        self.start = start
        self.last_class = None
        self.last_known = None
        self.refusals = refusals  # (key class, *shape) -> its Refusal (policy/refusals.py), or None
        self.refused_class = None  # the last refusal found: its key class and shape,
        self.refused_shape = None
        self.refusal = None  # the Refusal, and its reply's template (`Refusal.before`, `after`)
        self.before = None
        self.after = None

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

    def refused(self, args, state):
        """The Refusal the engine remembered for a command of this shape on a key of this class,
        outside a transaction, or None (the engine decides): `Engine.refusal`, the last one found
        compared first. A refusal, once remembered, stays true (the policy is the plan's)."""
        refusals = self.refusals
        if not refusals or len(args) < 2 or state.in_multi:
            return None
        key = args[1]
        if same_class(key, self.key_classes, self.refused_class) and self.fits(args, self.refused_shape):
            return self.refusal
        found = key_class(key, self.key_classes)
        shape = (len(args[2]),) if self.start == 3 and len(args) == 3 else self.shape(args)  # (SET k v: Plan.shape)
        refusal = refusals.get((found, *shape))
        if refusal is not None:
            self.refused_class = found
            self.refused_shape = shape
            self.refusal = refusal
            self.before = refusal.before
            self.after = refusal.after
        return refusal

    def reply(self, key) -> bytes:
        """The reply of the refusal `refused` returned last, on `key` (`Refusal.reply`): its
        template around a short printable key as it is, else the Refusal's own."""
        after = self.after
        if after is not None and len(key) <= 100 and printable(key):
            return self.before + key + after
        return self.refusal.reply(key)

    def fits(self, args, known) -> bool:
        """Is the shape of `args` `known` (a shape) or among them (a frozenset)?"""
        if self.start == 3:  # SET k v [options]
            n = len(args)
            if n < 3:
                return False
            if n == 3 and type(known) is tuple:  # SET k v, its shape unbuilt
                return len(known) == 1 and known[0] == len(args[2])
            if n == 5 and type(known) is tuple:  # SET k v EX n, its shape unbuilt
                return (len(known) == 3 and known[0] == len(args[2]) and known[1] == args[3]
                        and known[2] == args[4])
            found = (len(args[2]), *args[3:])
        else:
            found = self.shape(args)
        return found == known or (type(known) is frozenset and found in known)


def printable(key: bytes) -> bool:
    """Is every byte of `key` printable ASCII (a refusal's subject shows it as it is)?"""
    for byte in key:
        if byte < 0x20 or byte > 0x7E:
            return False
    return True

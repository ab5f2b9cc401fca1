"""What one decision of the engine carries besides the command, shared by the engine
(engine.py) and the memo of refusals (refusals.py), which decides again or words a refusal
without the engine's module: the connection's `SessionState`, and `KeyFinding`, a key rule's
finding whose advice is worked out only when asked for."""

from __future__ import annotations

from .base import Finding
from .rules._keyshape import subject as key_subject


class SessionState:
    """What the engine remembers per client connection."""

    __slots__ = ("in_multi", "protocol", "expiring", "owed", "settled", "shadow")

    def __init__(self):
        self.in_multi = False
        self.protocol = 2
        self.shadow = None  # the shadow policy's own state for this connection (`shadow.ShadowState`)
        self.expiring: set[bytes] = set()  # keys given a TTL earlier in the open transaction
        self.owed: dict[bytes, object] = {}  # key -> finding, for writes still owing a TTL at EXEC
        self.settled: list = []  # findings no later command of the transaction can meet

    def unmet(self) -> list:
        """Findings for keys written in the transaction and still without a TTL."""
        return self.settled + [finding for key, finding in self.owed.items() if key not in self.expiring]

    def forget(self, key: bytes) -> None:
        """The key is gone (deleted, moved): neither its TTL nor what it owed counts any more."""
        self.expiring.discard(key)
        self.owed.pop(key, None)

    def settle(self) -> None:
        """The transaction changes database (SELECT, SWAPDB, FLUSH*): what is owed stays owed,
        and what the next commands do to a key of the same name is another key's business."""
        self.settled = self.unmet()
        self.owed.clear()
        self.expiring.clear()

    def end_transaction(self) -> None:
        self.in_multi = False
        self.expiring.clear()
        self.owed.clear()
        self.settled = []


class KeyFinding(Finding):
    """A key rule's finding whose advice is worked out when first asked for: a refused command's
    reply needs one finding's advice, its logs and metrics the others' rule and key only, and the
    advice is most of what explaining a bad key costs."""

    __slots__ = ("_key_rule", "_text", "_advice")

    def __init__(self, rule, text: str, mode: str):
        object.__setattr__(self, "rule", rule.id)
        object.__setattr__(self, "title", rule.title)
        object.__setattr__(self, "subject", key_subject(text))
        object.__setattr__(self, "mode", mode)
        object.__setattr__(self, "_key_rule", rule)
        object.__setattr__(self, "_text", text)
        object.__setattr__(self, "_advice", None)

    @property
    def advice(self) -> str:
        advice = self._advice
        if advice is None:
            found = self._key_rule.check_key(self._text)
            advice = found.advice if found is not None else self._key_rule.describe()
            object.__setattr__(self, "_advice", advice)
        return advice

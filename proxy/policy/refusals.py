"""The memo of refusals: a command refused once is refused again, with the same findings, when
its shape and its key's class are those of the first (the engine's memo of passes, refused).

Theory of operation: a plan's memo of passes rests on what its rules declare (engine.py): their
verdicts read the key at argument 1 only through its class (`keyclass`), the arguments before
`memo_from` only by their length, the others by their bytes. So two commands of one shape on keys
of one class fire the same rules, in the same modes: the findings of a refused command are known
by (class, shape) as well as a pass is. A `Refusal` keeps them (rule, mode, outcome: what the
metrics and the findings log count) and the refusal's reply as a template, so the next command
of its shape costs a lookup and the reply a concatenation; its findings are counted by the
session in bulk (session/verdicts.py), their log lines' subjects worked out from a sample when
a line is written.

The reply names the key: it is the refusing finding's text. A key rule's finding is the key
(`subject`) and the rule's advice; when the rule says its advice on that key is the same for
every key of the class (`KeyRule.class_advice`: K1 counts segments, K4 bytes) the reply is a
template around the key as the subject shows it, checked against the first reply; otherwise the
advice is worked out again for each key (`KeyFinding`, as the full decision would). A refusal
whose refusing finding is a command rule's is not remembered (its text may name anything).

A verdict that read the rest of the pipeline (`Call.later`: T1 passes a write whose key a later
command gives a TTL) is remembered only when every rule that read it fired (`reads_later`). Such
a rule changes its verdict only for a later command on the same key that the policy passes
(`CommandRule.reads_later`); the remembered refusals are an enforced key rule's on that key,
which refuses every command on it: another pipeline cannot change what the rule says.
Transactions, verdicts that read the clock, and commands of more than `Engine.MEMO_BYTES` bytes
(key and read arguments) are always decided in full.
"""

from __future__ import annotations

from .. import errors
from .base import AUDIT, KeyRule
from .decision import KeyFinding, SessionState
from .rules._keyshape import show

LATER = "later"  # Call.volatile when only the rest of the pipeline was read (not the clock)


PRINTABLE = bytes(range(0x20, 0x7F))


def shown(key: bytes) -> bytes:
    """The key as a refusal's subject shows it (`_keyshape.show`), as reply bytes."""
    if len(key) <= 100 and not key.translate(None, PRINTABLE):
        return key  # printable ASCII, shown as it is
    text = show(key.decode("utf-8", "surrogateescape"))
    return text.replace("\r", " ").replace("\n", " ").encode("utf-8", "replace")


class Refusal:
    """A refused verdict by (key class, shape): `groups` are its findings' (rule, mode, outcome),
    in the verdict's order; the reply is `before + shown(key) + after` when `after` is set, else
    `rule`'s finding on the key (`mode`), worked out again. `engine` and `plan` decide a sample
    in full when a log line needs its findings' subjects."""

    __slots__ = ("groups", "before", "after", "rule", "mode", "engine", "plan")

    def __init__(self, groups, before, after, rule, mode, engine, plan):
        self.groups = groups
        self.before = before
        self.after = after
        self.rule = rule
        self.mode = mode
        self.engine = engine
        self.plan = plan

    # What the session's apply reads of a Verdict: a refusal rejects, and sends nothing.
    commands = None

    def reply(self, key: bytes) -> bytes:
        after = self.after
        if after is not None:
            return self.before + shown(key) + after
        return errors.policy_violation(KeyFinding(self.rule, key.decode("utf-8", "surrogateescape"), self.mode))

    def findings(self, args) -> tuple:
        """The findings of `args` (a command this refusal stands for), decided in full as if
        alone in its pipeline (the same findings: the memo's premise)."""
        verdict = self.engine.decide(self.plan, args, (), SessionState())
        return verdict.findings if verdict is not None else ()


def make(engine, plan, args, findings, reject, call) -> Refusal | None:
    """The Refusal standing for this refused verdict on `args`, or None when it cannot be
    remembered (the module's docstring)."""
    if type(reject) is not KeyFinding or call is not None and call.volatile and call.volatile is not LATER:
        return None
    rule = reject._key_rule
    key = args[1]
    if not isinstance(rule, KeyRule) or not engine._failing(key):
        return None  # (a key whose rules' patterns and explanations disagree: decided each time)
    if call is not None and call.volatile is LATER:
        fired = {finding.rule for finding in findings}
        readers = [each for each in plan.command_rules if getattr(each, "reads_later", False)]
        if not readers or any(each.id not in fired for each in readers):
            return None  # a rule that read the pipeline passed (or one that does not say it reads it)
    groups = tuple((finding.rule, finding.mode, "audited" if finding.mode == AUDIT else "rejected")
                   for finding in findings)
    text = key.decode("utf-8", "surrogateescape")
    reply = errors.policy_violation(reject)
    before = after = None
    if rule.class_advice(text):
        before = b"-NOPERM key '"
        after = errors.resp_error(f"' breaks rule {reject.rule} ({reject.title}): {reject.advice}")[1:]
        if before + shown(key) + after != reply:
            before = after = None
    return Refusal(groups, before, after, rule, reject.mode, engine, plan)

"""Shadow policy: a candidate policy decided on live traffic next to the enforcing one, changing
nothing (Envoy RBAC's `shadow_rules`: "test that a new set of policies work before rolling out").

The contract, for the client session
------------------------------------
    shadow = session.shadow      # proxy.shadow: a ShadowPolicy, or None without `shadow_policy:`;
                                 # replaced on reload, and every session takes the new one at once
    shadow.observe(commands, index, state, app, peer)

The session calls `observe` once for each command the enforcing policy lets through (forwarded as
sent, audited, or rewritten), when it is about to act on it: `commands` is the batch's list of
argument lists and `index` the command's place in it (the candidate reads the commands after it,
as T1 does, without a copy being made for the common case), `state` the session's `SessionState`,
`app` the client's application name (None: none) and `peer` its address. It returns nothing,
never raises, and never changes a command, a reply, the session or `state`'s own fields: the
candidate keeps its transaction state in `state.shadow` (a fresh one after a reload, or when the
session replaces its state). A command dispatched again after a connection switch is observed
once. Commands the enforcing policy rejects are not observed: they never run, whatever the
candidate would say of them.

What it does
------------
It decides the command with the candidate's engine for the client's application (the candidate's
application of the same name, else its engine for clients that are none). When the candidate
would reject it, rewrite it, or log an audit finding, that is counted in
`redis_guard_policy_findings_total` with the candidate's name as `policy` and the outcome
`would-reject`, `would-rewrite` or `would-audit` (the enforcing policy's counts are untouched),
and logged as the decision log does (`"event": "shadow"`), sampled: the first finding of each rule
and outcome in every `LOG_INTERVAL` seconds, with the number left out since (`"suppressed"`). A
transaction's writes still owing a TTL at EXEC (T1) are would-rejects at EXEC. Rewrites that are
checks run on the server (C3's size limits, V1's APPEND, V2's caps: `checks_on_server`) cannot be
judged without running them and are not counted.

Cost: a command the candidate passes takes the enforcing engine's fast paths: one lookup of its
plan (a name the candidate has no plan for costs that lookup only), then the key-class check or
the memo of passes, and no allocation, while a candidate is being tried (measured with
`benchmarks/micro_policy.py --shadow`; figures in benchmarks/README.md).
"""

from __future__ import annotations

import logging
import time

from .. import metrics
from ..pending import LaterCommands
from .base import AUDIT, ENFORCE
from .decision import SessionState

log = logging.getLogger("redis_guard.shadow")

WOULD_REJECT, WOULD_REWRITE, WOULD_AUDIT = "would-reject", "would-rewrite", "would-audit"
LOG_INTERVAL = 10.0  # seconds: at most one log line per rule and outcome in each


class ShadowState(SessionState):
    """The candidate's own per-connection state: its transaction, the engine and plans of the
    client's application, and the command seen last."""

    __slots__ = ("app", "engine", "last", "plans", "policy")

    def __init__(self, policy: ShadowPolicy, app):
        super().__init__()
        self.policy = policy
        self.app = app
        self.engine, self.plans = policy.lookups.get(app) or policy.lookups[None]
        self.last = None


class ShadowPolicy:
    """One loaded candidate policy: its engines (per application) and its sampled log."""

    def __init__(self, engine, clock=time.monotonic):
        self.engine = engine
        self.name = engine.policy.name
        # per application name: (engine, name -> plan or None for every command the table knows)
        self.lookups = {None: _lookup(engine)}
        if engine.tenants is not None:
            for app, app_engine in engine.tenants.engines.items():
                self.lookups[app] = _lookup(app_engine)
        self.clock = clock
        self.sampled: dict[tuple[str, str], list] = {}  # (rule, outcome) -> [last logged at, left out since]

    def observe(self, commands, index: int, state: SessionState, app, peer) -> None:
        """See the module's docstring: the one entry point of the session."""
        args = commands[index]
        mine = state.shadow
        if mine is None or mine.policy is not self or mine.app != app:
            mine = state.shadow = ShadowState(self, app)  # a new connection, policy or application
        elif mine.last is args:
            return  # dispatched again after a switch
        mine.last = args
        plan = mine.plans.get(args[0], _UNKNOWN)
        if plan is _UNKNOWN:  # mixed case, or a command the table does not know
            plan = mine.plans.get(args[0].lower())
        if plan is None:  # nothing to decide; the transaction's end is the candidate's business
            if state.in_multi and mine.in_multi and args[0].upper() in (b"EXEC", b"DISCARD"):
                self._end_transaction(mine, args, app, peer)
            return
        if state.in_multi is not mine.in_multi:  # the session's transaction, as of this command
            if state.in_multi:
                mine.in_multi = True
            else:
                mine.end_transaction()  # ended without the candidate's state in it (RESET)
        engine = mine.engine
        if plan.keys_only:  # the session's own fast path: a key of a class seen before, no call
            if len(args) > 1 and (args[1].translate(engine.key_classes) in engine.good_keys
                                  or engine.key_ok(args[1])):
                return
        elif plan.memo_check is not None and plan.memo_check.passed(args, mine):
            return
        try:
            verdict = engine.decide(plan, args, LaterCommands(commands, index + 1), mine)
            if verdict is not None:
                self._report(verdict, args, app, peer)
        except Exception:  # a bug in a candidate rule must not touch the traffic
            log.exception("shadow policy '%s' failed on %r", self.name, args[0])

    def _end_transaction(self, mine: ShadowState, args, app, peer) -> None:
        if args[0].upper() == b"EXEC":
            for finding in mine.unmet():
                finding = mine.engine.with_mode(finding)
                self._count(finding, WOULD_AUDIT if finding.mode == AUDIT else WOULD_REJECT, args, app, peer)
        mine.end_transaction()

    def _report(self, verdict, args, app, peer) -> None:
        for finding in verdict.findings:
            self._count(finding, WOULD_AUDIT if finding.mode == AUDIT else WOULD_REJECT, args, app, peer)
        for finding, count in verdict.more:
            self._count(finding, WOULD_AUDIT if finding.mode == AUDIT else WOULD_REJECT, args, app, peer, count)
        if verdict.reject is None and verdict.commands is not None:
            name = args[0].decode("utf-8", "replace")
            for rule in verdict.rewritten_by:
                if not rule.checks_on_server:
                    self._count(rule.would_rewrite(name, verdict.commands, ENFORCE), WOULD_REWRITE, args, app, peer)

    def _count(self, finding, outcome: str, args, app, peer, n: int = 1) -> None:
        """Count always; log the first of each rule and outcome in every LOG_INTERVAL."""
        now = self.clock()
        key = (finding.rule, outcome)
        seen = self.sampled.get(key)
        if seen is None or now - seen[0] >= LOG_INTERVAL:
            left_out = seen[1] if seen is not None else 0
            self.sampled[key] = [now, n - 1]
            metrics.record(finding, outcome, args, peer, self.name, app=app, event="shadow", suppressed=left_out)
            if n > 1:
                metrics.record(finding, outcome, args, peer, self.name, app=app, logged=False, n=n - 1)
        else:
            seen[1] += n
            metrics.record(finding, outcome, args, peer, self.name, app=app, logged=False, n=n)


_UNKNOWN = object()


def _lookup(engine) -> tuple:
    """(engine, plans): every command name the table knows, in both cases, to its plan or None,
    so that a command the candidate does not check costs one lookup and no `.lower()`."""
    plans = {}
    for spec in engine.table:
        name = spec.name.encode()
        plans[name] = plans[name.upper()] = None
    plans.update(engine.plans)
    return engine, plans


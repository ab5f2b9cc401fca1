"""The policy's verdicts applied to a session: what a rejected, rewritten or audited command
becomes, and a transaction's last check at EXEC.

The engine (`proxy/policy/engine.py`) decides without I/O; this module applies its `Verdict` to
the client's session: findings are counted and logged, a rejection is the client's reply (and
dooms an open transaction, as Redis does for a command it refused to queue), a rewrite is sent
through the session's route in the command's place (a server-side script's refusal counted like
the proxy's own, through `ScriptVerdictSink`), and the commands the policy adds after it go
unseen, after EXEC inside a transaction.

A refusal the engine remembered (`policy/refusals.py`) is answered from its template, and its
findings are counted in bulk: each refused command adds one to its (session, refusal, name)
in `PENDING`, which `flush_refusals` turns into the metrics and the findings log's counts a
tenth of a second later (one `call_later`), or earlier when the metrics are read; every refused
command is counted, exactly as one by one.
"""

from __future__ import annotations

import logging

import hiredis

from .. import errors, metrics
from ..backends.handlers import lease
from ..monitor import live
from ..pending import LaterCommands, ReplacingSink, ScriptVerdictSink
from ..policy.base import AUDIT, Finding
from ..policy.engine import Verdict
from ..policy.refusals import Refusal
from ..resp.reader import Batch
from .behaviour import PASS
from .queued import ExecWatch, is_hello
from .states import DOOMED, HELD, OPEN, SHARED, STREAMING

log = logging.getLogger("redis_guard.server")

POLICY_FAILED = Verdict(Finding("policy", "internal error", "command",
                                "the proxy could not decide on it; see the proxy's log"))


def decide(session, plan, commands, index: int):
    try:
        state = session.policy_state
        args = commands[index]
        refusals = plan.refusals
        if refusals and not state.in_multi and len(args) > 1:  # Engine.refusal, inline
            if len(args) == 3 and plan.memo_from == 3:  # SET k v: its shape is the value's length
                refusal = refusals.get((args[1].translate(plan.key_classes), len(args[2])))
            else:
                refusal = refusals.get((args[1].translate(plan.key_classes), *plan.shape(args)))
            if refusal is not None:
                return refusal
        return session.engine.decide(plan, args, LaterCommands(commands, index + 1), state)
    except Exception:  # a bug in a rule must not take the connection down
        log.exception("policy engine failed on %r", commands[index][0])
        return POLICY_FAILED


def record(session, findings, args, more=()) -> None:
    """Count and log `findings`, and `more`'s (finding, count) pairs (`Verdict.more`)."""
    policy = session.engine.policy.name
    for finding in findings:
        metrics.record(finding, "audited" if finding.mode == AUDIT else "rejected", args, session.peer, policy,
                       app=session.app)
    for finding, count in more:
        metrics.record(finding, "audited" if finding.mode == AUDIT else "rejected", args, session.peer, policy,
                       app=session.app, n=count)


def apply(session, verdict, batch, start: int, index: int, action: int = PASS):
    """Apply the engine's verdict on commands[index] (whose action, had it passed, is `action`).
    Returns where to continue, or None when the command goes on as usual (findings in audit
    mode only)."""
    args = batch.commands[index]
    if type(verdict) is Refusal:  # remembered (policy/refusals.py): answered and counted in bulk
        if start < index:
            session.route.forward(session, batch, start, index)
        session.answer_refused(verdict, args, verdict.reply(args[1]))
        return index + 1
    if (action != PASS and verdict.reject is None and verdict.commands is not None and len(verdict.commands) == 1
            and _same_script(verdict.commands[0][0], args[0]) and _redispatches(session, action)):
        # A standalone lease moves the client to a connection of its own and dispatches the
        # command again there, where it is decided again and sent as EVAL (counted then).
        return None
    record(session, verdict.findings, args, verdict.more)
    if verdict.reject is None:
        for rule in verdict.rewritten_by:
            metrics.count_rewrite(rule, session.engine.policy.name, session.app)
    if verdict.reject is None and verdict.commands is None:
        return None
    route = session.route
    if start < index:
        route.forward(session, batch, start, index)
    if verdict.reject is not None:
        live.rejected(args[0])
        session.answer_locally(errors.policy_violation(verdict.reject))
        session.refused_in_transaction()
        return index + 1
    first, *extra = verdict.commands
    if extra and session.state.lane is STREAMING:
        # A stream's replies are not paired: the extra commands' replies would reach the client,
        # and the proxy cannot know whether a MULTI there is open (they would join it).
        session.answer_locally(errors.needs_paired_replies(args, verdict.rewritten_by))
        session.refused_in_transaction()
        return index + 1
    if action != PASS and not extra and (first[0] == args[0] or _same_script(first[0], args[0])):
        return handled_as(session, action, first, batch, index)
    receiver = ScriptVerdictSink(session, args) if first[0] in (b"EVAL", b"EVALSHA", b"EVAL_RO") else session
    route.send(session, args, hiredis.pack_command(tuple(first)), 1, receiver)
    if extra:
        if session.state.in_transaction:
            session.after_exec.extend(extra)  # extra replies would change what EXEC returns
        else:
            route.hidden(session, args, extra)
    return index + 1


def pend(session, pending: tuple, args) -> None:
    """The first refusal of its (Refusal, name, application) since the last count (`Session.answer_refused`)."""
    loop = session.loop
    if not PENDING or ARMED[0] is not loop:
        ARMED[0] = loop  # (a loop of its own: a flush armed on another, stopped loop would not run)
        loop.call_later(FLUSH_AFTER, flush_refusals)
    PENDING[pending] = [1, args, session.peer]


# (Refusal, command name as sent, application) -> [refused commands not yet counted, the first
# of them, its client's address]: the first is the findings log's sample, as one by one.
PENDING: dict = {}
# Seconds the refusals of PENDING wait to be counted: refused commands come by thousands, and
# counting each entry costs a metric and a log group per finding. The metrics are exact whenever
# read (the snapshot counts PENDING first: monitor/snapshot.py), and on the way out.
FLUSH_AFTER = 0.1
ARMED = [None]  # the loop the flush was last armed on


def flush_refusals() -> None:
    """Count the remembered refusals of `PENDING` in the metrics and the findings log."""
    if not PENDING:
        return
    pending = list(PENDING.items())
    PENDING.clear()
    for (refusal, name, app), (count, sample, peer) in pending:
        policy = refusal.engine.policy.name
        findings = Sample(refusal, sample)
        for position, (rule, mode, outcome) in enumerate(refusal.groups):
            metrics.record_counted(rule, mode, outcome, name, findings.subject(position), peer, policy, app, count)


class Sample:
    """The findings of a refused command, decided in full when a log line asks for their subjects."""

    __slots__ = ("refusal", "args", "found")

    def __init__(self, refusal, args):
        self.refusal = refusal
        self.args = args
        self.found = None

    def subject(self, position: int):
        def subject() -> str:
            found = self.found
            if found is None:
                found = self.found = self.refusal.findings(self.args)
            return found[position].subject if position < len(found) else ""
        return subject


def _same_script(sent: bytes, asked: bytes) -> bool:
    """An approved EVALSHA sent as EVAL of its body (rule C6): a script all the same, so it keeps
    the action of one (a connection of the client's own: one that does not end gives the others
    BUSY instead of holding a shared connection)."""
    return sent in (b"EVAL", b"EVAL_RO") and asked.upper() in (b"EVALSHA", b"EVALSHA_RO")


def _redispatches(session, action: int) -> bool:
    """Does the action's handler move the client to a connection of its own and dispatch its
    command again (a standalone backend's lease), rather than send the command itself (a
    cluster's, which takes the rewritten one: `handled_as`)?"""
    return session.handlers[action] is lease and session.state.lane is SHARED


def handled_as(session, action: int, rewritten, batch, index: int) -> int:
    """A rewrite of a command the backend handles itself (a cluster's SCAN, which K7 scoped to
    the application's prefix): the handler takes the rewritten command as a batch of one. When
    it waits, the client's own command is dispatched again (and rewritten again) afterwards."""
    data = hiredis.pack_command(tuple(rewritten))
    next_index = session.handlers[action](session, Batch([rewritten], data, [len(data)]), 0)
    if next_index == HELD:
        session.resume_at = (batch, index)
        return HELD
    return index + 1


def end_transaction(session, is_exec: bool, batch, index: int) -> int:
    """EXEC or DISCARD of an open transaction: the policy's last word on it, then Redis's."""
    state = session.policy_state
    doomed = session.state.txn is DOOMED
    extra = session.after_exec
    effects, session.queued_effects = session.queued_effects, []
    unmet = state.unmet() if is_exec and not doomed else ()
    state.end_transaction()
    session.after_exec = []
    session.state.to("end")
    args = batch.commands[index]
    if unmet:
        unmet = [session.engine.with_mode(finding) for finding in unmet]
        record(session, unmet, args)
        unmet = [finding for finding in unmet if finding.mode != AUDIT]
    if is_exec and (doomed or unmet):
        # Nothing of the transaction may run: discard it upstream, answer as Redis would.
        reply = errors.policy_violation(unmet[0]) if unmet else errors.EXECABORT
        session.route.send(session, args, hiredis.pack_command(("DISCARD",)), 1, ReplacingSink(session, reply))
        return index + 1
    if is_exec and session.unpaired:
        # EXEC of an (UN)SUBSCRIBE with several channels answers more replies than it counts
        # (redis/redis#12207): from EXEC on, every reply of the connection is the client's.
        session.unpaired = False
        return session.stream_on_own(batch, index)
    session.unpaired = False
    if is_exec and effects:
        session.route.send(session, args, batch.span(index, index + 1), 1, ExecWatch(session, effects))
    else:
        session.route.forward(session, batch, index, index + 1)
    if is_exec and extra:
        session.route.hidden(session, args, extra)
    if is_exec and any(is_hello(queued) for queued in effects) and session.state.life is OPEN and session.inflight:
        return session.wait(batch, index + 1)  # the client's next command goes in the protocol EXEC leaves
    return index + 1

"""The policy's counters and decision log, declared once.

Every policy decision that fires a rule is counted by rule id, mode and outcome (`rejected`,
`audited`, `rewritten`); `monitor/` serves these counters, summed over the workers, with the
traffic metrics on the HTTP address set in the config (`metrics: 127.0.0.1:9121`). Each finding
is also logged as one line of fields (rule, mode, outcome, command, key, client address,
policy, application) — never values; audit findings (which, unlike refusals, a client never
sees) at most `monitor.logs.FINDINGS_PER_SECOND` lines a second. The application is the one the client authenticated to the proxy as (empty / null: none).
"""

from __future__ import annotations

import logging

from prometheus_client import CollectorRegistry, Counter, Gauge

from .monitor.logs import Fields, FindingLimiter

decision_log = logging.getLogger("redis_guard.decisions")

REGISTRY = CollectorRegistry(auto_describe=True)

FINDINGS = Counter(
    "redis_guard_policy_findings",
    "Policy rules that fired, by rule id, mode, outcome and application (empty: none)",
    ["rule", "mode", "outcome", "policy", "app"], registry=REGISTRY,
)
CLIENTS = Gauge("redis_guard_clients", "Client connections open", registry=REGISTRY)
POLICY_RELOADS = Counter(
    "redis_guard_policy_reloads", "Policy reloads by result", ["result"], registry=REGISTRY,
)
UPSTREAM_ERRORS = Counter(
    "redis_guard_upstream_errors", "Upstream connections failed or refused", registry=REGISTRY,
)
HIDDEN_FAILED = Counter(
    "redis_guard_hidden_commands_failed",
    "Commands the policy added (T1's EXPIRE ... NX) that failed or were lost", registry=REGISTRY,
)
FINDING_LINES = FindingLimiter(decision_log)


def record(finding, outcome: str, args, peer, policy: str, key_index: int | None = None,
           app: str | None = None) -> None:
    FINDINGS.labels(finding.rule, finding.mode, outcome, policy, app or "").inc()
    if not decision_log.isEnabledFor(logging.INFO) or (outcome == "audited" and not FINDING_LINES.allow()):
        return
    entry = Fields({
        "event": "policy", "rule": finding.rule, "mode": finding.mode, "outcome": outcome,
        "policy": policy, "app": app, "command": args[0].decode("utf-8", "replace").upper(),
        "subject": finding.subject.encode("utf-8", "backslashreplace").decode("utf-8"),
        "client": f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) and len(peer) >= 2 else str(peer),
    })
    decision_log.info(entry)


def count_rewrite(rule, policy: str, app: str | None = None) -> None:
    FINDINGS.labels(rule.id, "enforce", "rewritten", policy, app or "").inc()

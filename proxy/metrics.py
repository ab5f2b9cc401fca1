"""Metrics and the policy decision log, declared once.

Every policy decision that fires a rule is counted by rule id, mode and outcome (`rejected`,
`audited`, `rewritten`) and exposed in Prometheus format by `prometheus-client` on the HTTP
address set in the config (`metrics: 127.0.0.1:9121`). Each finding is also logged as one JSON
line (rule, mode, outcome, command, key, client address, policy, application) — never values.
The application is the one the client authenticated to the proxy as (empty / null: none).
"""

from __future__ import annotations

import json
import logging

from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server

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
AUTH_FAILURES = Counter(
    "redis_guard_auth_failures",
    "AUTH / HELLO AUTH attempts with wrong credentials (each address slows down: proxy/throttle.py)",
    registry=REGISTRY,
)
HIDDEN_FAILED = Counter(
    "redis_guard_hidden_commands_failed",
    "Commands the policy added (T1's EXPIRE ... NX) that failed or were lost", registry=REGISTRY,
)


def serve(address) -> None:
    """Expose the metrics over HTTP (a daemon thread, as prometheus-client does it)."""
    start_http_server(address.port, addr=address.host, registry=REGISTRY)


def record(finding, outcome: str, args, peer, policy: str, key_index: int | None = None,
           app: str | None = None) -> None:
    FINDINGS.labels(finding.rule, finding.mode, outcome, policy, app or "").inc()
    if not decision_log.isEnabledFor(logging.INFO):
        return
    entry = {
        "event": "policy", "rule": finding.rule, "mode": finding.mode, "outcome": outcome,
        "policy": policy, "app": app, "command": args[0].decode("utf-8", "replace").upper(),
        "subject": finding.subject.encode("utf-8", "backslashreplace").decode("utf-8"),
        "client": f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) and len(peer) >= 2 else str(peer),
    }
    decision_log.info(json.dumps(entry, ensure_ascii=False))


def count_rewrite(rule, policy: str, app: str | None = None) -> None:
    FINDINGS.labels(rule.id, "enforce", "rewritten", policy, app or "").inc()

"""The policy's counters and decision log, declared once.

Every policy decision that fires a rule is counted by rule id, mode and outcome (`rejected`,
`audited`, `rewritten`; a shadow policy's `would-reject`, `would-rewrite`, `would-audit`);
`monitor/` serves these counters, summed over the workers, with the traffic metrics on the HTTP
address set in the config (`metrics: 127.0.0.1:9121`). Each finding is also logged as one line
of fields (rule, mode, outcome, command, key, client address, policy, application) — never
values; audit findings (which, unlike refusals, a client never sees) at most
`monitor.logs.FINDINGS_PER_SECOND` lines a second. The application is the one the client
authenticated to the proxy as (empty / null: none).
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
    "redis_guard_policy_reloads", "Policy reloads by result, of the enforcing and of the shadow policy",
    ["result", "role"], registry=REGISTRY,
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

SLOW_CLIENTS = Counter(
    "redis_guard_clients_disconnected_output_buffer",
    "Clients disconnected for leaving more unread replies than limits.client_output_buffer",
    registry=REGISTRY,
)
# TLS (proxy/tls.py)
HANDSHAKE_FAILURES = Counter(
    "redis_guard_tls_handshake_failures",
    "Client TLS handshakes that failed, by reason (plaintext: a client that does not speak TLS)",
    ["reason"], registry=REGISTRY,
)
CERT_EXPIRY = Gauge(
    "redis_guard_tls_certificate_expiry_seconds",
    "When the certificate the proxy presents expires (Unix time), by side (server: to clients)",
    ["side"], registry=REGISTRY,
)
TLS_RELOADS = Counter(
    "redis_guard_tls_reloads", "Certificate reloads by result (failed: the old ones kept)",
    ["result"], registry=REGISTRY,
)
FINDING_LINES = FindingLimiter(decision_log)


def record(finding, outcome: str, args, peer, policy: str, key_index: int | None = None,
           app: str | None = None, logged: bool = True, event: str = "policy", **extra) -> None:
    """Count a finding; log it unless `logged` is False (a sampled log decides). `extra` goes into
    the log line (the shadow policy's `suppressed`)."""
    FINDINGS.labels(finding.rule, finding.mode, outcome, policy, app or "").inc()
    if not logged or not decision_log.isEnabledFor(logging.INFO) or (
            outcome == "audited" and not FINDING_LINES.allow()):
        return
    entry = Fields({
        "event": event, "rule": finding.rule, "mode": finding.mode, "outcome": outcome,
        "policy": policy, "app": app, "command": args[0].decode("utf-8", "replace").upper(),
        "subject": finding.subject.encode("utf-8", "backslashreplace").decode("utf-8"),
        "client": f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) and len(peer) >= 2 else str(peer),
        **extra,
    })
    decision_log.info(entry)


def count_rewrite(rule, policy: str, app: str | None = None) -> None:
    FINDINGS.labels(rule.id, "enforce", "rewritten", policy, app or "").inc()

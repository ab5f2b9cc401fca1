"""The policy's counters and decision log, declared once.

Every policy decision that fires a rule is counted by rule id, mode and outcome (`rejected`,
`audited`, `rewritten`; a shadow policy's `would-reject`, `would-rewrite`, `would-audit`);
`monitor/` serves these counters, summed over the workers, with the traffic metrics on the HTTP
address set in the config (`metrics: 127.0.0.1:9121`). Findings are also logged as lines of
fields (rule, mode, outcome, command, key, client address, policy, application, count) — never
values — gathered per interval (`monitor.logs.FindingLog`): the first of each rule, mode,
outcome, policy, application and command at once, the others as one line with their count and a
sample. The application is the one the client authenticated to the proxy as (empty / null: none).
"""

from __future__ import annotations

import logging

from prometheus_client import CollectorRegistry, Counter, Gauge

from .monitor.logs import Fields, FindingLog

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
UPSTREAM_TIMEOUTS = Counter(
    "redis_guard_upstream_timeouts",
    "Upstream connections closed because a request had no reply within upstream_options.request_timeout",
    registry=REGISTRY,
)
AUTH_FAILURES = Counter(
    "redis_guard_auth_failures",
    "AUTH / HELLO AUTH attempts with wrong credentials (the failing connection is braked: proxy/throttle.py)",
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
MEMORY_DISCONNECTS = Counter(
    "redis_guard_clients_disconnected_max_memory",
    "Clients disconnected, the largest holders first, for the proxy's buffers over limits.max_memory",
    registry=REGISTRY,
)
MEMORY_PAUSES = Counter(
    "redis_guard_clients_paused_max_memory",
    "Times reading a client was paused, the largest holders first, for buffers over limits.max_memory",
    registry=REGISTRY,
)
REFUSED_CLIENTS = Counter(
    "redis_guard_clients_refused_max_clients",
    "Client connections refused with limits.max_clients open", registry=REGISTRY,
)
IDLE_CLOSED = Counter(
    "redis_guard_clients_closed_idle",
    "Clients closed after limits.client_idle_timeout without a request", registry=REGISTRY,
)
FINDING_LINES = FindingLog(decision_log)
_COUNTERS: dict[tuple, object] = {}  # (rule, mode, outcome, policy, app) -> its child of FINDINGS


def count(rule: str, mode: str, outcome: str, policy: str, app: str | None, n: int = 1) -> None:
    """FINDINGS.labels(...).inc(n), the labelled child looked up once."""
    key = (rule, mode, outcome, policy, app)
    child = _COUNTERS.get(key)
    if child is None:
        child = _COUNTERS[key] = FINDINGS.labels(rule, mode, outcome, policy, app or "")
    child.inc(n)


def record(finding, outcome: str, args, peer, policy: str, key_index: int | None = None,
           app: str | None = None, logged: bool = True, event: str = "policy", n: int = 1, **extra) -> None:
    """Count `n` findings like `finding`; log them unless `logged` is False (a sampled log decides,
    and its lines are written as they come). `extra` goes into the log line (the shadow policy's
    `suppressed`)."""
    count(finding.rule, finding.mode, outcome, policy, app, n)
    if not logged or not decision_log.isEnabledFor(logging.INFO):
        return
    name = args[0]

    def fields() -> Fields:  # (holds the command's name, not its arguments)
        return Fields({
            "event": event, "rule": finding.rule, "mode": finding.mode, "outcome": outcome,
            "policy": policy, "app": app, "command": name.decode("utf-8", "replace").upper(),
            "subject": finding.subject.encode("utf-8", "backslashreplace").decode("utf-8"),
            "client": f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) and len(peer) >= 2 else str(peer),
            **extra,
        })

    if event == "shadow":  # sampled already (policy/shadow.py)
        decision_log.info(fields())
        return
    FINDING_LINES.add((finding.rule, finding.mode, outcome, policy, app, name.upper()), fields, n)


def count_rewrite(rule, policy: str, app: str | None = None) -> None:
    count(rule.id, "enforce", "rewritten", policy, app)


def record_counted(rule: str, mode: str, outcome: str, name: bytes, subject, peer, policy: str, app: str | None,
                   n: int) -> None:
    """`record` of `n` findings of `rule` counted in bulk (the memo of refusals: session/verdicts.py),
    `subject()` the text of the first one's subject, called only when a line is written."""
    count(rule, mode, outcome, policy, app, n)
    if not decision_log.isEnabledFor(logging.INFO):
        return

    def fields() -> Fields:
        return Fields({
            "event": "policy", "rule": rule, "mode": mode, "outcome": outcome,
            "policy": policy, "app": app, "command": name.decode("utf-8", "replace").upper(),
            "subject": subject().encode("utf-8", "backslashreplace").decode("utf-8"),
            "client": f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) and len(peer) >= 2 else str(peer),
        })

    FINDING_LINES.add((rule, mode, outcome, policy, app, name.upper()), fields, n)

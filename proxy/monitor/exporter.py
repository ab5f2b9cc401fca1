"""Prometheus metric families from a merged snapshot, built at scrape time.

A custom prometheus-client collector: nothing is registered per label on the hot path, and the
families are made from `snapshot.merge()` of every worker's counts when /metrics is asked.
Labels stay few: the command (the command table's names, "unknown" for the rest), a result,
a connection kind, an upstream address, the policy loaded. Keys never become labels.
"""

from __future__ import annotations

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
)
from prometheus_client.samples import Sample

from .. import __version__
from . import live

RESULTS = ("ok", "error", "rejected")

# Every metric this module exports (the dashboard and alert tests check against it), besides
# the families of proxy/metrics.py, which are passed through.
EXPORTED = (
    "redis_guard_commands_total", "redis_guard_command_duration_seconds", "redis_guard_upstream_rtt_seconds",
    "redis_guard_request_bytes_total", "redis_guard_reply_bytes_total", "redis_guard_client_connections",
    "redis_guard_upstream_connections", "redis_guard_upstream_up", "redis_guard_upstream_failed_requests_total",
    "redis_guard_cluster_redirections_total", "redis_guard_policy_info",
    "redis_guard_policy_last_reload_timestamp_seconds", "redis_guard_workers", "redis_guard_build_info",
    "redis_guard_worker_exits_total",
    "redis_guard_slow_commands_total", "redis_guard_big_requests_total", "redis_guard_big_replies_total",
    "redis_guard_hot_key_samples_total", "redis_guard_hot_key_top_share",
)


def _buckets(histogram: list, total: float | None = None) -> tuple[list, float]:
    """Cumulative (le, count) pairs and the sum, from per-bucket counts and a trailing sum; with
    `total`, a sample scaled so that the +Inf bucket (the count) is `total`."""
    sampled = sum(histogram[:-1])
    scale = total / sampled if total is not None and sampled else 1.0
    running = 0
    buckets = []
    for bound, count in zip((*live.BOUNDS, float("inf")), histogram[:-1]):
        running += count
        buckets.append(("+Inf" if bound == float("inf") else repr(bound), round(running * scale, 3)))
    if total is not None and sampled:
        buckets[-1] = ("+Inf", total)
    return buckets, histogram[-1] * scale


class Collector:
    """Yields the families of `source()`, a merged snapshot (one process or every worker)."""

    def __init__(self, source):
        self.source = source

    def describe(self):
        return []

    def collect(self):
        merged = self.source()
        yield from _passed_through(merged["registry"])
        yield from _commands(merged)
        yield from _traffic(merged)
        yield from _upstreams(merged)
        yield from _policy(merged)
        yield from _keys(merged)


def _passed_through(registry: dict):
    for name, (kind, doc, samples) in sorted(registry.items()):
        if kind not in ("counter", "gauge"):
            continue
        family = (CounterMetricFamily if kind == "counter" else GaugeMetricFamily)(name, doc)
        family.samples = [Sample(sample_name, dict(labels), value) for (sample_name, labels), value in samples.items()]
        yield family


def _commands(merged: dict):
    total = CounterMetricFamily("redis_guard_commands", "Client commands by name and result: ok (answered), "
                                "error (an error reply from Redis), rejected (refused by the policy)",
                                labels=["command", "result"])
    for name, count in sorted(merged["names"].items()):
        errors = merged["errors"].get(name, 0)
        rejected = merged["rejected"].get(name, 0)
        total.add_metric([name, "ok"], max(count - errors - rejected, 0))
        total.add_metric([name, "error"], errors)
        total.add_metric([name, "rejected"], rejected)
    yield total
    duration = HistogramMetricFamily(
        "redis_guard_command_duration_seconds",
        "Time from a client's run of pipelined commands being queued for upstream (its upstream write's "
        "first request) to its replies read, under the run's first command; the oldest run "
        "of each upstream read is timed and the sample is scaled to the commands answered", labels=["command"])
    for name, histogram in sorted(merged["durations"].items()):
        answered = merged["names"].get(name, 0) - merged["rejected"].get(name, 0)
        buckets, total_seconds = _buckets(histogram, answered if answered > 0 else None)
        duration.add_metric([name], buckets, total_seconds)
    yield duration
    rtt = HistogramMetricFamily("redis_guard_upstream_rtt_seconds",
                                "Time from the oldest request in flight on an upstream connection being "
                                "queued (its write's first request) to its reply, at each upstream read")
    buckets, total_seconds = _buckets(merged["rtt"])
    rtt.add_metric([], buckets, total_seconds)
    yield rtt


def _traffic(merged: dict):
    totals = merged["totals"]
    yield CounterMetricFamily("redis_guard_request_bytes", "Request bytes written to upstream servers",
                              value=totals.get("request_bytes", 0))
    yield CounterMetricFamily("redis_guard_reply_bytes", "Reply bytes read from upstream servers",
                              value=totals.get("reply_bytes", 0))
    yield CounterMetricFamily("redis_guard_cluster_redirections", "MOVED, ASK and TRYAGAIN replies the proxy "
                              "followed for its clients", value=totals.get("redirections", 0))
    yield GaugeMetricFamily("redis_guard_client_connections", "Client connections open", value=merged["clients"])
    conns = GaugeMetricFamily("redis_guard_upstream_connections", "Upstream connections open: shared by "
                              "clients, a client's own (lent or pinned: transactions, blocking, scripts, "
                              "pub/sub), the control connection, warm spares", labels=["kind"])
    for kind in ("shared", "own", "control", "spare"):
        conns.add_metric([kind], merged["upstream_connections"].get(kind, 0))
    yield conns
    yield GaugeMetricFamily("redis_guard_workers", "Worker processes that answered this scrape",
                            value=merged["workers"])
    yield CounterMetricFamily("redis_guard_worker_exits", "Worker processes that exited unasked (a crash, a "
                              "kill); the parent forks them again", value=merged.get("worker_exits", 0))


def _upstreams(merged: dict):
    up = GaugeMetricFamily("redis_guard_upstream_up", "1 while the upstream's connections work (every worker "
                           "agrees), 0 from a failure until a connection is ready again", labels=["upstream"])
    failed = CounterMetricFamily("redis_guard_upstream_failed_requests", "Requests answered with an error "
                                 "because their upstream failed or was down", labels=["upstream"])
    for label, state in sorted(merged["upstreams"].items()):
        if state["up"] is not None:  # None: seen only by workers that did not answer
            up.add_metric([label], 1 if state["up"] else 0)
        failed.add_metric([label], state["failed"])
    yield up
    yield failed


def _policy(merged: dict):
    info = GaugeMetricFamily("redis_guard_policy_info", "The policy loaded (1), by name, mode and the "
                             "SHA-256 of its file (first 12 hex digits)", labels=["policy", "mode", "sha"])
    reloaded = GaugeMetricFamily("redis_guard_policy_last_reload_timestamp_seconds",
                                 "Unix time of the last successful policy load or reload")
    latest = 0.0
    for policy in merged["policies"]:
        info.add_metric([policy["name"], policy["mode"], policy["sha"]], 1)
        latest = max(latest, policy["loaded_at"])
    if merged["policies"]:
        reloaded.add_metric([], latest)
    yield info
    yield reloaded
    build = GaugeMetricFamily("redis_guard_build_info", "The proxy's version", labels=["version"])
    build.add_metric([__version__], 1)
    yield build


def _keys(merged: dict):
    slow = CounterMetricFamily("redis_guard_slow_commands", "Runs of commands slower than the slow log's "
                               "threshold, by first command", labels=["command"])
    for name, count in sorted(merged["slow_by_name"].items()):
        slow.add_metric([name], count)
    yield slow
    counts = merged["counts"]
    yield CounterMetricFamily("redis_guard_big_requests", "Commands of at least the big-key threshold's bytes",
                              value=counts.get("big_requests", 0))
    yield CounterMetricFamily("redis_guard_big_replies", "Replies of at least the big-key threshold's bytes",
                              value=counts.get("big_replies", 0))
    samples = counts.get("hot_samples", 0)
    yield CounterMetricFamily("redis_guard_hot_key_samples", "Keys sampled for the hot-key table", value=samples)
    top = max((entry[0] for entry in merged["hot"].values()), default=0)
    yield GaugeMetricFamily("redis_guard_hot_key_top_share", "Share of the sampled key accesses that went to "
                            "the hottest key (see /debug/hotkeys)", value=top / samples if samples else 0.0)

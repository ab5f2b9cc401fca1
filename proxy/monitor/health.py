"""Each upstream's state as the connection layer sees it, logged once per change.

The connection layer reports three things, without I/O: a connection became ready
(`connected`), a connection failed for a reason other than the proxy closing it (`failed`,
with the requests that failed with it; `lost` leaves out idle connections the server closed), and requests
were answered with an error at once
because the upstream is known to be down (`requests_failed`). The first failure of an upstream
that was up logs one warning; while it stays down the failed requests are only counted; the
next connection that becomes ready logs one line with how long it was down and how many
requests failed meanwhile. A request that timed out (`request_timeout`) makes its upstream down
and hung (`timed_out`): a connection then proves the server answers (a PING in its start-up,
`connected(proven=True)`) before the upstream is up again; each timeout is counted
(`redis_guard_upstream_timeouts_total`). `redis_guard_upstream_up{upstream}` and
`redis_guard_upstream_failed_requests_total{upstream}` come from here.
"""

from __future__ import annotations

import logging
import time

from .. import metrics

log = logging.getLogger("redis_guard.upstream")


class UpstreamHealth:
    __slots__ = ("clock", "down_since", "failed_total", "failed_while_down", "label", "reason", "up", "hung")

    def __init__(self, label: str, clock=time.monotonic):
        self.label = label
        self.up = True  # until a connection says otherwise
        self.down_since = 0.0
        self.failed_while_down = 0
        self.failed_total = 0
        self.reason = ""
        self.clock = clock
        self.hung = False  # down because a request timed out: only an answer brings it up

    def connected(self, proven: bool = True) -> None:
        """A connection became ready; `proven`: the server answered its start-up commands (a
        connection without any is ready once connected, which a stopped server still accepts)."""
        if self.up or (self.hung and not proven):
            return
        self.up = True
        self.hung = False
        log.warning("upstream %s is back up after %.1fs; %d requests failed while it was down",
                    self.label, self.clock() - self.down_since, self.failed_while_down,
                    extra={"fields": {"event": "upstream_up", "upstream": self.label,
                                      "down_seconds": round(self.clock() - self.down_since, 3),
                                      "failed_requests": self.failed_while_down}})
        self.failed_while_down = 0

    def failed(self, reason: str, requests: int = 0) -> None:
        self.failed_total += requests
        if not self.up:
            self.failed_while_down += requests
            return
        self.up = False
        self.reason = reason
        self.down_since = self.clock()
        self.failed_while_down = requests
        log.warning("upstream %s is down: %s (%d requests in flight failed)", self.label, reason, requests,
                    extra={"fields": {"event": "upstream_down", "upstream": self.label, "reason": reason,
                                      "failed_requests": requests}})

    def requests_failed(self, count: int) -> None:
        self.failed_total += count
        if not self.up:
            self.failed_while_down += count


UPSTREAMS: dict[str, UpstreamHealth] = {}


def of(label: str) -> UpstreamHealth:
    health = UPSTREAMS.get(label)
    if health is None:
        health = UPSTREAMS[label] = UpstreamHealth(label)
    return health


def requests_failed(label: str, count: int) -> None:
    """Hook for requests answered with an error at once: their upstream is known to be down."""
    health = UPSTREAMS.get(label)
    if health is not None:
        health.requests_failed(count)


def hung(label: str) -> bool:
    """Is the upstream down because a request timed out (new connections must prove it answers)?"""
    health = UPSTREAMS.get(label)
    return health is not None and health.hung


def timed_out(label: str, reason: str) -> None:
    """A connection of the upstream had no reply within request_timeout (it is closed next,
    `lost` makes the upstream down and logs it once)."""
    metrics.UPSTREAM_TIMEOUTS.inc()
    of(label).hung = True


def lost(conn, reason: str) -> None:
    """Hook for a failed upstream connection: what its pending entries still awaited failed. An
    idle connection the server closed (its `timeout`, CLIENT KILL) says nothing about the server:
    only a connect that failed, a refusal, or requests lost in flight make it down."""
    # A client's entries have a count; the proxy's own start-up and hidden replies have none.
    requests = sum(slot.remaining for slot in conn.pending if slot.remaining > 0 and getattr(slot, "count", 0))
    if requests or conn.transport is None or conn.refused:
        of(conn.label).failed(reason, requests)

"""Upstream health: down and back up logged once each, with the requests that failed meanwhile."""

import logging

import pytest

from proxy.monitor import health
from proxy.monitor.health import UpstreamHealth


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_down_and_up_are_logged_once_with_the_failed_requests(caplog):
    clock = Clock()
    health = UpstreamHealth("127.0.0.1:6390", clock)
    with caplog.at_level(logging.WARNING, logger="redis_guard.upstream"):
        health.connected()  # up already: nothing to say
        health.failed("Connection refused", requests=3)
        health.failed("Connection refused", requests=2)  # still down: counted only
        health.requests_failed(5)
        clock.now += 7.5
        health.connected()
        health.connected()
    lines = [record.getMessage() for record in caplog.records]
    assert len(lines) == 2, lines
    assert "is down: Connection refused (3 requests in flight failed)" in lines[0]
    assert "back up after 7.5s; 10 requests failed while it was down" in lines[1]
    assert caplog.records[1].fields["failed_requests"] == 10
    assert health.up and health.failed_total == 10 and health.failed_while_down == 0


class Conn:
    def __init__(self, transport, refused=False, pending=()):
        self.label = f"127.0.0.1:{id(self)}"
        self.transport = transport
        self.refused = refused
        self.pending = list(pending)


class Waiting:
    def __init__(self, remaining, count):
        self.remaining = remaining
        self.count = count


class HiddenReplies:
    remaining = 2  # the proxy's own: no count


@pytest.mark.parametrize("conn, down, failed", [
    (Conn(transport=None), True, 0),  # never connected
    (Conn(transport=object(), refused=True), True, 0),  # refused the proxy's AUTH
    (Conn(transport=object(), pending=[Waiting(3, 5), HiddenReplies()]), True, 3),  # lost in flight
    (Conn(transport=object()), False, 0),  # idle, closed by the server's timeout
    (Conn(transport=object(), pending=[HiddenReplies()]), False, 0),
])
def test_what_makes_an_upstream_down(conn, down, failed):
    health.lost(conn, "closed by the server")
    state = health.UPSTREAMS.get(conn.label)
    assert (state is not None and not state.up) is down
    assert (state.failed_total if state else 0) == failed


def test_a_timed_out_upstream_is_up_again_only_once_a_server_answered(caplog):
    """After a request_timeout, a connection that is merely connected (a stopped server still
    accepts) does not make the upstream up; one whose start-up (a PING among it) was answered does."""
    label = "127.0.0.1:1-timeout-test"
    health.UPSTREAMS.pop(label, None)
    try:
        state = health.of(label)
        with caplog.at_level(logging.WARNING, logger="redis_guard.upstream"):
            health.timed_out(label, "no reply within request_timeout 1s")
            state.failed("no reply within request_timeout 1s", 3)
            assert health.hung(label) and not state.up
            state.connected(proven=False)
            assert not state.up and health.hung(label)
            state.connected(proven=True)
            assert state.up and not health.hung(label)
        assert sum("is down" in record.getMessage() for record in caplog.records) == 1
        assert sum("is back up" in record.getMessage() for record in caplog.records) == 1
    finally:
        health.UPSTREAMS.pop(label, None)

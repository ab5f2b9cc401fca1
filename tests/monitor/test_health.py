"""Upstream health: down and back up logged once each, with the requests that failed meanwhile."""

import logging

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

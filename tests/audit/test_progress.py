"""The progress line and the rate limit, on plain numbers."""

import pytest

from proxy.audit.progress import LOG_INTERVAL, TTY_INTERVAL, Progress, RateLimit, duration


@pytest.mark.parametrize("seconds, text", [(0, "0:00"), (59.9, "0:59"), (61, "1:01"), (3723, "1:02:03")])
def test_duration(seconds, text):
    assert duration(seconds) == text


def test_line_with_an_estimate():
    progress = Progress(1000, start=100.0, tty=False)
    assert progress.line(250, 110.0) == "audit: 250 of ~1,000 keys (25%), 25 keys/s, 0:10 elapsed, ~0:30 left"
    bar = Progress(1000, start=100.0, tty=True).line(500, 110.0)
    assert bar.startswith("audit: [############............] 500 of ~1,000 keys (50%)")


def test_line_past_the_estimate_and_without_one():
    assert "(100%)" in Progress(10, 0.0, False).line(20, 1.0)
    assert Progress(0, 0.0, False).line(20, 2.0) == "audit: 20 keys, 10 keys/s, 0:02"


@pytest.mark.parametrize("tty, interval", [(True, TTY_INTERVAL), (False, LOG_INTERVAL)])
def test_due_once_per_interval(tty, interval):
    progress = Progress(0, 0.0, tty)
    assert not progress.due(interval / 2)
    assert progress.due(interval)
    assert not progress.due(interval * 1.5)
    assert progress.due(interval * 2.01)


def test_rate_limit():
    limit = RateLimit(1000, start=10.0)
    assert limit.delay(0, 10.0) == 0
    assert limit.delay(500, 10.0) == pytest.approx(0.5)
    assert limit.delay(500, 10.6) == 0
    assert limit.scan_count(1000) == 100  # a tenth of a second's worth
    assert RateLimit(5, 0.0).scan_count(1000) == 1
    unlimited = RateLimit(None, 0.0)
    assert unlimited.delay(10**9, 0.0) == 0 and unlimited.scan_count(1000) == 1000

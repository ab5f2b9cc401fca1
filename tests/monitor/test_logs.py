"""Log lines: JSON objects with their fields, text as before, and the finding lines' rate limit."""

import io
import json
import logging
import os

import pytest

from proxy.monitor.logs import Fields, FindingLimiter, setup


@pytest.fixture
def restore_logging():
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def test_json_lines_carry_their_fields(restore_logging):
    out = io.StringIO()
    setup("INFO", "json", out)
    log = logging.getLogger("redis_guard.test")
    log.info("plain %s", "text")
    log.warning("upstream down", extra={"fields": {"event": "upstream_down", "failed_requests": 3}})
    logging.getLogger("redis_guard.decisions").info(Fields(event="policy", rule="K2", subject="key 'A'"))
    log.debug("not shown")
    try:
        raise ValueError("boom")
    except ValueError:
        log.exception("failed")
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [line["message"] for line in lines] == ["plain text", "upstream down", "policy", "failed"]
    assert lines[1]["failed_requests"] == 3 and lines[1]["level"] == "WARNING"
    assert lines[2]["rule"] == "K2" and lines[2]["logger"] == "redis_guard.decisions"
    assert "ValueError: boom" in lines[3]["exception"]
    assert all({"time", "level", "logger", "pid", "message"} <= set(line) for line in lines)


def test_text_lines_keep_their_form(restore_logging):
    out = io.StringIO()
    setup("WARNING", "text", out)
    logging.getLogger("redis_guard.decisions").warning(Fields(event="policy", rule="K2"))
    line = out.getvalue().strip()
    assert line.endswith(f' WARNING redis_guard.decisions[{os.getpid()}]: {{"event": "policy", "rule": "K2"}}')


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


@pytest.mark.parametrize("per_second, findings, seconds, logged, suppressed_lines", [
    (20, 10, 1, 10, []),
    (20, 100, 1, 20, []),  # the count of the last window is reported by the next finding
    (20, 120, 3, 60, [20, 20]),
    (5, 1000, 2, 10, [495]),
])
def test_findings_are_limited_per_second(caplog, per_second, findings, seconds, logged, suppressed_lines):
    clock = Clock()
    logger = logging.getLogger("redis_guard.test.findings")
    limiter = FindingLimiter(logger, per_second, clock)
    allowed = 0
    with caplog.at_level(logging.INFO, logger="redis_guard.test.findings"):
        for second in range(seconds):
            clock.now = second + 0.5
            allowed += sum(limiter.allow() for _ in range(findings // seconds))
    assert allowed == logged
    assert [record.fields["suppressed"] for record in caplog.records] == suppressed_lines
    with caplog.at_level(logging.INFO, logger="redis_guard.test.findings"):
        limiter.flush()
    assert sum(record.fields["suppressed"] for record in caplog.records) == findings - logged

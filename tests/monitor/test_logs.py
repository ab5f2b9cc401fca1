"""Log lines: JSON objects with their fields, text as before, and the findings gathered per interval."""

import asyncio
import io
import json
import logging
import os

import pytest

from proxy.monitor.logs import Fields, FindingLog, setup


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


def _finding(rule, key):
    return lambda: Fields(event="policy", rule=rule, subject=f"key '{key}'")


def test_findings_are_one_line_per_group_and_interval_with_their_count(caplog):
    clock = Clock()
    logger = logging.getLogger("redis_guard.test.findings")
    log = FindingLog(logger, 10.0, clock)
    with caplog.at_level(logging.INFO, logger="redis_guard.test.findings"):
        for i in range(20_000):
            clock.now = i / 1000  # 20 s: two intervals
            log.add(("K2", "app", b"SET"), _finding("K2", f"Bad:{i}"))
            log.add(("T1", "app", b"SET"), _finding("T1", f"Bad:{i}"), 2)
        log.flush()
    lines = [(record.msg["rule"], record.msg["subject"], record.msg["count"]) for record in caplog.records]
    # Each interval: the first of each group at once, then one line with the others' count and a sample.
    assert lines == [
        ("K2", "key 'Bad:0'", 1), ("T1", "key 'Bad:0'", 1),
        ("K2", "key 'Bad:1'", 9_999), ("T1", "key 'Bad:0'", 19_999),
        ("K2", "key 'Bad:10000'", 1), ("T1", "key 'Bad:10000'", 1),
        ("K2", "key 'Bad:10001'", 9_999), ("T1", "key 'Bad:10000'", 19_999),
    ]
    assert sum(count for _, _, count in lines) == 20_000 * 3


def test_the_end_of_an_interval_is_one_timer_armed_by_a_finding(caplog):
    async def scenario():
        log = FindingLog(logging.getLogger("redis_guard.test.findings"), 0.2)
        loop = asyncio.get_running_loop()
        before = len(loop._scheduled)
        log.add(("K2",), _finding("K2", "A"))
        assert log.timer is None and len(loop._scheduled) == before  # the first is logged: nothing to wait for
        for _ in range(3):
            log.add(("K2",), _finding("K2", "B"))
        assert log.timer is not None and len(loop._scheduled) == before + 1
        await asyncio.sleep(0.4)
        assert log.timer is None and not log.groups  # written, and nothing left pending

    with caplog.at_level(logging.INFO, logger="redis_guard.test.findings"):
        asyncio.run(scenario())
    assert [(record.msg["subject"], record.msg["count"]) for record in caplog.records] == [("key 'A'", 1),
                                                                                          ("key 'B'", 3)]

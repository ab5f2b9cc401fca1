"""Log lines: text or JSON, and the policy's findings gathered into few lines.

Text lines are `TIME LEVEL LOGGER[PID]: MESSAGE`. In JSON every line is one object with
`time`, `level`, `logger`, `pid` and `message`; a record that carries structured fields
(`extra={"fields": {...}}`, or a `Fields` message such as a policy finding) has them as keys
of the object rather than as text in the message. Findings are logged by `FindingLog`: per
(rule, mode, outcome, policy, application, command) the first of an interval
(`FINDINGS_INTERVAL`, 10 s) at once, and the others of the interval as one line at its end with
their `count` and a sample key and client (every line has a `count`; summed, they are the
findings, as `redis_guard_policy_findings_total` counts them). A client that breaks a rule
thousands of times a second costs a dictionary update each, not a line each. The end of an
interval is one `call_later` on the event loop, armed by the first finding left out, so
nothing is pending while nothing happens.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import time

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
FORMATS = ("text", "json")
TEXT = "%(asctime)s %(levelname)s %(name)s[%(process)d]: %(message)s"
FINDINGS_INTERVAL = 10.0  # seconds: a finding line per rule, application and command at most twice in each
READY_LOGGER = "redis_guard.ready"


class Fields(dict):
    """A log message made of fields: JSON text in a text log, keys of the object in a JSON log."""

    def __str__(self) -> str:
        return json.dumps(self, ensure_ascii=False)


def fields_of(record: logging.LogRecord) -> dict | None:
    if isinstance(record.msg, Fields):
        return record.msg
    return getattr(record, "fields", None)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        fields = fields_of(record)
        entry = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S") + f".{int(record.msecs):03d}",
            "level": record.levelname,
            "logger": record.name,
            "pid": record.process,
            "message": fields.get("event", "fields") if isinstance(record.msg, Fields) else record.getMessage(),
        }
        if fields:
            entry.update(fields)
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False, default=str)


def setup(level: str = "INFO", form: str = "text", stream=None) -> None:
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if form == "json" else logging.Formatter(TEXT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    # The ready line is what scripts and tests wait for: written at any level.
    logging.getLogger(READY_LOGGER).setLevel(min(logging.INFO, root.level))


class FindingLog:
    """The findings of an interval by group: the first of a group logged at once, the others
    counted, and logged together when the interval ends (the module's docstring)."""

    def __init__(self, logger: logging.Logger, interval: float = FINDINGS_INTERVAL, clock=time.monotonic):
        self.logger = logger
        self.interval = interval
        self.clock = clock
        self.window_end = float("-inf")
        # group -> [findings left out, their sample: (fields of the first one)], this interval
        self.groups: dict[tuple, list] = {}
        self.timer = None

    def add(self, group: tuple, fields, count: int = 1) -> None:
        """`count` findings of `group` (a tuple), the first of them described by `fields()`
        (called only when a line is written: a Fields)."""
        now = self.clock()
        if now >= self.window_end:
            if self.groups:
                self.flush()
            self.window_end = now + self.interval
        seen = self.groups.get(group)
        if seen is None:
            self.groups[group] = seen = [0, None]
            entry = fields()
            entry["count"] = 1
            self.logger.info(entry)
            count -= 1
            if not count:
                return
        if seen[1] is None:
            seen[1] = fields
            if self.timer is None:
                self._arm()
        seen[0] += count

    def _arm(self) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no event loop (a tool, a test): the next finding or `flush` writes them
            return
        self.timer = loop.call_later(max(self.window_end - self.clock(), 0.0), self._timer_fired)

    def _timer_fired(self) -> None:
        self.timer = None
        self.flush()

    def flush(self) -> None:
        """Log what the interval left out, one line per group, and start a new interval."""
        groups, self.groups = self.groups, {}
        self.window_end = float("-inf")
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        for count, fields in groups.values():
            if count:
                entry = fields()
                entry["count"] = count
                entry["seconds"] = self.interval
                self.logger.info(entry)

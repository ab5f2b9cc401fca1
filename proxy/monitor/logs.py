"""Log lines: text or JSON, and a rate limit for the policy's finding lines.

Text lines are `TIME LEVEL LOGGER[PID]: MESSAGE`. In JSON every line is one object with
`time`, `level`, `logger`, `pid` and `message`; a record that carries structured fields
(`extra={"fields": {...}}`, or a `Fields` message such as a policy finding) has them as keys
of the object rather than as text in the message. An audit finding (forwarded: no client sees
it, so a busy client can make thousands a second) is logged only while fewer than
`FINDINGS_PER_SECOND` were logged in the current second; the others are counted (every finding
is in `redis_guard_policy_findings_total` anyway) and one line says how many were left out,
written by the next finding or, when traffic stops, by a short-lived thread (no timer in the
event loop).
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import time

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
FORMATS = ("text", "json")
TEXT = "%(asctime)s %(levelname)s %(name)s[%(process)d]: %(message)s"
FINDINGS_PER_SECOND = 20
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


class FindingLimiter:
    """Lets FINDINGS_PER_SECOND finding lines through per second and counts the rest."""

    def __init__(self, logger: logging.Logger, per_second: int = FINDINGS_PER_SECOND, clock=time.monotonic):
        self.logger = logger
        self.per_second = per_second
        self.clock = clock
        self.lock = threading.Lock()
        self.window_end = float("-inf")
        self.logged = 0
        self.suppressed = 0
        self.flusher = None

    def allow(self) -> bool:
        now = self.clock()
        with self.lock:
            if now >= self.window_end:
                self._report()
                self.window_end = now + 1.0
                self.logged = 0
            if self.logged < self.per_second:
                self.logged += 1
                return True
            self.suppressed += 1
            if self.flusher is None:
                self.flusher = threading.Thread(target=self._flush_later, name="findings-log", daemon=True)
                self.flusher.start()
            return False

    def _report(self) -> None:
        if self.suppressed:
            count, self.suppressed = self.suppressed, 0
            self.logger.info("%d more policy findings not logged (at most %d lines a second; every finding is "
                             "counted in redis_guard_policy_findings_total)", count, self.per_second,
                             extra={"fields": {"event": "findings_suppressed", "suppressed": count}})

    def _flush_later(self) -> None:
        while True:
            time.sleep(1.0)
            with self.lock:
                if not self.suppressed:
                    self.flusher = None
                    return
                if self.clock() >= self.window_end:
                    self._report()
                    self.window_end = self.clock() + 1.0
                    self.logged = 0

    def flush(self) -> None:
        with self.lock:
            self._report()

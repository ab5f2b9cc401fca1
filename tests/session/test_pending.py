"""The sink for replies to commands the policy adds (T1's hidden EXPIRE ... NX): failures are
counted and logged, at most one line per interval, never shown to a client."""

import logging

from proxy import metrics
from proxy.pending import UnseenReplies


class Hidden:
    def __init__(self, request: bytes):
        self.remaining = 1
        self._request = request

    def request(self) -> bytes:
        return self._request


def failures() -> float:
    return metrics.HIDDEN_FAILED._value.get()


def test_failures_are_counted_and_logged_once_per_interval(caplog):
    sink = UnseenReplies()
    before = failures()
    expire = b"*4\r\n$6\r\nEXPIRE\r\n$1\r\nk\r\n$2\r\n60\r\n$2\r\nNX\r\n"
    with caplog.at_level(logging.WARNING, logger="redis_guard.policy"):
        sink.deliver(Hidden(expire), b":1\r\n", 1)
        assert failures() == before and not caplog.records
        sink.deliver(Hidden(expire), b"-ERR NX and XX, GT or LT options at the same time are not compatible\r\n", 1)
        sink.pending_failed(Hidden(expire), b"-ERR connection lost\r\n", False)
        sink.deliver(Hidden(expire), b"-MOVED 3999 127.0.0.1:7002\r\n", 1)
    assert failures() == before + 3
    assert len(caplog.records) == 1 and "EXPIRE" in caplog.records[0].getMessage()
    sink.logged_at -= UnseenReplies.LOG_EVERY
    with caplog.at_level(logging.WARNING, logger="redis_guard.policy"):
        sink.pending_failed(Hidden(expire), b"-ERR connection lost\r\n", False)
    assert "3 command(s)" in caplog.records[-1].getMessage()

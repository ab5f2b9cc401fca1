"""The AUTH brake (proxy/throttle.py) with a clock of its own: the failing connection waits,
exponentially and capped, counted per connection and per (address, user); closes after a few;
forgets; bounded in memory; counted."""

from __future__ import annotations

from proxy import metrics
from proxy.throttle import LoginThrottle

A, B = ("10.0.0.1", 5000), ("10.0.0.2", 5000)


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def throttle(**kw):
    clock = Clock()
    return LoginThrottle(clock=clock, **kw), clock


def test_each_failure_on_a_connection_doubles_its_wait_up_to_the_cap():
    t, clock = throttle(base=0.1, cap=1.0)
    waits = []
    for n in range(1, 9):
        wait = t.failed(A, b"app", n)
        waits.append(round(wait, 3))
        clock.now += wait
    assert waits == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0, 1.0, 1.0]


def test_a_guesser_on_new_connections_is_slowed_per_address_and_user():
    """One guess per connection: each connection's first failure, yet the pair's count grows."""
    t, _ = throttle(base=0.1, cap=1.0)
    waits = [round(t.failed(("10.0.0.1", port), b"app", 1), 3) for port in range(6)]
    assert waits == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0]
    assert t.failed(A, b"other", 1) == 0.1  # another user from the same address: its own count
    assert t.failed(B, b"app", 1) == 0.1  # the same user from another address too


def test_closes_after_a_few_failures_on_one_connection():
    t, _ = throttle(close_after=10)
    assert not any(t.closes(n) for n in range(10)) and t.closes(10) and t.closes(11)


def test_time_forgives():
    t, clock = throttle(base=0.1, cap=1.0, forget_after=60)
    for _ in range(4):
        t.failed(A, b"app", 1)
    clock.now += 61
    assert t.failed(A, b"app", 1) == 0.1  # a minute without failures: a fresh start


def test_memory_is_bounded_also_for_long_user_names():
    t, _ = throttle(size=100)
    for i in range(1000):
        t.failed((f"10.1.{i // 256}.{i % 256}", 1), b"u" * 10_000, 1)
    assert len(t.entries) == 100
    assert all(len(user) <= 64 for _host, user in t.entries)


def test_failures_are_counted_and_logged(caplog):
    t, _ = throttle()
    before = metrics.AUTH_FAILURES._value.get()
    with caplog.at_level("WARNING", logger="redis_guard.auth"):
        t.failed(A, b"app", 1)
        t.failed(A, b"app", 2)
    assert metrics.AUTH_FAILURES._value.get() == before + 2
    lines = [r.getMessage() for r in caplog.records if "failed AUTH attempt" in r.getMessage()]
    assert len(lines) == 1 and "10.0.0.1" in lines[0]  # at most one line every LOG_EVERY seconds

"""The AUTH throttle (proxy/throttle.py) with a clock of its own: per address, exponential,
capped, serialising attempts sent together, forgetting, bounded in memory, counted."""

from __future__ import annotations

import asyncio

import pytest

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


def test_each_failure_in_a_row_doubles_the_wait_up_to_the_cap():
    t, clock = throttle(base=0.1, cap=1.0)
    waits = []
    for _ in range(8):
        wait = t.delay(A)
        waits.append(round(wait, 3))
        clock.now += wait  # the attempt is checked when its turn comes
        t.failed(A)
    assert waits == [0.0, 0.1, 0.2, 0.4, 0.8, 1.0, 1.0, 1.0]


def test_a_client_that_waits_on_its_own_is_not_delayed_twice():
    t, clock = throttle(base=0.1, cap=1.0)
    for _ in range(3):
        clock.now += t.delay(A)
        t.failed(A)
    clock.now += 5
    assert t.delay(A) == 0.0


def test_attempts_sent_together_are_checked_one_after_the_other():
    """Fifty connections guessing at once from one address: the n-th waits for all before it."""
    t, _ = throttle(base=0.1, cap=1.0)
    waits = [t.delay(("10.0.0.1", port)) for port in range(50)]  # the same host, other ports
    assert waits[:5] == pytest.approx([0.0, 0.1, 0.3, 0.7, 1.5])
    assert waits[-1] == pytest.approx(waits[-2] + 1.0)  # capped steps: one guess a second
    assert t.delay(B) == 0.0  # another address is not slowed down


def test_success_forgets_and_time_forgives():
    t, clock = throttle(base=0.1, cap=1.0, forget_after=60)
    for _ in range(4):
        clock.now += t.delay(A)
        t.failed(A)
    clock.now += t.delay(A)
    t.succeeded(A)
    assert A[0] not in t.entries and t.delay(A) == 0.0
    t.failed(A)
    for _ in range(3):
        clock.now += t.delay(A)
        t.failed(A)
    clock.now += 61
    assert t.delay(A) == 0.0  # a minute without failures: a fresh start


def test_memory_is_bounded():
    t, _ = throttle(size=100)
    for i in range(1000):
        t.delay((f"10.1.{i // 256}.{i % 256}", 1))
        t.failed((f"10.1.{i // 256}.{i % 256}", 1))
    assert len(t.entries) == 100


def test_failures_are_counted():
    t, _ = throttle()
    before = metrics.AUTH_FAILURES._value.get()
    t.delay(A)
    t.failed(A)
    t.delay(A)
    t.succeeded(A)
    assert metrics.AUTH_FAILURES._value.get() == before + 1


def test_check_waits_for_the_turn_and_records_the_outcome():
    t = LoginThrottle(base=0.05, cap=1.0)

    async def main():
        loop = asyncio.get_running_loop()
        started = loop.time()
        results = await asyncio.gather(*(t.check(loop, A, lambda: None) for _ in range(3)))
        app = await t.check(loop, A, lambda: "app")
        return results, app, loop.time() - started

    results, app, took = asyncio.run(main())
    assert results == [None, None, None] and app == "app"
    # Each attempt waits 0.05 * 2^(failures - 1) after the one before began: 0.05 + 0.1 + 0.2.
    # (Measured from the first: how long the failures themselves took does not shorten it.)
    assert took >= (0.05 + 0.1 + 0.2) * 0.9
    assert A[0] not in t.entries

"""monitor/counts.py, pure and compiled: a round trip goes into the first bucket whose bound is at
least its seconds (the +Inf bucket past the last), its seconds into the sum, and the sampling
countdown says when it reaches zero; totals add in place. Both twins refuse what they would
otherwise write into blindly: a list, an array of another type code, a histogram of another
size, an index out of range."""

from __future__ import annotations

import bisect
import math
import os
import random
from array import array

import pytest

from proxy.monitor import counts

pytestmark = pytest.mark.compiled_twin  # run again with the pure modules (tests/conftest.py)

TWINS = {"pure": (counts.pure_time_run, counts.pure_add)}
if counts._compiled is not None:
    TWINS["compiled"] = (counts._compiled.time_run, counts._compiled.add)


@pytest.fixture(params=["pure", "compiled"])
def twins(request):
    if request.param not in TWINS:
        if os.environ.get("REDIS_GUARD_EXPECT_COMPILED") == "1" and not counts.compiled.PURE:
            pytest.fail("compiled counts expected (REDIS_GUARD_EXPECT_COMPILED=1) but missing")
        pytest.skip("compiled counts unavailable")
    return TWINS[request.param]


def ticks(left: int) -> array:
    countdown = counts.counters(1)
    countdown[0] = left
    return countdown


EDGES = [(0.0, 0), (0.00005, 0), (0.0001, 0), (0.00010001, 1), (0.0003, 2), (0.004, 5), (5.0, 14), (5.0001, 15),
         (60.0, 15), (-1.0, 0), (math.inf, 15), (math.nan, 15)]


@pytest.mark.parametrize("elapsed, bucket", EDGES, ids=[str(e) for e, _ in EDGES])
def test_a_round_trip_goes_into_the_first_bucket_whose_bound_holds_it(twins, elapsed: float, bucket: int) -> None:
    time_run, _ = twins
    histogram = counts.empty_histogram()
    assert time_run(histogram, elapsed, ticks(5), counts.BOUND_ARRAY) is False
    expected = [0.0] * (len(counts.BOUNDS) + 1)
    expected[bucket] = 1.0
    assert list(histogram[:-1]) == expected
    assert histogram[-1] == elapsed or (math.isnan(elapsed) and math.isnan(histogram[-1]))


def test_the_countdown_says_when_it_reaches_zero(twins) -> None:
    time_run, _ = twins
    histogram, countdown = counts.empty_histogram(), ticks(3)
    assert [time_run(histogram, 0.001, countdown, counts.BOUND_ARRAY) for _ in range(3)] == [False, False, True]
    assert countdown[0] == 0 and histogram[counts.BOUNDS.index(0.001)] == 3 and histogram[-1] == pytest.approx(0.003)


def test_random_round_trips_agree_with_bisect() -> None:
    results = []
    for time_run, _ in TWINS.values():
        rng = random.Random(17)
        histogram, countdown = counts.empty_histogram(), ticks(10 ** 9)
        expected = [0] * (len(counts.BOUNDS) + 1)
        for _ in range(2000):
            elapsed = 10 ** rng.uniform(-6, 1)
            time_run(histogram, elapsed, countdown, counts.BOUND_ARRAY)
            expected[bisect.bisect_left(counts.BOUNDS, elapsed)] += 1
        assert list(histogram[:-1]) == expected
        results.append(list(histogram))
    assert all(result == results[0] for result in results)


def test_totals_add_in_place(twins) -> None:
    _, add = twins
    totals = counts.counters(3)
    add(totals, 0, 14)
    add(totals, 0, 9)
    add(totals, 2, 1)
    add(totals, 1, 2 ** 40)
    assert list(totals) == [23, 2 ** 40, 1]


@pytest.mark.parametrize("histogram, countdown, bounds, error", [
    ([0.0] * 17, None, None, TypeError),  # a list
    (array("q", bytes(8 * 17)), None, None, TypeError),  # counts of another type code
    (array("d", bytes(8 * 16)), None, None, ValueError),  # one bucket short
    (array("d", bytes(8 * 18)), None, None, ValueError),
    (None, array("d", [5.0]), None, TypeError),  # the countdown of another type code
    (None, array("q"), None, IndexError),  # an empty countdown
    (None, None, [0.1, 1.0], TypeError),  # bounds as a list
    (None, None, None, None),
], ids=["list", "int histogram", "short", "long", "float countdown", "empty countdown", "list bounds", "valid"])
def test_time_run_refuses_what_it_would_write_into_blindly(twins, histogram, countdown, bounds, error) -> None:
    time_run, _ = twins
    histogram = counts.empty_histogram() if histogram is None else histogram
    countdown = ticks(5) if countdown is None else countdown
    bounds = counts.BOUND_ARRAY if bounds is None else bounds
    if error is None:
        assert time_run(histogram, 0.001, countdown, bounds) is False
        return
    before = list(histogram)
    with pytest.raises(error):
        time_run(histogram, 0.001, countdown, bounds)
    assert list(histogram) == before and list(countdown) == [5] * len(countdown)


@pytest.mark.parametrize("totals, index, error", [
    ([0, 0, 0], 0, TypeError),
    (array("d", [0.0] * 3), 0, TypeError),
    (counts.counters(3), 3, IndexError),
    (counts.counters(3), -1, IndexError),
    (None, 0, TypeError),
], ids=["list", "floats", "past the end", "negative", "None"])
def test_add_refuses_what_it_would_write_into_blindly(twins, totals, index: int, error) -> None:
    _, add = twins
    with pytest.raises(error):
        add(totals, index, 1)

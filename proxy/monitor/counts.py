"""The monitor's counters as arrays of machine numbers, and the two steps that add to them.

A round-trip histogram is an `array('d')`: a count per bucket of `BOUNDS`, one for +Inf, then
the sum of the seconds; the monitor's totals and its sampling countdown are `array('q')`s. The
event loop's thread adds to them in place, one read at a time: `time_run` (a run's round trip
into its bucket, its seconds into the sum, and the countdown to the next hot-key sample) and
`add`. Compiled (`_compiled_counts.pyx`, cimported by the compiled monitor), each is a few C
stores; the Python list they replaced made an int or a float object for every count. A scrape,
from another thread, copies an array in one C call under the GIL (`list(histogram)`), so it sees
a consistent state, as it did with the lists. The pure twins below are the reference.
"""

from __future__ import annotations

from array import array

from .. import compiled

# Histogram bounds in seconds: a Redis reply takes about 0.1 ms; slow ones up to seconds.
BOUNDS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
BOUND_ARRAY = array("d", BOUNDS)  # what `time_run` is given (compiled, read in place)


def empty_histogram() -> array:
    """An empty round-trip histogram: len(BOUNDS) + 1 counts, then the sum of seconds."""
    return array("d", bytes(8 * (len(BOUNDS) + 2)))


def counters(size: int) -> array:
    return array("q", bytes(8 * size))


def pure_time_run(histogram: array, elapsed: float, ticks: array, bounds: array) -> bool:
    """One run's round trip: counted in the first bucket whose bound is at least `elapsed` (the
    last, +Inf, if none is), added to the sum; `ticks[0]` counts down. True when it reaches 0."""
    _check(bounds, "d", 0)
    _check(histogram, "d", 0)
    _check(ticks, "q", 1)
    if len(histogram) != len(bounds) + 2:
        raise ValueError("a histogram has a count for each bound, one for +Inf and the sum")
    at = 0  # bisect_left(bounds, elapsed), without a call: most replies fall in the first buckets
    for bound in bounds:
        if bound >= elapsed:
            break
        at += 1
    histogram[at] += 1
    histogram[-1] += elapsed
    ticks[0] -= 1
    return ticks[0] == 0


def pure_add(counts: array, index: int, amount: int) -> None:
    if index < 0:
        raise IndexError("counter index out of range")
    _check(counts, "q", index + 1)
    counts[index] += amount


def _check(values, typecode: str, least: int) -> None:
    """The compiled twins' checks: the arrays they write into hold the machine numbers they expect."""
    if type(values) is not array or values.typecode != typecode:
        raise TypeError(f"an array of type code {typecode!r} is needed")
    if len(values) < least:
        raise IndexError("counter index out of range")


_compiled = compiled.load("proxy.monitor._compiled_counts")
time_run = _compiled.time_run if _compiled is not None else pure_time_run
add = _compiled.add if _compiled is not None else pure_add

"""A stretch's order: one byte per command of a pipeline stretch, the number of the part (the
upstream request) it goes to, as a cluster deals a stretch out to its masters. The order says
which part's next command, and so which part's next reply, comes at each place in the client's
order; `runs` cuts it into runs of one part, which the pure reader and reply code walk (their
compiled twins walk the bytes in C: `order.pxd`).
"""

from __future__ import annotations


def runs(order, first: int = 0) -> list:
    """[(part, start, stop)]: each run of equal bytes of `order`, its places counted from `first`."""
    found = []
    count = len(order)
    at = 0
    while at < count:
        part = order[at]
        stop = at + 1
        while stop < count and order[stop] == part:
            stop += 1
        found.append((part, first + at, first + stop))
        at = stop
    return found


def zeroed_order(count: int) -> bytearray:
    """A new order of `count` commands, all part 0's (as a stretch's commands so far are)."""
    return bytearray(count)

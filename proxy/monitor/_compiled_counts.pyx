# cython: language_level=3, boundscheck=False, wraparound=False
"""counts.time_run and counts.add in C: the monitor's per-read counting as stores into the arrays'
machine numbers, without an int or a float object (counts.py holds the pure twins and says what
the arrays are). The arrays' type codes and sizes are checked on every call: a wrong one is a
TypeError, IndexError or ValueError, never a write out of bounds."""

from cpython.array cimport array


cdef extern from "Python.h":
    Py_ssize_t Py_SIZE(object)


cdef inline int _check(array values, char typecode, Py_ssize_t least) except -1:
    if values is None:
        raise TypeError("an array is needed, not None")
    if values.ob_descr.typecode != typecode:
        raise TypeError(f"an array of type code {chr(typecode)!r} is needed")
    if Py_SIZE(values) < least:
        raise IndexError("counter index out of range")
    return 0


cpdef bint time_run(array histogram, double elapsed, array ticks, array bounds) except -1:
    """counts.pure_time_run."""
    cdef Py_ssize_t at = 0, size
    cdef double* counts
    cdef const double* limits
    _check(bounds, b"d", 0)
    _check(histogram, b"d", 0)
    _check(ticks, b"q", 1)
    size = Py_SIZE(bounds)
    if Py_SIZE(histogram) != size + 2:
        raise ValueError("a histogram has a count for each bound, one for +Inf and the sum")
    limits = bounds.data.as_doubles
    while at < size and not (limits[at] >= elapsed):
        at += 1
    counts = histogram.data.as_doubles
    counts[at] += 1
    counts[size + 1] += elapsed
    ticks.data.as_longlongs[0] -= 1
    return ticks.data.as_longlongs[0] == 0


cpdef add(array counts, Py_ssize_t index, long long amount):
    """counts.pure_add."""
    if index < 0:
        raise IndexError("counter index out of range")
    _check(counts, b"q", index + 1)
    counts.data.as_longlongs[index] += amount

# Cimported by the compiled monitor (monitor/live.pxd): its per-read counting as C calls.
from cpython.array cimport array

cpdef bint time_run(array histogram, double elapsed, array ticks, array bounds) except -1
cpdef add(array counts, Py_ssize_t index, long long amount)

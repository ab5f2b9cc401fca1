cimport cython
from proxy.pending cimport Pending
from proxy._compiled_queues cimport queue_head, queue_popleft
from proxy.resp._compiled_replies cimport may_hold_error
from proxy.monitor._compiled_counts cimport add, time_run
from proxy.upstream._compiled_write cimport stamp_clock

cdef class Tally:
    cdef public object name
    cdef public Py_ssize_t n


@cython.locals(size=Py_ssize_t, stamp=tuple, oldest=Pending, slot=Pending, sent=bytes, last=list, now=double,
               began=double, elapsed=double, scan_limit=Py_ssize_t, big=Py_ssize_t, slow_after=double)
cpdef read_from(conn, bytes data, stamps, pending)
@cython.locals(size=Py_ssize_t, big=Py_ssize_t)
cpdef written(data, chunks=*)
@cython.locals(stamp=tuple, last=Pending)
cdef _unanswered(stamps)

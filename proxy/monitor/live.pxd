cimport cython
from proxy.pending cimport Pending
from proxy._compiled_queues cimport queue_head
from proxy.resp._compiled_replies cimport may_hold_error

cdef class Tally:
    cdef public object name
    cdef public Py_ssize_t n


@cython.locals(size=Py_ssize_t, stamp=tuple, oldest=Pending, slot=Pending, sent=bytes, last=list, histogram=list,
               totals=list, ticks=list, now=double, elapsed=double, bound=double, at=Py_ssize_t)
cpdef read_from(conn, bytes data, stamps, pending)
@cython.locals(size=Py_ssize_t)
cpdef written(data, chunks=*)

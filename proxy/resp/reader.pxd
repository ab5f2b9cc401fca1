cimport cython
from proxy.resp._compiled_requests cimport split_requests, split_keeping_ends, pick_requests

@cython.final
cdef class Batch:
    cdef public list commands
    cdef public object raw
    cdef public list _ends
    cdef public object error
    cdef public bytes packed_ends

    cpdef list offsets(self)

    @cython.locals(begin=Py_ssize_t, end=Py_ssize_t, ends=list)
    cpdef span(self, Py_ssize_t start, Py_ssize_t stop)
    @cython.locals(ends=list)
    cpdef list requests_by_part(self, Py_ssize_t first, order, Py_ssize_t parts)


@cython.final
cdef class RequestReader:
    cdef public object _limits
    cdef public list _chunks
    cdef public Py_ssize_t _size
    cdef public object _hiredis
    cdef public bint _fast
    cdef public Py_ssize_t _need
    cdef public bint _failed
    cdef public Py_ssize_t _max_args
    cdef public Py_ssize_t _max_bytes
    cdef public list _ends_out
    cdef public object _unfinished

    @cython.locals(pos=Py_ssize_t, batch=Batch, ends_out=list, packed=bytes)
    cpdef feed_read(self, data)

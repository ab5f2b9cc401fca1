cimport cython

@cython.final
cdef class Batch:
    cdef public list commands
    cdef public object raw
    cdef public list ends
    cdef public object error

    @cython.locals(begin=Py_ssize_t, end=Py_ssize_t)
    cpdef span(self, Py_ssize_t start, Py_ssize_t stop)


cdef class Tally:
    cdef public object name
    cdef public Py_ssize_t n

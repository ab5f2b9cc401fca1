cdef class Pending:
    cdef public object receiver
    cdef public Py_ssize_t remaining
    cdef public object buffered
    cdef public Py_ssize_t buffered_size
    cdef public object conn
    cdef public object sent
    cdef public Py_ssize_t count

cdef class Pending

cdef class Receiver:
    cpdef deliver(self, Pending pending, data, Py_ssize_t done)
    cpdef pending_failed(self, Pending pending, error, bint partial)

cdef class Pending(Receiver):
    cdef public Receiver receiver
    cdef public Py_ssize_t remaining
    cdef public object buffered
    cdef public Py_ssize_t buffered_size
    cdef public object conn
    cdef public object sent
    cdef public Py_ssize_t count

    cdef _fill_pending(self, Receiver receiver, Py_ssize_t remaining, conn, sent)

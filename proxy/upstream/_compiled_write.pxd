# The direct writer's declaration, cimported by the compiled session and upstream connection (their .pxd): a
# reply's or a request's write is then a C call, not a bound method's.

cdef class DirectWriter:
    cdef int fd
    cdef bint clear  # the transport holds no bytes of ours (known without asking it)
    cdef object transport_write, is_closing, buffer_size
    cdef public Py_ssize_t direct, handed  # writes made here, and handed to the transport

    cpdef write(self, data)
    cdef _hand(self, data)


cpdef double stamp_clock() noexcept

cdef class ConnState:
    cdef public object lane
    cdef public object txn
    cdef public object life

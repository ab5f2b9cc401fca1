cimport cython
from proxy.pending cimport Pending

cdef class RoutedPending(Pending):
    cdef public object source
    cdef public Py_ssize_t first
    cdef public object hash_slot
    cdef public object attempts
    cdef public object asking
    cdef public object owner
    cdef public object down_since
    cdef public object down_tries

    @staticmethod
    @cython.locals(entry=RoutedPending)
    cdef RoutedPending of_run(session, Py_ssize_t count, conn, batch, Py_ssize_t first, hash_slot)
    cdef _fill(self, receiver, Py_ssize_t count, conn, source, Py_ssize_t first, hash_slot, owner)

cdef class Part(Pending):
    cdef public object source
    cdef public list runs
    cdef public list chunks
    cdef public Py_ssize_t size
    cdef public object entries

    @cython.locals(size=Py_ssize_t, pos=Py_ssize_t, end=Py_ssize_t, start=Py_ssize_t, stop=Py_ssize_t, pieces=list)
    cpdef list take_replies(self)

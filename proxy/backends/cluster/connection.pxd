cimport cython
from proxy.pending cimport Pending
from proxy.upstream.connection cimport UpstreamConnection
from proxy.session.session cimport Session
from proxy.resp.reader cimport Batch
from proxy._compiled_queues cimport queue_popleft
from proxy.resp._compiled_replies cimport error_among, line_dash

cdef class RoutedPending(Pending):
    cdef public object source
    cdef public Py_ssize_t first
    cdef public Py_ssize_t slot
    cdef public Py_ssize_t attempts
    cdef public bint asking
    cdef public object owner
    cdef public object down_since
    cdef public Py_ssize_t down_tries

    @staticmethod
    @cython.locals(entry=RoutedPending, sent=bytes)
    cdef RoutedPending of_run(Session session, Py_ssize_t count, conn, Batch batch, Py_ssize_t first, Py_ssize_t slot)
    cdef _fill(self, receiver, Py_ssize_t count, conn, source, Py_ssize_t first, Py_ssize_t slot, owner,
               bytes sent)

cdef class Part(Pending):
    cdef public Py_ssize_t first
    cdef public bytearray order
    cdef public Py_ssize_t number
    cdef public object chunks
    cdef public Py_ssize_t size
    cdef public object entries

    @staticmethod
    @cython.locals(part=Part)
    cdef Part of_stretch(scatter, Py_ssize_t count, conn, Py_ssize_t first, bytearray order, Py_ssize_t number,
                         bytes sent)
    cdef _fill_part(self, scatter, Py_ssize_t count, conn, Py_ssize_t first, bytearray order, Py_ssize_t number,
                    bytes sent)
    cpdef bytes replies(self)
    @cython.locals(size=Py_ssize_t, pos=Py_ssize_t, end=Py_ssize_t, count=Py_ssize_t, pieces=list)
    cpdef list take_replies(self, list counts)

cdef class ClusterConnection(UpstreamConnection):
    cdef public object router
    cdef public object error_partial
    cdef public object index
    cdef public Py_ssize_t dash

    @cython.locals(dash=Py_ssize_t)
    cpdef _deliver(self, bytes data, bint catching=*)
    @cython.locals(dash=Py_ssize_t, end=Py_ssize_t)
    cdef Py_ssize_t _catch(self, Pending entry, bytes data, Py_ssize_t pos) except -2

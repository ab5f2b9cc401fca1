cimport cython
from proxy.pending cimport Pending
from proxy.backends.cluster.connection cimport Part, RoutedPending
from proxy.session.session cimport Session
from proxy.resp.reader cimport Batch
from proxy.upstream.connection cimport UpstreamConnection
from proxy._compiled_queues cimport queue_append
from proxy.resp._compiled_replies cimport interleave

cdef object CLOSED

cdef class Scatter(Pending):
    cdef public list runs
    cdef public object front
    cdef public Py_ssize_t at
    cdef public list ready
    cdef public Py_ssize_t ready_size
    cdef public object failed
    cdef public Session session
    cdef public list parts
    cdef public Py_ssize_t left

    @staticmethod
    @cython.locals(scatter=Scatter)
    cdef Scatter of_session(Session session)
    cdef _fill_scatter(self, Session session)
    @cython.locals(part=Part, size=Py_ssize_t, held=Py_ssize_t, chunks=object)
    cpdef deliver(self, Pending entry, data, Py_ssize_t done)
    cpdef pending_failed(self, Pending entry, error, bint partial)
    @cython.locals(part=Part, held=Py_ssize_t, replies=list)
    cpdef _assemble(self)
    cpdef _pass_on(self, Py_ssize_t done)

@cython.locals(scatter=Scatter, counts=list, requests=list, parts=list, number=Py_ssize_t, conn=UpstreamConnection)
cpdef Scatter scatter_stretch(Session session, Batch batch, Py_ssize_t first, bytearray order, list conns,
                              list counts=*)

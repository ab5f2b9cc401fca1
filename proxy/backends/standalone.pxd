cimport cython
from proxy.pending cimport Pending
from proxy.session.session cimport Session
from proxy.backends.route cimport Route
from proxy.upstream.connection cimport UpstreamConnection
from proxy.resp.reader cimport Batch
from proxy._compiled_queues cimport queue_append

cdef class SharedRoute(Route):
    cdef public object pool
    cdef public object index
    cdef public UpstreamConnection conn

    @cython.locals(conn=UpstreamConnection, pending=Pending, count=Py_ssize_t)
    cpdef forward(self, Session session, Batch batch, Py_ssize_t start, Py_ssize_t stop)

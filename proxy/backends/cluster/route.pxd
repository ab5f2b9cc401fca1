cimport cython
from proxy.session.session cimport Session
from proxy.backends.route cimport Route
from proxy.resp.reader cimport Batch
from proxy.upstream.connection cimport UpstreamConnection
from proxy.backends.cluster.connection cimport RoutedPending
from proxy._compiled_queues cimport queue_append
from proxy.resp._compiled_requests cimport zeroed_order
from proxy.backends.cluster._compiled_owners cimport key_owner as key_owner_of, key_owners, owner_parts
from proxy.backends.cluster.scatter cimport scatter_stretch

cdef Py_ssize_t LAST_SLOT
cdef Py_ssize_t MAX_PARTS
cdef Py_ssize_t KEYLESS
cdef object CLOSED

@cython.locals(at=Py_ssize_t)
cpdef Py_ssize_t _next_part(list conns, bytearray order, Py_ssize_t run_from, Py_ssize_t run_to, Py_ssize_t part,
                            conn) except -1

cdef class ClusterRoute(Route):
    cdef public object router
    cdef public object routes
    cdef public object protocol
    cdef public object index
    cdef public frozenset first_arg
    cdef public object slot_table
    cdef public bytearray slot_owner
    cdef public list owner_conns
    cdef public bint replica_reads

    cpdef forward(self, Session session, Batch batch, Py_ssize_t start, Py_ssize_t stop)
    @cython.locals(conn=UpstreamConnection, entry=RoutedPending, found=Py_ssize_t)
    cpdef bint _send_one(self, Session session, Batch batch, Py_ssize_t index) except -1
    @cython.locals(commands=list, slot_owner=bytearray, owner_conns=list, conns=list, order=bytearray, owners=bytes,
                   run_start=Py_ssize_t, index=Py_ssize_t, first=Py_ssize_t, part=Py_ssize_t, at=Py_ssize_t,
                   replica_reads=bint, slot=Py_ssize_t, run_slot=Py_ssize_t, owner=Py_ssize_t, run_owner=Py_ssize_t,
                   remembered=bint, conn=UpstreamConnection, run_conn=UpstreamConnection)
    cpdef _walk(self, Session session, Batch batch, Py_ssize_t start, Py_ssize_t stop)
    @cython.locals(found=tuple, order=bytearray, owners=bytes, counts=list, owner_conns=list, conns=list,
                   owner=Py_ssize_t, conn=UpstreamConnection, slot=Py_ssize_t)
    cpdef bint _send_by_owner(self, Session session, Batch batch, Py_ssize_t start, Py_ssize_t stop) except -1
    @cython.locals(at=Py_ssize_t)
    cpdef _send_stretch(self, Session session, Batch batch, Py_ssize_t first, Py_ssize_t stop, list conns,
                        bytearray order, Py_ssize_t run_start, Py_ssize_t part, UpstreamConnection conn, Py_ssize_t hash_slot)
    @cython.locals(entry=RoutedPending)
    cpdef _send_run(self, Session session, Batch batch, Py_ssize_t start, Py_ssize_t stop, UpstreamConnection conn, Py_ssize_t hash_slot)

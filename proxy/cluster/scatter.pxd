cimport cython
from proxy.pending cimport Pending
from proxy.cluster.connection cimport Part, RoutedPending
from proxy.session.session cimport Session
from proxy.resp.reader cimport Batch

cdef class Scatter(Pending):
    cdef public list runs
    cdef public object front
    cdef public Py_ssize_t at
    cdef public list ready
    cdef public Py_ssize_t ready_size
    cdef public object failed
    cdef public Session session
    cdef public list parts
    cdef public list order
    cdef public Py_ssize_t left

    @cython.locals(part=Part, size=Py_ssize_t, held=Py_ssize_t)
    cpdef deliver(self, Pending entry, data, Py_ssize_t done)
    cpdef pending_failed(self, Pending entry, error, bint partial)
    @cython.locals(part=Part, held=Py_ssize_t, cuts=list, index=Py_ssize_t)
    cpdef _assemble(self)
    cpdef _pass_on(self, Py_ssize_t done)

@cython.locals(scatter=Scatter, part=Part, by_conn=dict, runs_of=list, spans_of=list, counts=list, order=list,
               parts=list, sends=list, ends=list, start=Py_ssize_t, stop=Py_ssize_t, index=Py_ssize_t)
cpdef tuple scatter_runs(Session session, Batch batch, list runs)

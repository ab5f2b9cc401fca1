cimport cython
from proxy.session.session cimport Session
from proxy.resp.reader cimport Batch

cdef class Route:
    cpdef forward(self, Session session, Batch batch, Py_ssize_t start, Py_ssize_t stop)

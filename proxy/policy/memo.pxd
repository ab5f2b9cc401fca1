cimport cython
from proxy.resp._compiled_requests cimport key_class, same_class

cdef class Memo:
    cdef public dict memo
    cdef public object key_classes
    cdef public object shape
    cdef public Py_ssize_t start
    cdef public bytes last_class
    cdef public object last_known
    cdef public dict refusals
    cdef public bytes refused_class
    cdef public object refused_shape
    cdef public object refusal
    cdef public bytes before
    cdef public bytes after

    @cython.locals(found=bytes)
    cpdef bint passed(self, args, state)
    @cython.locals(n=Py_ssize_t)
    cpdef bint fits(self, args, known)
    @cython.locals(found=bytes)
    cpdef object refused(self, args, state)
    cpdef bytes reply(self, bytes key)

@cython.locals(byte=cython.uchar)
cpdef bint printable(bytes key)

cimport cython
from proxy.resp._compiled_requests cimport key_class, same_class

cdef class Memo:
    cdef public dict memo
    cdef public object key_classes
    cdef public object shape
    cdef public Py_ssize_t start
    cdef public bytes last_class
    cdef public object last_known

    @cython.locals(found=bytes)
    cpdef bint passed(self, args, state)
    cpdef bint fits(self, args, known)

cdef class Guard:
    cdef public object plan
    cdef public object action
    cdef public object code
    cdef public bint keys_only
    cdef public Memo memo

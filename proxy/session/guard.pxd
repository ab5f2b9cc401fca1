from proxy.policy.memo cimport Memo

cdef class Guard:
    cdef public object plan
    cdef public object action
    cdef public object code
    cdef public bint keys_only
    cdef public Memo memo

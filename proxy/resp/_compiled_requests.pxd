# Cimported by the compiled request reader (reader.pxd): a read's split and a cluster stretch's
# requests are C calls; so is the cluster route's new order, and a key's class in the session's
# loop and the memo (session.pxd, policy/memo.pxd).

cpdef Py_ssize_t split_requests(object data, Py_ssize_t max_args, Py_ssize_t max_bytes, list commands) except -1
cpdef Py_ssize_t split_keeping_ends(object data, Py_ssize_t max_args, Py_ssize_t max_bytes, list commands,
                                    list ends_out) except -1
cpdef list pick_requests(bytes raw, ends, Py_ssize_t first, order, Py_ssize_t parts, list commands=*)
cpdef bytearray zeroed_order(Py_ssize_t count)
cpdef bytes key_class(bytes key, table)
cpdef bint same_class(bytes key, table, kept) except -1

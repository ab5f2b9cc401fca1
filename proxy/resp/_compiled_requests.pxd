# Cimported by the compiled request reader (reader.pxd): a read's split is a C call.

cpdef Py_ssize_t split_requests(object data, Py_ssize_t max_args, Py_ssize_t max_bytes, list commands) except -1

# The compiled RESP modules' view of a stretch's order (order.py): its bytes and its length,
# for a bytes or a bytearray. Inline, cimported by _compiled_requests and _compiled_replies;
# order.py itself is not compiled.
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE


cdef inline const unsigned char* order_bytes(object order, Py_ssize_t* count, str user) except NULL:
    if type(order) is bytearray:
        count[0] = PyByteArray_GET_SIZE(order)
        return <const unsigned char*> PyByteArray_AS_STRING(order)
    if type(order) is bytes:
        count[0] = PyBytes_GET_SIZE(order)
        return <const unsigned char*> PyBytes_AS_STRING(order)
    raise TypeError(f"{user} needs a bytes or bytearray order, not {type(order).__name__}")

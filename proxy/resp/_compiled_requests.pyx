# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Compiled twin of the request reader's fast path: canonical requests cut from a read, in C.

`split_requests(data, max_args, max_bytes)` takes the leading run of requests in `data` that are
in the one shape every Redis client library sends, `*N\r\n` then N times `$L\r\n`, L bytes,
`\r\n` (digits only, no sign, no leading zero), each whole in `data`, at most `max_args`
arguments, `max_bytes` bytes and a count below 1,000,000 (the reader's huge-header guard); it
returns `(commands, ends, pos)`: the arguments of each (lists of bytes, as hiredis gives them),
the offset just past each, and the offset where it stopped. It stops at the first request it
cannot vouch for, or at a partial one, and leaves everything from there to the Python reader
(proxy/resp/reader.py), which is the reference: the shape accepted here is a subset of what its
fast path accepts, cut at the same offsets into the same arguments, so handing the rest over at
a request boundary reads what the Python reader reads. Each request is checked whole before
anything is allocated for it, so a header never makes room for data that has not come.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.list cimport PyList_New, PyList_SET_ITEM
from cpython.ref cimport Py_INCREF


cdef inline Py_ssize_t _number(const unsigned char* s, Py_ssize_t i, Py_ssize_t n, int max_digits,
                               Py_ssize_t* value) noexcept nogil:
    """Canonical digits at s[i:] followed by CRLF: the offset past the LF, or -1."""
    cdef Py_ssize_t start = i
    cdef Py_ssize_t v = 0
    while i < n and 48 <= s[i] <= 57:
        if i - start == max_digits:
            return -1
        v = v * 10 + (s[i] - 48)
        i += 1
    if i == start or i + 1 >= n or s[i] != 13 or s[i + 1] != 10:
        return -1
    if s[start] == 48 and i - start > 1:  # a leading zero: not how Redis or a client writes it
        return -1
    value[0] = v
    return i + 2


def split_requests(object data, Py_ssize_t max_args, Py_ssize_t max_bytes):
    if type(data) is not bytes:  # a transport's bytearray or memoryview: the Python reader takes it
        return [], [], 0
    cdef const unsigned char* s = <const unsigned char*> PyBytes_AS_STRING(data)
    cdef Py_ssize_t n = PyBytes_GET_SIZE(data)
    cdef Py_ssize_t pos = 0, p, first, count, length, k
    cdef list commands = []
    cdef list ends = []
    cdef list args
    while pos < n:
        if s[pos] != 42:  # '*'
            break
        first = _number(s, pos + 1, n, 6, &count)
        if first < 0 or count < 1 or count > max_args:
            break
        p = first
        k = 0
        while k < count:  # the whole request is here and canonical, before anything is made of it
            if p >= n or s[p] != 36:  # '$'
                p = -1
                break
            p = _number(s, p + 1, n, 9, &length)
            if p < 0:
                break
            p += length + 2
            if p > n or s[p - 2] != 13 or s[p - 1] != 10:
                p = -1
                break
            k += 1
        if p < 0 or p - pos > max_bytes:
            break
        args = PyList_New(count)
        p = first
        for k in range(count):
            p = _number(s, p + 1, n, 9, &length)
            item = PyBytes_FromStringAndSize(<const char*> s + p, length)
            Py_INCREF(item)  # the list steals a reference
            PyList_SET_ITEM(args, k, item)
            p += length + 2
        commands.append(args)
        ends.append(p)
        pos = p
    return commands, ends, pos

# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Compiled twin of the request reader's fast path: canonical requests cut from a read, in C.

`split_requests(data, max_args, max_bytes, commands)` takes the leading run of requests in
`data` that are in the one shape every Redis client library sends, `*N\r\n` then N times
`$L\r\n`, L bytes, `\r\n` (digits only, no sign, no leading zero), each whole in `data`, at
most `max_args` arguments, `max_bytes` bytes and a count below 1,000,000 (the reader's
huge-header guard); it appends the arguments of each to `commands` as a tuple of bytes, and
returns the offset where it stopped (an int: no tuple to make and take apart for each read). A
tuple, not a list as hiredis gives them (the Python reader makes tuples of those): one
allocation, where a list is two (the object and its array of items), and it comes from free
lists of 2,000 a size, where lists have one of 80, fewer than a cluster's stretches keep alive
until their replies. It stops at the first request it cannot vouch for, or at a partial one,
and leaves everything from there to the Python reader (proxy/resp/reader.py), which is the
reference: the shape accepted here is a subset of what its fast path accepts, cut at the same
offsets into the same arguments, so handing the rest over at a request boundary reads what the
Python reader reads. Each request is checked whole before anything is allocated for it, so a
header never makes room for data that has not come; the check keeps where its first arguments
are, so their headers are read once. A command's name is the proxy's own object for it when it
is one the proxy's tables know (`use_command_names`, reader.COMMAND_NAMES): the recent ones are
kept in a small table by their bytes, so a name costs a compare, not an allocation and a hash.
Where each command ends is kept by `split_keeping_ends(data, max_args, max_bytes, commands,
ends_out)` alone, when it took from two to 256 commands: the one item of the list `ends_out`
becomes their ends, C integers packed in one bytes object (a cluster client's reader: a
pipeline dealt out to its masters is copied by them, `pick_requests`). Otherwise they are found
again when asked for (`request_ends`, or `pick_requests` without `ends`): the common read is
forwarded whole, and an offset a command would cost an integer object.

`pick_requests(raw, ends, first, order, parts, commands)` is reader.pure_pick_requests's twin
(what `Batch.requests_by_part` returns): the same list of bytes, each part's commands copied once.
`ends` may be the split's packed ends. Without `ends`, each command's end comes from the size of
its arguments written canonically, checked against the bytes (or read from them when the check
fails): the work the packed ends save (benchmarks/README.md, "Figures behind the code").
`zeroed_order(count)` is order.zeroed_order's (a cluster route's new stretch).
`request_ends(raw)` is reader.request_ends's (what `Batch.offsets` finds for a split's batch).

(A cluster stretch's keys' slots and owners are backends/cluster/_compiled_owners.pyx's.)

`key_class(key, table)` is `bytes.translate(key, table)` (the policy's key classes,
policy/keyclass.py, looked up for every checked command): one table read a byte, where the
built-in's loop also tracks whether anything changed. `same_class(key, table, kept)` is
`key_class(key, table) == kept` without making the class (the one a client's last key had).
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_FromStringAndSize, PyByteArray_GET_SIZE
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE, PyList_New, PyList_SET_ITEM
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_GET_SIZE, PyTuple_New, PyTuple_SET_ITEM
from cpython.dict cimport PyDict_GetItem
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from cpython.ref cimport PyObject, Py_INCREF, Py_XDECREF
from libc.string cimport memcmp, memcpy, memset

from proxy.resp.order cimport order_bytes


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


cdef dict _known_names = {}  # reader.COMMAND_NAMES: the objects the proxy's tables are keyed by
cdef PyObject* _recent_names[256]  # some of them, by a hash of their bytes (NULL: none yet)


def use_command_names(dict names):
    """The command names to hand out as these objects (a dict: name -> the object itself)."""
    global _known_names
    _known_names = names
    for slot in range(256):
        Py_XDECREF(_recent_names[slot])
        _recent_names[slot] = NULL


cdef inline object _name(const unsigned char* s, Py_ssize_t length):
    """The command name at s: the proxy's object when it knows the name, else a new one."""
    cdef Py_ssize_t slot
    cdef PyObject* kept
    cdef PyObject* known
    if length == 0 or length > 32:
        return PyBytes_FromStringAndSize(<const char*> s, length)
    slot = (length * 31 + s[0] * 7 + s[length - 1]) & 255
    kept = _recent_names[slot]
    if kept != NULL and PyBytes_GET_SIZE(<object> kept) == length and \
            memcmp(PyBytes_AS_STRING(<object> kept), s, length) == 0:
        return <object> kept
    name = PyBytes_FromStringAndSize(<const char*> s, length)
    known = PyDict_GetItem(_known_names, name)
    if known == NULL:
        return name
    Py_INCREF(<object> known)
    Py_XDECREF(kept)
    _recent_names[slot] = known
    return <object> known


cdef enum:
    KEPT_ARGS = 16  # arguments whose places the check keeps for the split (more: found again)
    KEPT_ENDS = 256  # command ends a split hands out packed (a read of more: none)


cdef inline Py_ssize_t _request_end(const unsigned char* s, Py_ssize_t n, Py_ssize_t pos,
                                    Py_ssize_t* count, Py_ssize_t* starts, Py_ssize_t* lengths) noexcept nogil:
    """The offset just past the canonical request that starts at s[pos:] and is whole in s[:n]
    (its argument count in `count`), or -1. With `starts` (not NULL), the offset and length of
    each of its first KEPT_ARGS arguments go there and in `lengths`."""
    cdef Py_ssize_t p, k, length
    if pos >= n or s[pos] != 42:  # '*'
        return -1
    p = _number(s, pos + 1, n, 6, count)
    if p < 0:
        return -1
    k = 0
    while k < count[0]:
        if p >= n or s[p] != 36:  # '$'
            return -1
        p = _number(s, p + 1, n, 9, &length)
        if p < 0:
            return -1
        if starts != NULL and k < KEPT_ARGS:
            starts[k] = p
            lengths[k] = length
        p += length + 2
        if p > n or s[p - 2] != 13 or s[p - 1] != 10:
            return -1
        k += 1
    return p


# _split's two shapes, made by Cython from one source: without the ends (char) and keeping them
# (short). The plain one, a standalone client's, has no trace of the ends: one `if` on a pointer
# there cost instructions on every command, as the compiler laid the loop out otherwise.
ctypedef fused Keeping:
    char
    short


cdef inline Py_ssize_t _split(Keeping keeping, object data, Py_ssize_t max_args, Py_ssize_t max_bytes,
                              list commands, Py_ssize_t* ends, Py_ssize_t* taken) except -1:
    """split_requests, which keeping the ends (`ends`: room for KEPT_ENDS) also notes where the
    first commands end; `taken` gets how many commands it took."""
    if commands is None:
        raise TypeError("split_requests needs a list for the commands, not None")
    if type(data) is not bytes:  # a transport's bytearray or memoryview: the Python reader takes it
        return 0
    cdef const unsigned char* s = <const unsigned char*> PyBytes_AS_STRING(data)
    cdef Py_ssize_t n = PyBytes_GET_SIZE(data)
    cdef Py_ssize_t pos = 0, p, count, k, end
    cdef Py_ssize_t length = 0
    cdef Py_ssize_t starts[KEPT_ARGS]
    cdef Py_ssize_t lengths[KEPT_ARGS]
    cdef Py_ssize_t split = 0  # (commands taken, when keeping the ends)
    cdef tuple args
    while pos < n:
        # The whole request is here and canonical, before anything is made of it; the places of
        # its arguments are kept on the way (a long one's are found again after the first few).
        end = _request_end(s, n, pos, &count, starts, lengths)
        if end < 0 or count < 1 or count > max_args or end - pos > max_bytes:
            break
        args = PyTuple_New(count)
        p = 0
        for k in range(count):
            if k < KEPT_ARGS:
                p = starts[k]
                length = lengths[k]
            else:
                p = _number(s, p + length + 3, n, 9, &length)
            item = _name(s + p, length) if k == 0 else PyBytes_FromStringAndSize(<const char*> s + p, length)
            Py_INCREF(item)  # the tuple steals a reference
            PyTuple_SET_ITEM(args, k, item)
        commands.append(args)
        if Keeping is short:
            if split < KEPT_ENDS:
                ends[split] = end
            split += 1
        pos = end
    if Keeping is short:
        taken[0] = split
    return pos


cpdef Py_ssize_t split_requests(object data, Py_ssize_t max_args, Py_ssize_t max_bytes, list commands) except -1:
    return _split(<char> 0, data, max_args, max_bytes, commands, NULL, NULL)


cpdef Py_ssize_t split_keeping_ends(object data, Py_ssize_t max_args, Py_ssize_t max_bytes, list commands,
                                    list ends_out) except -1:
    """split_requests, and where each command ends in `ends_out` (a list of one item, None
    before), when it took from two to KEPT_ENDS commands."""
    cdef Py_ssize_t ends[KEPT_ENDS]
    cdef Py_ssize_t taken = 0
    cdef Py_ssize_t pos
    if ends_out is None or PyList_GET_SIZE(ends_out) != 1:
        raise TypeError("split_keeping_ends needs a list of one item for the ends")
    pos = _split(<short> 0, data, max_args, max_bytes, commands, ends, &taken)
    if 1 < taken <= KEPT_ENDS:
        ends_out[0] = PyBytes_FromStringAndSize(<const char*> ends, taken * sizeof(Py_ssize_t))
    return pos


def request_ends(bytes raw not None):
    """reader.request_ends, in C: the offset just past each request of `raw`, canonical requests
    only (what split_requests vouched for)."""
    cdef const unsigned char* s = <const unsigned char*> PyBytes_AS_STRING(raw)
    cdef Py_ssize_t n = PyBytes_GET_SIZE(raw)
    cdef Py_ssize_t pos = 0, count
    cdef list ends = []
    while pos < n:
        pos = _request_end(s, n, pos, &count, NULL, NULL)
        if pos < 0:
            raise ValueError("not canonical requests")
        ends.append(pos)
    return ends


cdef inline Py_ssize_t _digits(Py_ssize_t value) noexcept nogil:
    cdef Py_ssize_t count = 1
    while value >= 10:
        value = value // 10
        count += 1
    return count


cdef inline Py_ssize_t _encoded_size(object args) noexcept:
    """The size of `args` written as a canonical request (as the split found it), -1 when it is
    not a tuple (or a list) of bytes."""
    cdef Py_ssize_t count, k, size, length
    cdef object arg
    cdef bint is_tuple = type(args) is tuple
    if not is_tuple and type(args) is not list:
        return -1
    count = PyTuple_GET_SIZE(args) if is_tuple else PyList_GET_SIZE(args)
    size = 3 + _digits(count)  # *N CRLF
    for k in range(count):
        arg = <object> (PyTuple_GET_ITEM(args, k) if is_tuple else PyList_GET_ITEM(args, k))
        if type(arg) is not bytes:
            return -1
        length = PyBytes_GET_SIZE(arg)
        size += 5 + _digits(length) + length  # $L CRLF, the bytes, CRLF
    return size


cdef inline Py_ssize_t _end_of(const unsigned char* s, Py_ssize_t n, Py_ssize_t start, list commands,
                               Py_ssize_t index) noexcept:
    """Where the request at s[start:] ends (-1: none whole there). A batch of the split's is its
    commands written canonically: their sizes say it without the headers read again, checked
    against the request's first and last bytes; anything else is read."""
    cdef Py_ssize_t size, args
    if commands is not None and index < PyList_GET_SIZE(commands):
        size = _encoded_size(<object> PyList_GET_ITEM(commands, index))
        if size > 0 and start + size <= n and s[start] == 42 and s[start + size - 2] == 13 and s[start + size - 1] == 10:
            return start + size
    return _request_end(s, n, start, &args, NULL, NULL)


cdef enum:
    FOUND_ON_STACK = 64  # a stretch's command ends kept without an allocation


cpdef list pick_requests(bytes raw, ends, Py_ssize_t first, order, Py_ssize_t parts, list commands=None):
    """reader.pure_pick_requests, in C: the part sizes first, then one copy of each command.
    `ends`: a list of offsets, the split's packed ends (bytes), or None (a batch of the split's,
    whose `commands` may be given): each command's end is found again (`_end_of`). (cpdef: the
    compiled reader's call is a C call, _compiled_requests.pxd.)"""
    cdef Py_ssize_t sizes[256]
    cdef char* into[256]  # where each part's next command goes
    cdef Py_ssize_t found_here[FOUND_ON_STACK]
    cdef const unsigned char* taken
    cdef const unsigned char* s
    cdef Py_ssize_t n
    cdef Py_ssize_t count, at, begin, start, end, part
    cdef Py_ssize_t* found = found_here
    cdef const Py_ssize_t* packed = NULL
    cdef list out
    cdef bytes piece
    if raw is None:
        raise TypeError("pick_requests() needs the batch's bytes, not None")
    s = <const unsigned char*> PyBytes_AS_STRING(raw)
    n = PyBytes_GET_SIZE(raw)
    taken = order_bytes(order, &count, "pick_requests")
    if parts < 0 or parts > 256 or first < 0:
        raise IndexError("parts or commands out of range")
    if type(ends) is bytes:  # the split's packed ends
        if (first + count) * <Py_ssize_t> sizeof(Py_ssize_t) > PyBytes_GET_SIZE(ends):
            raise IndexError("parts or commands out of range")
        packed = <const Py_ssize_t*> PyBytes_AS_STRING(ends)
        begin = packed[first - 1] if first else 0
        if begin < 0 or begin > n:
            raise IndexError("list index out of range")
    elif ends is None:
        begin = 0
        for at in range(first):
            begin = _end_of(s, n, begin, commands, at)
            if begin < 0:
                raise IndexError("commands out of range")
    else:
        if first + count > PyList_GET_SIZE(ends):
            raise IndexError("parts or commands out of range")
        begin = <Py_ssize_t> ends[first - 1] if first else 0
    if count > FOUND_ON_STACK:
        found = <Py_ssize_t*> PyMem_Malloc(count * sizeof(Py_ssize_t))
        if found == NULL:
            raise MemoryError()
    try:
        for part in range(parts):
            sizes[part] = 0
        start = begin
        for at in range(count):
            if packed != NULL:
                end = packed[first + at]
            elif ends is None:
                end = _end_of(s, n, start, commands, first + at)
                if end < 0:
                    raise IndexError("commands out of range")
            else:
                end = <Py_ssize_t> <object> PyList_GET_ITEM(<list> ends, first + at)
            if taken[at] >= parts or end < start or end > n:
                raise IndexError("list index out of range")
            found[at] = end
            sizes[taken[at]] += end - start
            start = end
        out = PyList_New(parts)
        for part in range(parts):
            piece = PyBytes_FromStringAndSize(NULL, sizes[part])
            Py_INCREF(piece)  # the list steals a reference
            PyList_SET_ITEM(out, part, piece)
            into[part] = PyBytes_AS_STRING(piece)
        start = begin
        for at in range(count):
            part = taken[at]
            memcpy(into[part], s + start, found[at] - start)
            into[part] += found[at] - start
            start = found[at]
        return out
    finally:
        if found != found_here:
            PyMem_Free(found)


cpdef bytearray zeroed_order(Py_ssize_t count):
    """order.zeroed_order, without a call of the bytearray type (an int object, argument parsing)."""
    cdef bytearray order
    if count < 0:
        raise ValueError("an order of fewer than no commands")
    order = PyByteArray_FromStringAndSize(NULL, count)
    memset(PyByteArray_AS_STRING(order), 0, count)
    return order


cpdef bytes key_class(bytes key, table):
    """bytes.translate(key, table), in C for the usual table of 256 bytes (None: the key itself).
    (cpdef: the compiled session's and memo's call is a C call.)"""
    cdef const unsigned char* s
    cdef const unsigned char* t
    cdef unsigned char* into
    cdef Py_ssize_t n, i
    cdef bytes out
    if key is None:
        raise TypeError("key_class() needs bytes, not None")
    if table is None:
        return key
    if type(table) is not bytes or PyBytes_GET_SIZE(table) != 256:
        return key.translate(table)  # (its errors, and the buffers it takes)
    n = PyBytes_GET_SIZE(key)
    out = PyBytes_FromStringAndSize(NULL, n)
    s = <const unsigned char*> PyBytes_AS_STRING(key)
    t = <const unsigned char*> PyBytes_AS_STRING(table)
    into = <unsigned char*> PyBytes_AS_STRING(out)
    for i in range(n):
        into[i] = t[s[i]]
    return out


cpdef bint same_class(bytes key, table, kept) except -1:
    """key_class(key, table) == kept, without making the class: a byte compared as it is read,
    up to the first that differs (kept: the class a client's last key had, or None). (cpdef: the
    compiled session's and memo's call is a C call.)"""
    cdef const unsigned char* s
    cdef const unsigned char* t
    cdef const unsigned char* k
    cdef Py_ssize_t n, i
    if key is None:
        raise TypeError("same_class() needs bytes, not None")
    if kept is None:
        return False
    if table is None or type(table) is not bytes or PyBytes_GET_SIZE(table) != 256 or type(kept) is not bytes:
        return key_class(key, table) == kept
    n = PyBytes_GET_SIZE(key)
    if PyBytes_GET_SIZE(kept) != n:
        return False
    s = <const unsigned char*> PyBytes_AS_STRING(key)
    t = <const unsigned char*> PyBytes_AS_STRING(table)
    k = <const unsigned char*> PyBytes_AS_STRING(kept)
    for i in range(n):
        if t[s[i]] != k[i]:
            return False
    return True

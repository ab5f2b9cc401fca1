# The compiled reply splitter's declaration, cimported by the compiled upstream connections
# (upstream/connection.pxd, cluster/connection.pxd): their per-read `take` is then a C call,
# without a bound method's argument parsing and two int objects per reply. The Scatter's
# interleave (cluster/scatter.pxd) is a C call too, and so is the monitor's look for error replies
# in every upstream read (monitor/live.pxd).

cdef struct Frame:
    Py_ssize_t count  # the enclosing frame's remaining elements (0: top level)
    int kind  # the kind of this frame


cdef class ReplySplitter:
    cdef int _state
    cdef Py_ssize_t _left
    cdef bytes _partial
    cdef Py_ssize_t _top  # elements still expected by the innermost open aggregate; 0 at top level
    cdef bint _attr  # a top-level attribute was consumed; its value has not
    cdef Frame* _frames  # the open aggregates, innermost last
    cdef Py_ssize_t _depth
    cdef Py_ssize_t _capacity

    cpdef take(self, data, Py_ssize_t start, Py_ssize_t want)
    cdef object _cut(self, data, Py_ssize_t start, Py_ssize_t want, Py_ssize_t* end_out,
                     Py_ssize_t* done_out, str caller)
    cdef Py_ssize_t _scan(self, bytes data, Py_ssize_t start, Py_ssize_t want,
                          Py_ssize_t* done_out, Py_ssize_t* pushes_out) except -1
    cdef int _push(self, Py_ssize_t count, int kind) except -1
    cdef int _value_done(self) except -1
    cdef int _close_frames(self) except -1
    cdef int _keep_header(self, bytes data, Py_ssize_t pos) except -1
    cdef void _reset(self) noexcept


cpdef bytes interleave(list parts, order)
cpdef bint may_hold_error(bytes data) except -1
cpdef Py_ssize_t line_dash(bytes data, Py_ssize_t pos) except -2
cpdef bint error_among(bytes data, Py_ssize_t start, Py_ssize_t count) except -1

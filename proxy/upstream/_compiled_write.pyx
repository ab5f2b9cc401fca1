# cython: language_level=3, boundscheck=False, wraparound=False
"""Bytes written to a connection's socket by one system call while its transport holds none.

uvloop's `transport.write` buffers the bytes, tries to write them, clears its buffer and checks
its flow control: more instructions a write than the session spends deciding where a GET goes
(benchmarks/README.md, "Figures behind the code"). `DirectWriter.write` does what that path does when it succeeds at once, one `send`,
and hands everything else to the transport: data that is not `bytes`, a write while the transport
still holds earlier bytes (order), a closing transport (it decides what a closed connection gets),
and whatever `send` did not take (a short write, EAGAIN, an error, which the transport then meets
and reports as it always did). Once the transport holds bytes, writes go to it until it has
written them all. So every write to the connection must go through its writer.

The descriptor stays the connection's while the transport is not closing: uvloop sets `_closing`
before it schedules `connection_lost`, and closes the descriptor only after `connection_lost` has
returned; `is_closing()` is asked before every direct write. There is no pure twin: without this
module the connection calls `transport.write`, which is what this falls back to
(`proxy.upstream.connection.writers` chooses).
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.time cimport PyTime_AsSecondsDouble, PyTime_PerfCounterRaw

cdef extern from "<sys/socket.h>" nogil:
    ssize_t send(int fd, const void* buf, size_t count, int flags)
    enum: MSG_NOSIGNAL
    enum: MSG_DONTWAIT


cdef class DirectWriter:
    """`write(data)` for one connection: direct while the transport's buffer is empty (its
    fields: the .pxd, which the compiled session cimports to call `write` in C)."""

    def __cinit__(self, int fd, transport_write, is_closing, buffer_size):
        self.fd = fd
        self.clear = True
        self.transport_write = transport_write
        self.is_closing = is_closing
        self.buffer_size = buffer_size

    cpdef write(self, data):
        cdef Py_ssize_t size, sent
        if type(data) is not bytes or self.is_closing():
            self._hand(data)
            return
        if not self.clear:
            if self.buffer_size():
                self._hand(data)
                return
            self.clear = True
        size = PyBytes_GET_SIZE(data)
        if size == 0:
            return
        sent = send(self.fd, PyBytes_AS_STRING(data), <size_t>size, MSG_NOSIGNAL | MSG_DONTWAIT)
        if sent == size:
            self.direct += 1
            return
        # Whatever was not taken goes to the transport, which retries, buffers or reports the
        # error as it would have; after it, so does every write until its buffer is empty. The
        # rest as a view: a large reply's tail is not copied (the transport takes buffers).
        self._hand(data if sent <= 0 else memoryview(data)[sent:])

    cdef _hand(self, data):
        # The transport may keep part of it: the next write asks it before writing here.
        self.clear = False
        self.handed += 1
        self.transport_write(data)


cpdef double stamp_clock() noexcept:
    """time.perf_counter(), in C: the clock of a connection's write stamps (the monitor times each
    read's oldest run from its write's stamp). A C call from the compiled connection, once per
    upstream write, without a Python call and a float object."""
    return PyTime_AsSecondsDouble(PyTime_PerfCounterRaw())

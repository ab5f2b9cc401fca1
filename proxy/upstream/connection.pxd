cimport cython
from proxy.pending cimport Pending
from proxy.resp._compiled_replies cimport ReplySplitter as CompiledSplitter
from proxy._compiled_queues cimport queue_append, queue_head, queue_popleft
from proxy.monitor.live cimport read_from, written
from proxy.upstream._compiled_write cimport DirectWriter, stamp_clock

cdef class UpstreamConnection


cdef class EndOfTick:
    cdef public list waiting
    cdef public object callback

    @cython.locals(conn=UpstreamConnection, at=Py_ssize_t, waiting=list)
    cpdef flush(self)


cdef class UpstreamConnection:
    cdef public object address
    cdef public object label
    cdef public object loop
    cdef public object transport
    cdef public object write
    cdef public DirectWriter writer
    cdef public object state
    cdef public object pending
    cdef public object splitter
    cdef public list out
    cdef public bint flush_scheduled
    cdef public EndOfTick tick
    cdef public bint write_paused
    cdef public object blocked_sessions
    cdef public object read_paused_by
    cdef public object on_close
    cdef public object close_reason
    cdef public object refused
    cdef public object startup
    cdef public object role
    cdef public object sockname
    cdef public object db
    cdef public object protocol
    cdef public object upstream
    cdef public object owner
    cdef public object refusal
    cdef public object stamps
    cdef public object stamp
    cdef public bint close_asked
    cdef public object pushes_to
    cdef public object pushes
    cdef public double request_timeout
    cdef public object deadline_timer
    cdef public object deadline_mark
    cdef public double deadline_since
    cdef public object timeout_error
    cdef public bint relogged

    @cython.locals(tick=EndOfTick)
    cpdef send(self, data, pending)
    cpdef _write_out(self)
    @cython.locals(writer=DirectWriter)
    cpdef _to_upstream(self, data)
    @cython.locals(entry=Pending, pos=Py_ssize_t, size=Py_ssize_t, end=Py_ssize_t, done=Py_ssize_t,
                   splitter=CompiledSplitter)
    cpdef _deliver(self, bytes data, bint catching=*)
    cdef Py_ssize_t _catch(self, Pending entry, bytes data, Py_ssize_t pos) except -2


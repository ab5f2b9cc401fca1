cimport cython
from proxy.pending cimport Pending, Receiver
from proxy.resp.reader cimport Batch, RequestReader
from proxy.monitor.live cimport Tally
from proxy.session.states cimport ConnState
from proxy.policy.memo cimport Memo
from proxy.session.guard cimport Guard
from proxy.upstream._compiled_write cimport DirectWriter
from proxy._compiled_queues cimport queue_head, queue_popleft
from proxy.resp._compiled_requests cimport key_class, same_class

# Declared ahead of the cimport below, whose .pxd cimports it back (a route's forward takes a Session).
cdef class Session(Receiver)
from proxy.backends.route cimport Route

cdef class Session(Receiver):
    cdef public object proxy
    cdef public object backend
    cdef public object loop
    cdef public object transport
    cdef public object client_write
    cdef public DirectWriter writer
    cdef public object peer
    cdef public RequestReader reader
    cdef public object queue
    cdef public Py_ssize_t inflight
    cdef public ConnState state
    cdef public object db
    cdef public object protocol
    cdef public object spread
    cdef public Route route
    cdef public object own
    cdef public object stream
    cdef public object resume_at
    cdef public object waiting_for
    cdef public bint input_ended
    cdef public bint write_paused
    cdef public set reading_paused
    cdef public set waiting_upstreams
    cdef public Py_ssize_t held_bytes
    cdef public Py_ssize_t buffer_limit
    cdef public Py_ssize_t output_limit
    cdef public Py_ssize_t reply_est
    cdef public Py_ssize_t reply_acc
    cdef public Py_ssize_t small_reply
    cdef public Py_ssize_t units_out
    cdef public Py_ssize_t reads
    cdef public object policy_state
    cdef public object after_exec
    cdef public object engine
    cdef public dict good_keys
    cdef public object key_classes
    cdef public bytes good_class
    cdef public object shadow
    cdef public object plans
    cdef public dict dispatch
    cdef public object handlers
    cdef public object unknown
    cdef public object app
    cdef public object locked
    cdef public object login_result
    cdef public object verifying
    cdef public int auth_failures
    cdef public object extra
    cdef public object unpaired
    cdef public object queued_effects
    cdef public bint replies_unsure
    cdef public int stream_ends
    cdef public object pubsub
    cdef public bint collecting
    cdef public object local_out
    cdef public object last_name
    cdef public object last_sub

    @cython.locals(batch=Batch, commands=list, tally=Tally, guard=Guard, units=Py_ssize_t)
    cpdef data_received(self, data)
    @cython.locals(commands=list, count=Py_ssize_t, start=Py_ssize_t, budget=Py_ssize_t, tally=Tally, guard=Guard,
                   dispatch=dict, units=Py_ssize_t, memo=Memo, names=dict)
    cpdef _run(self, Batch batch, Py_ssize_t index)
    @cython.locals(pending=tuple, rejected=dict, counts=dict, out=list)
    cpdef answer_refused(self, refusal, args, bytes reply)
    @cython.locals(est=Py_ssize_t, left=Py_ssize_t)
    cpdef Py_ssize_t _budget(self)
    cpdef bint _window_open(self, args)
    @cython.locals(found=bytes)
    cpdef bint _key_passes(self, key)
    @cython.locals(remaining=Py_ssize_t, held=Py_ssize_t, acc=Py_ssize_t, units=Py_ssize_t)
    cpdef deliver(self, Pending pending, data, Py_ssize_t done)
    cpdef pending_failed(self, Pending pending, error, bint partial)
    cpdef head_answered(self)
    cpdef entry_answered(self)
    @cython.locals(head=Pending)
    cpdef _advance(self)
    cpdef _write(self, data)
    cpdef _to_client(self, data)
    cpdef _flush_local(self)

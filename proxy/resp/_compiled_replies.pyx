# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Compiled twin of proxy.resp.replies.ReplySplitter: where each reply ends in an upstream stream, in C.

`ReplySplitter.scan(data, start, want) -> (end, done, pushes)` and `in_reply` behave as the pure
class in replies.py, which is the reference (tests/resp/test_replies.py runs every test and a
differential fuzz against both): the same cuts, the same state kept between chunks (a partial
header of at most `_MAX_HEADER` bytes, the bytes left of a body, "inside a line", the stack of
open aggregates, the pending attribute), the same `ReplyStreamError` messages, even the same state
left behind by an error. It is structured as the pure class (resume, then one loop iteration per
value, frames closed in `_close_frames`) so the two can be read side by side; what changes is the
machinery: the buffer is read through a pointer, lines are found with memchr, lengths are parsed
in C instead of by dictionary lookup, and the open aggregates live on a growable C array instead
of two lists. Three differences, all outside what a connection can meet: a length or count
beyond `_SATURATED` (2**60) is held as 2**60 (the pure class keeps the exact big int: both wait
for more bytes than any stream carries); `start` outside `0..len(data)` raises IndexError (the
pure class reads Python's negative indices or leaves odd state); `start` and `want` must be
integers that fit a Py_ssize_t (the pure class also takes a float or a huge int for `want`).
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.list cimport PyList_GET_ITEM
from cpython.mem cimport PyMem_Free, PyMem_Malloc, PyMem_Realloc
from libc.string cimport memchr, memcpy

from proxy.resp.order cimport order_bytes

# may_hold_error, line_dash, error_among and interleave before the import below: replies.py's last
# lines take them from this module, which may be only this far initialised when it is imported
# first (the cdef class they use exists from the start; its instances are made at the end).
cdef inline const char* _line_dash(const char* s, Py_ssize_t from_, Py_ssize_t n, bint crlf) noexcept nogil:
    """The first `-` of s[from_:n] (from_ >= 1) right after a line feed (a CR and a line feed
    with `crlf`), or NULL: a memchr for each `-` and a look at the bytes before it."""
    cdef const char* p = <const char*> memchr(s + from_, 45, n - from_)
    while p != NULL:
        if p[-1] == 10 and (not crlf or (p - s >= 2 and p[-2] == 13)):
            return p
        p = <const char*> memchr(p + 1, 45, n - (p + 1 - s))
    return NULL


cpdef bint may_hold_error(bytes data) except -1:
    """replies.pure_may_hold_error, in C (_line_dash after CRLFs). (cpdef: the compiled
    monitor's call, once per upstream read, is a C call.)"""
    cdef const char* s
    cdef Py_ssize_t n
    if data is None:
        raise TypeError("may_hold_error() needs bytes, not None")
    n = PyBytes_GET_SIZE(data)
    s = PyBytes_AS_STRING(data)
    return n > 0 and (s[0] == 45 or _line_dash(s, 1, n, True) != NULL)


cpdef Py_ssize_t line_dash(bytes data, Py_ssize_t pos) except -2:
    """replies.pure_line_dash, in C (_line_dash), where `bytes.find` tries every position
    (a read with a nil reply, `$-1`, and no error was searched to its end; benchmarks/README.md).
    (cpdef: the compiled cluster connection's call, once per read that holds a `-`, is a C
    call.)"""
    cdef const char* s
    cdef const char* p
    cdef Py_ssize_t n
    if data is None:
        raise TypeError("line_dash() needs bytes, not None")
    n = PyBytes_GET_SIZE(data)
    if pos < 0:
        pos = 0
    if pos + 1 >= n:
        return -1
    s = PyBytes_AS_STRING(data)
    p = _line_dash(s, pos + 1, n, False)
    return -1 if p == NULL else p - 1 - s


cdef ReplySplitter _probe_splitter = None  # error_among's scanner, made once (below the class)


cpdef bint error_among(bytes data, Py_ssize_t start, Py_ssize_t count) except -1:
    """replies.pure_error_among, in C: each reply cut by the scanner's C method, from a state of
    its own. (cpdef: the compiled cluster connection's call is a C call.)"""
    cdef const unsigned char* p
    cdef Py_ssize_t n, end, done = 0, pushes = 0
    cdef ReplySplitter splitter
    if data is None:
        raise TypeError("error_among() needs bytes, not None")
    n = PyBytes_GET_SIZE(data)
    if start < 0 or start > n:
        raise IndexError("start out of range")
    p = <const unsigned char*> PyBytes_AS_STRING(data)
    splitter = _probe_splitter
    splitter._reset()
    while count > 0 and start < n:
        if p[start] == 45:
            return True
        end = splitter._scan(data, start, 1, &done, &pushes)
        if pushes:
            return True
        if not done:
            return False
        start = end
        count -= 1
    return False


cdef ReplySplitter _interleave_splitter = None  # interleave's scanner, made once (below the class)


cdef inline Py_ssize_t _replies_end(ReplySplitter splitter, bytes data, Py_ssize_t start, Py_ssize_t want,
                                    Py_ssize_t index) except -1:
    """interleave: where `want` replies of part `index` from `start` end. Short bulks and lines
    (a stretch's usual replies) are cut here, without a call of the scanner, which (at rest: it
    is only ever given whole replies) goes on from the first other one."""
    cdef const unsigned char* p = <const unsigned char*> PyBytes_AS_STRING(data)
    cdef Py_ssize_t n = PyBytes_GET_SIZE(data)
    cdef Py_ssize_t end, done = 0, pushes = 0
    while want and start < n:
        end = _simple_end(p, start, n)
        if not end:
            break
        start = end
        want -= 1
    if want:
        end = splitter._scan(data, start, want, &done, &pushes)
        if done < want:
            raise ValueError(f"part {index} holds fewer replies than are taken from it")
        start = end
    return start


cpdef bytes interleave(list parts, order):
    """replies.interleave, in C: each reply cut by the scanner's C method, copied once. (cpdef:
    the compiled Scatter's call is a C call, _compiled_replies.pxd.)"""
    cdef Py_ssize_t nparts = len(parts)
    cdef Py_ssize_t left[256]
    cdef Py_ssize_t positions[256]
    cdef const unsigned char* taken
    cdef Py_ssize_t count, at, run, start, end, total = 0, written = 0
    cdef unsigned char index
    cdef bytes data, out
    cdef char* into
    cdef ReplySplitter splitter
    if parts is None:
        raise TypeError("interleave() needs a list of parts, not None")
    taken = order_bytes(order, &count, "interleave")
    if nparts > 256:
        raise ValueError("more than 256 parts")
    for at in range(nparts):
        if type(<object> PyList_GET_ITEM(parts, at)) is not bytes:
            raise TypeError("interleave needs bytes parts")
        left[at] = 0
        positions[at] = 0
        total += PyBytes_GET_SIZE(<bytes> PyList_GET_ITEM(parts, at))
    for at in range(count):
        if taken[at] >= nparts:
            raise IndexError("list index out of range")
        left[taken[at]] += 1
    for at in range(nparts):
        if left[at] == 0:
            raise ValueError("a part none of whose replies is taken")
    splitter = _interleave_splitter
    splitter._reset()  # (whole replies leave it at rest, but a call that raised may not have)
    out = PyBytes_FromStringAndSize(NULL, total)
    into = PyBytes_AS_STRING(out)
    at = 0
    while at < count:
        index = taken[at]
        run = at + 1
        while run < count and taken[run] == index:
            run += 1
        data = <bytes> PyList_GET_ITEM(parts, index)
        start = positions[index]
        left[index] -= run - at
        if left[index] == 0:  # its last replies: the rest of the part, once it holds one more
            end = _replies_end(splitter, data, start, run - at - 1, index)
            if end == PyBytes_GET_SIZE(data):
                raise ValueError(f"part {index} holds fewer replies than are taken from it")
            end = PyBytes_GET_SIZE(data)
        else:
            end = _replies_end(splitter, data, start, run - at, index)
        memcpy(into + written, PyBytes_AS_STRING(data) + start, end - start)
        written += end - start
        positions[index] = end
        at = run
    return out


# Defined before replies.py's last lines import this module, so the circular import resolves.
from proxy.resp.replies import _MAX_HEADER, ReplyStreamError

# What each type byte is; the values match replies.py's (kinds >= AGG open a frame).
cdef enum:
    BAD = 0
    LINE = 1  # + - : _ , # (
    BULK = 2  # $ = !
    AGG = 3  # * ~
    MAP = 4  # %
    ATTR = 5  # |
    PUSH = 6  # >

# Splitter states between calls, as in replies.py.
cdef enum:
    IDLE = 0
    IN_LINE = 1
    IN_BODY = 2
    IN_HEADER = 3

# Outcomes of closing frames.
cdef enum:
    NOTHING = 0
    REPLY_DONE = 1
    PUSH_DONE = 2
    ATTR_DONE = 3

# What _length says about a header that is not digits (or "-1") before its '\r'.
cdef enum:
    MALFORMED = -3

# Lengths and counts are held up to here: room for 2 * count (maps) plus any offset in a buffer
# without overflow, and still more than any stream will ever deliver.
cdef Py_ssize_t _SATURATED = (<Py_ssize_t> 1) << 60

cdef Py_ssize_t MAX_HEADER = _MAX_HEADER

cdef unsigned char KIND[256]


cdef void _init_kinds() noexcept:
    cdef int b
    for b in range(256):
        KIND[b] = BAD
    for b in b"+-:_,#(":
        KIND[b] = LINE
    for b in b"$=!":
        KIND[b] = BULK
    for b in b"*~":
        KIND[b] = AGG
    KIND[37] = MAP  # '%'
    KIND[124] = ATTR  # '|'
    KIND[62] = PUSH  # '>'


_init_kinds()


cdef inline Py_ssize_t _short_bulk(const unsigned char* q) noexcept nogil:
    """replies._SHORT_BULK for the 4 bytes after a '$': the whole reply's length, or 0."""
    cdef unsigned char a = q[0]
    cdef unsigned char b = q[1]
    if 48 <= a <= 57:
        if b == 13:
            if q[2] == 10:
                return a - 48 + 6
        elif a != 48 and 48 <= b <= 57 and q[2] == 13 and q[3] == 10:
            return (a - 48) * 10 + (b - 48) + 7
    elif a == 45 and b == 49 and q[2] == 13 and q[3] == 10:  # "-1\r\n", the null
        return 5
    return 0


cdef inline Py_ssize_t _simple_end(const unsigned char* p, Py_ssize_t start, Py_ssize_t n) noexcept nogil:
    """Where the reply at p[start] (start < n) ends when it is a whole short bulk or a whole line,
    exactly as the scanner's loop would cut it from rest; 0 for anything else."""
    cdef Py_ssize_t end
    cdef const unsigned char* q
    cdef unsigned char t = p[start]
    if t == 36:
        if start + 5 <= n:
            end = _short_bulk(p + start + 1)
            if end:
                end += start
                if end <= n and p[end - 1] == 10:
                    return end
    elif KIND[t] == LINE:
        q = <const unsigned char*> memchr(p + start, 10, n - start)
        if q != NULL:
            return q - p + 1
    return 0


cdef inline Py_ssize_t _length(const unsigned char* p, Py_ssize_t i, Py_ssize_t nl) noexcept nogil:
    """The length or count in p[i:nl], which must be digits or "-1", then '\r': what replies.py's
    _COUNT table or _slow_length accepts (leading zeros too, no sign). -1 for "-1", MALFORMED
    for anything else not accepted."""
    cdef Py_ssize_t last = nl - 1  # where the '\r' must be
    cdef Py_ssize_t v = 0, d
    if last <= i or p[last] != 13:
        return MALFORMED
    if p[i] == 45:
        return -1 if last == i + 2 and p[i + 1] == 49 else MALFORMED
    while i < last:
        if not 48 <= p[i] <= 57:
            return MALFORMED
        d = p[i] - 48
        v = _SATURATED if v > (_SATURATED - d) // 10 else v * 10 + d
        i += 1
    return v


cdef str _bad_header(bytes data, Py_ssize_t pos, Py_ssize_t nl):
    line = data[pos : nl + 1]
    if line[1:2] == b"?":
        return f"streamed RESP3 type {line!r} is not supported (Redis never sends it)"
    return f"malformed RESP header {line[:40]!r} at offset {pos}"


cdef class ReplySplitter:
    """Resumable scanner that counts complete replies and where they end (its fields: the .pxd)."""

    def __cinit__(self):
        self._partial = b""
        self._capacity = 16
        self._frames = <Frame*> PyMem_Malloc(self._capacity * sizeof(Frame))
        if self._frames == NULL:
            raise MemoryError()

    def __dealloc__(self):
        PyMem_Free(self._frames)

    cdef void _reset(self) noexcept:
        """Back at rest, between replies, as a new one is."""
        self._state = 0
        self._left = 0
        self._partial = b""
        self._top = 0
        self._attr = False
        self._depth = 0

    @property
    def in_reply(self):
        """True while a reply (or a push, or an attribute prefix) is partly consumed."""
        return self._state != 0 or self._top != 0 or self._attr

    def scan(self, data, Py_ssize_t start, Py_ssize_t want):
        """Consume bytes of data from start, up to the want-th complete reply.

        Returns ``(end, done, pushes)``, as replies.ReplySplitter.scan does.
        """
        cdef Py_ssize_t done = 0, pushes = 0, end
        if type(data) is not bytes:
            raise TypeError(f"ReplySplitter.scan needs bytes, not {type(data).__name__}")
        if want <= 0:
            return start, 0, 0
        if start < 0 or start > PyBytes_GET_SIZE(data):
            raise IndexError(f"start {start} out of range for {PyBytes_GET_SIZE(data)} bytes")
        end = self._scan(<bytes> data, start, want, &done, &pushes)
        return end, done, pushes

    def cut(self, data, Py_ssize_t start, Py_ssize_t want):
        """replies.ReplySplitter.cut: `scan`, with the bytes it consumed, copied once."""
        cdef Py_ssize_t done = 0, end = 0
        piece = self._cut(data, start, want, &end, &done, "cut")
        return piece, end, done

    cpdef take(self, data, Py_ssize_t start, Py_ssize_t want):
        """replies.ReplySplitter.take: the bytes of `cut` alone when they hold all `want` replies,
        else ``(bytes, done)``."""
        cdef Py_ssize_t done = 0, end = 0
        piece = self._cut(data, start, want, &end, &done, "take")
        if done == want:
            return piece
        return piece, done

    cdef object _cut(self, data, Py_ssize_t start, Py_ssize_t want, Py_ssize_t* end_out,
                     Py_ssize_t* done_out, str caller):
        """The bytes `scan` consumed from `start` (data itself when that is all of it); where they
        end and how many replies they finish go to end_out and done_out."""
        cdef Py_ssize_t pushes = 0, end
        if type(data) is not bytes:
            raise TypeError(f"ReplySplitter.{caller} needs bytes, not {type(data).__name__}")
        end_out[0] = start
        if want <= 0:
            return data if start == 0 and PyBytes_GET_SIZE(data) == 0 else b""
        if start < 0 or start > PyBytes_GET_SIZE(data):
            raise IndexError(f"start {start} out of range for {PyBytes_GET_SIZE(data)} bytes")
        end = end_out[0] = self._scan(<bytes> data, start, want, done_out, &pushes)
        if start == 0 and end == PyBytes_GET_SIZE(data):
            return data
        return PyBytes_FromStringAndSize(PyBytes_AS_STRING(data) + start, end - start)

    cdef Py_ssize_t _scan(self, bytes data, Py_ssize_t start, Py_ssize_t want,
                          Py_ssize_t* done_out, Py_ssize_t* pushes_out) except -1:
        cdef const unsigned char* p = <const unsigned char*> PyBytes_AS_STRING(data)
        cdef Py_ssize_t n = PyBytes_GET_SIZE(data)
        cdef Py_ssize_t pos, end, nl, size, count, left, top
        cdef Py_ssize_t done = 0, pushes = 0
        cdef const unsigned char* q
        cdef unsigned char t
        cdef int k, state, outcome
        cdef bint attr, finished
        cdef bytes line

        if want == 1 and start < n and self._state == 0 and self._top == 0 and not self._attr:
            # One reply at a time (a client's one command): cut a short bulk or a whole line
            # without setting up the loop, exactly as the loop would cut it. (The run of short
            # replies below cuts it too, but after the resume step, which costs more.)
            end = _simple_end(p, start, n)
            if end:
                done_out[0] = 1
                return end
        pos = start

        # ---- resume what the previous chunk left unfinished (once per call)
        state = self._state
        if state:
            if state == IN_HEADER:
                q = <const unsigned char*> memchr(p + pos, 10, n - pos)
                if q == NULL:
                    self._partial += data[pos:]
                    if len(self._partial) > MAX_HEADER:
                        raise ReplyStreamError(f"header line too long: {self._partial[:40]!r}")
                    return n
                nl = q - p
                # The reassembled line is scanned on its own, as replies.py does, so that
                # offsets in its error messages (and everything else) are the same.
                line = self._partial + data[pos : nl + 1]
                self._partial = b""
                self._state = IDLE
                self._scan(line, 0, want, &done, &pushes)
                pos = nl + 1
                if done == want:
                    done_out[0] = done
                    pushes_out[0] = pushes
                    return pos
                state = self._state
            finished = False
            if state == IN_BODY:
                left = self._left
                if n - pos < left:
                    self._left = left - (n - pos)
                    done_out[0] = done
                    pushes_out[0] = pushes
                    return n
                pos += left
                if p[pos - 1] != 10:
                    raise ReplyStreamError("bulk body not followed by CRLF")
                self._state = IDLE
                finished = True
            elif state == IN_LINE:
                q = <const unsigned char*> memchr(p + pos, 10, n - pos)
                if q == NULL:
                    done_out[0] = done
                    pushes_out[0] = pushes
                    return n
                pos = q - p + 1
                self._state = IDLE
                finished = True
            if finished:
                outcome = self._value_done()
                if outcome == REPLY_DONE:
                    done += 1
                    if done == want:
                        done_out[0] = done
                        pushes_out[0] = pushes
                        return pos
                elif outcome == PUSH_DONE:
                    pushes += 1

        # ---- the hot loop: one iteration per value
        top = self._top
        attr = self._attr
        if not top and not attr:
            # Top-level short bulks and lines one after another (the usual stream of replies):
            # cut as the loop below cuts them, without its dispatch; it goes on from the first other.
            while pos < n:
                end = _simple_end(p, pos, n)
                if not end:
                    break
                pos = end
                done += 1
                if done == want:
                    break
        while pos < n and done < want:
            t = p[pos]
            k = KIND[t]
            if k == BULK:  # '$' (the commonest reply), and '=' and '!' like it without the null
                # (replies.py tests '$' apart for its dictionary shortcut; here one branch does)
                end = _short_bulk(p + pos + 1) if t == 36 and pos + 5 <= n else 0
                if end:
                    end += pos
                else:
                    q = <const unsigned char*> memchr(p + pos, 10, n - pos)
                    if q == NULL:
                        self._keep_header(data, pos)
                        pos = n
                        break
                    nl = q - p
                    size = _length(p, pos + 1, nl)
                    if size < 0:
                        if size != -1 or t != 36:
                            raise ReplyStreamError(_bad_header(data, pos, nl))
                        size = -2  # the RESP2 null "$-1\r\n": end lands just past it
                    end = nl + 3 + size
                if end > n:
                    self._state = IN_BODY
                    self._left = end - n
                    pos = n
                    break
                if p[end - 1] != 10:
                    raise ReplyStreamError("bulk body not followed by CRLF")
                pos = end
            elif k == LINE:
                q = <const unsigned char*> memchr(p + pos, 10, n - pos)
                if q == NULL:
                    self._state = IN_LINE
                    pos = n
                    break
                pos = q - p + 1
            elif k:
                q = <const unsigned char*> memchr(p + pos, 10, n - pos)
                if q == NULL:
                    self._keep_header(data, pos)
                    pos = n
                    break
                nl = q - p
                count = _length(p, pos + 1, nl)
                if count == MALFORMED or (count < 0 and t != 42):  # only '*' has a null
                    raise ReplyStreamError(_bad_header(data, pos, nl))
                pos = nl + 1
                if count > 0:
                    if k == MAP or k == ATTR:
                        count *= 2
                    self._push(top, k)
                    top = count
                    continue
                if count == 0:
                    if k == ATTR:
                        if not top:
                            attr = True  # an empty attribute: still no value
                        continue
                    if k == PUSH and not top:
                        pushes += 1
                        attr = False
                        continue
                # An empty aggregate or a null array is a complete value.
            else:
                raise ReplyStreamError(
                    f"unknown RESP type byte {data[pos : pos + 1]!r} at offset {pos}"
                )

            # A value is complete.
            if top:
                top -= 1
                if top:
                    continue
                outcome = self._close_frames()
                top = self._top
                if outcome == REPLY_DONE:
                    done += 1
                    attr = False
                    if done == want:
                        break
                elif outcome == PUSH_DONE:
                    pushes += 1
                    attr = False
                elif outcome == ATTR_DONE:
                    attr = True  # the reply it describes comes next
                continue
            done += 1
            attr = False
            if done == want:
                break
        self._top = top
        self._attr = attr
        done_out[0] = done
        pushes_out[0] = pushes
        return pos

    cdef int _push(self, Py_ssize_t count, int kind) except -1:
        cdef Frame* grown
        if self._depth == self._capacity:
            grown = <Frame*> PyMem_Realloc(self._frames, 2 * self._capacity * sizeof(Frame))
            if grown == NULL:
                raise MemoryError()
            self._frames = grown
            self._capacity *= 2
        self._frames[self._depth].count = count
        self._frames[self._depth].kind = kind
        self._depth += 1
        return 0

    cdef int _value_done(self) except -1:
        # A value completed while resuming (cold path twin of the loop's tail).
        cdef int outcome
        if not self._top:
            self._attr = False
            return REPLY_DONE
        self._top -= 1
        if self._top:
            return NOTHING
        outcome = self._close_frames()
        if outcome == ATTR_DONE:
            self._attr = True
        elif outcome != NOTHING:
            self._attr = False
        return outcome

    cdef int _close_frames(self) except -1:
        """Pop the innermost frame, which has all its elements, and any enclosing frames that
        this completes; say what finished at top level."""
        cdef int k
        cdef Py_ssize_t top
        while True:
            if self._depth == 0:
                # Unreachable while the state is consistent; replies.py's list.pop says the same.
                raise IndexError("pop from empty list")
            self._depth -= 1
            k = self._frames[self._depth].kind
            top = self._frames[self._depth].count
            if k == ATTR:
                # An attribute is no element of its parent: nothing counts.
                self._top = top
                return NOTHING if top else ATTR_DONE
            if top:
                top -= 1
                if top:
                    self._top = top
                    return NOTHING
                continue
            self._top = 0
            return PUSH_DONE if k == PUSH else REPLY_DONE

    cdef int _keep_header(self, bytes data, Py_ssize_t pos) except -1:
        # A length/count line cut by the chunk end: keep its few bytes.
        if PyBytes_GET_SIZE(data) - pos > MAX_HEADER:
            raise ReplyStreamError(f"header line too long: {data[pos : pos + 40]!r}")
        self._partial = data[pos:]
        self._state = IN_HEADER
        return 0



_interleave_splitter = ReplySplitter()
_probe_splitter = ReplySplitter()

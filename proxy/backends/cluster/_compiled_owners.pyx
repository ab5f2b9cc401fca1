# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Compiled twin of a cluster route's key owners (owners.py is the reference): a stretch's keys'
hash slots and their owners, in C.

`key_owners(commands, start, stop, names, owner_of_slot)` is owners.pure_key_owners's twin: for
each command whose name is in `names` (a cluster route's commands whose one key is argument 1),
the Redis Cluster hash slot of that key, two bytes, from CRC16 tables made at import, and the
slot's byte in `owner_of_slot`; NO_SLOT and 0 for others. That CRC16 is `binascii.crc_hqx`'s
(CRC-CCITT, XMODEM), tested equal to it: here it costs a few instructions a byte, where a call of
`crc_hqx` costs far more a key (benchmarks/README.md). `key_owner(commands, at, names,
owner_of_slot)` is the same for the one command `at`, as a number (a route's read of one
command). `owner_parts(commands, start, stop, names, owner_of_slot)` is owners.pure_owner_parts's:
the same pass, which deals the stretch out to its owners as it goes, when every command has one.
(cpdef: the compiled route's calls are C calls, route.pxd.)
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_FromStringAndSize, PyByteArray_GET_SIZE
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE, PyList_New, PyList_SET_ITEM
from cpython.sequence cimport PySequence_Contains
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_GET_SIZE
from cpython.ref cimport PyObject, Py_INCREF
from libc.string cimport memchr, memset


# CRC-CCITT (XMODEM: polynomial 0x1021, initial value 0), eight bytes a step ("slicing by 8"):
# _crc16_by[k][b] is the CRC of byte b followed by k zero bytes (4 KiB of tables, made at import).
cdef unsigned short _crc16_by[8][256]


cdef void _make_crc16_tables() noexcept:
    cdef unsigned int crc, byte, bit, k
    for byte in range(256):
        crc = byte << 8
        for bit in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
        _crc16_by[0][byte] = crc & 0xFFFF
    for k in range(1, 8):
        for byte in range(256):
            crc = _crc16_by[k - 1][byte]
            _crc16_by[k][byte] = ((crc << 8) & 0xFF00) ^ _crc16_by[0][crc >> 8]


_make_crc16_tables()


cdef inline unsigned int _crc16(const unsigned char* s, Py_ssize_t n) noexcept nogil:
    cdef unsigned int crc = 0
    cdef Py_ssize_t i = n & 7
    cdef const unsigned char* head = s + i
    # The register starts at 0 and zero bytes leave it there: the first n % 8 bytes are the last
    # ones of a step whose first bytes are zeros, a table a byte with nothing to fold in.
    # Unrolled and nested, so that a key tests only the counts it has: a loop over them, or seven
    # flat tests, cost more a key (callgrind, micro_session.py; benchmarks/README.md).
    if i:
        crc = _crc16_by[0][head[-1]]
        if i > 1:
            crc ^= _crc16_by[1][head[-2]]
            if i > 2:
                crc ^= _crc16_by[2][head[-3]]
                if i > 3:
                    crc ^= _crc16_by[3][head[-4]]
                    if i > 4:
                        crc ^= _crc16_by[4][head[-5]]
                        if i > 5:
                            crc ^= _crc16_by[5][head[-6]]
                            if i > 6:
                                crc ^= _crc16_by[6][head[-7]]
    while i < n:  # the CRC is linear: the register XORed into the first two bytes, then a table a byte
        crc = (_crc16_by[7][(crc >> 8) ^ s[i]] ^ _crc16_by[6][(crc & 0xFF) ^ s[i + 1]]
               ^ _crc16_by[5][s[i + 2]] ^ _crc16_by[4][s[i + 3]] ^ _crc16_by[3][s[i + 4]]
               ^ _crc16_by[2][s[i + 5]] ^ _crc16_by[1][s[i + 6]] ^ _crc16_by[0][s[i + 7]])
        i += 8
    return crc


cdef inline unsigned int _key_slot(const unsigned char* s, Py_ssize_t n) noexcept nogil:
    """slots.hash_slot: the CRC16 of the key's hash tag (the bytes inside its first {...},
    when there are any), or of the whole key, modulo 16384."""
    cdef const unsigned char* open_brace = <const unsigned char*> memchr(s, 123, n)
    cdef const unsigned char* close_brace
    if open_brace != NULL:
        close_brace = <const unsigned char*> memchr(open_brace + 1, 125, n - (open_brace + 1 - s))
        if close_brace != NULL and close_brace > open_brace + 1:
            return _crc16(open_brace + 1, close_brace - open_brace - 1) & 0x3FFF
    return _crc16(s, n) & 0x3FFF


# The last name key_owners looked up, in which frozenset, and the answer: a route's one-command
# reads (a client that waits for each reply) look up the same name in the same set read after
# read. Held, so neither object can be freed and its address reused; only a frozenset, which
# cannot change.
cdef enum:
    NO_SLOT_OWNER = 0xFFFF << 8  # owners.NO_SLOT, owner 0: _slot_and_owner's "no slot"
    NOT_YET = 0xFF  # owner_parts: an owner with no part yet

cdef object _looked_up_in = None
cdef object _looked_up_name = None
cdef int _looked_up_keyed = 0


cdef inline const unsigned char* _slot_table(bytearray owner_of_slot) except NULL:
    if owner_of_slot is None:
        raise TypeError("key_owners() needs a slot table, not None")
    if PyByteArray_GET_SIZE(owner_of_slot) != 16384:  # (routing.slots.SLOT_COUNT)
        raise ValueError("a slot table has a byte for each of the 16384 slots")
    return <const unsigned char*> PyByteArray_AS_STRING(owner_of_slot)


cdef inline const unsigned char* _stretch_table(list commands, Py_ssize_t start, Py_ssize_t stop,
                                                bytearray owner_of_slot, str user) except NULL:
    """The slot table of a pass over commands[start:stop], once both are checked."""
    cdef const unsigned char* owners
    if commands is None:
        raise TypeError(f"{user}() needs a list of commands and a slot table, not None")
    owners = _slot_table(owner_of_slot)
    if start < 0 or stop > PyList_GET_SIZE(commands) or start > stop:
        raise IndexError("commands out of range")
    return owners


cdef inline Py_ssize_t _slot_and_owner(object args, names, const unsigned char* owners, PyObject** last_name,
                                       int* keyed) except -1:
    """One command's (slot << 8) | owner: NO_SLOT and 0 unless its name is in `names` and its
    argument 1 is bytes. `names` is looked up for a name other than `last_name` (the command
    before's), and not when that name was the last one looked up, in the same frozenset."""
    global _looked_up_in, _looked_up_name, _looked_up_keyed
    cdef PyObject* name = NULL
    cdef object key = None
    cdef Py_ssize_t slot
    if type(args) is list:
        if PyList_GET_SIZE(args) > 1:
            name = PyList_GET_ITEM(args, 0)
            key = <object> PyList_GET_ITEM(args, 1)
    elif type(args) is tuple:
        if PyTuple_GET_SIZE(args) > 1:
            name = PyTuple_GET_ITEM(args, 0)
            key = <object> PyTuple_GET_ITEM(args, 1)
    if key is None:  # (other sequences: NO_SLOT, the route table decides)
        return NO_SLOT_OWNER
    if name != last_name[0]:
        if names is _looked_up_in and name == <PyObject*> _looked_up_name:
            keyed[0] = _looked_up_keyed
        else:
            keyed[0] = PySequence_Contains(names, <object> name)
            if keyed[0] < 0:
                raise TypeError("key_owners() could not look a name up in `names`")
            if type(names) is frozenset:
                _looked_up_in = names
                _looked_up_name = <object> name
                _looked_up_keyed = keyed[0]
        last_name[0] = name
    if keyed[0] and type(key) is bytes:
        slot = _key_slot(<const unsigned char*> PyBytes_AS_STRING(key), PyBytes_GET_SIZE(key))
        return (slot << 8) | owners[slot]
    return NO_SLOT_OWNER


cpdef bytes key_owners(list commands, Py_ssize_t start, Py_ssize_t stop, names, bytearray owner_of_slot):
    """owners.pure_key_owners, in C. A name is looked
    up in `names` once for a run of commands that share it (the split's one object a name), and
    not again in the next call when it is the last one looked up, in the same frozenset."""
    cdef Py_ssize_t at, found
    cdef unsigned char* into
    cdef const unsigned char* owners
    cdef PyObject* last_name = NULL
    cdef int keyed = 0
    cdef bytes out
    owners = _stretch_table(commands, start, stop, owner_of_slot, "key_owners")
    out = PyBytes_FromStringAndSize(NULL, 3 * (stop - start))
    into = <unsigned char*> PyBytes_AS_STRING(out)
    for at in range(start, stop):
        found = _slot_and_owner(<object> PyList_GET_ITEM(commands, at), names, owners, &last_name, &keyed)
        into[0] = found >> 16
        into[1] = (found >> 8) & 0xFF
        into[2] = found & 0xFF
        into += 3
    return out


cpdef Py_ssize_t key_owner(list commands, Py_ssize_t at, names, bytearray owner_of_slot) except -1:
    """owners.pure_key_owner: key_owners of the one command `at`, as a number (slot << 8 | owner),
    without the bytes object (a route's read of one command)."""
    cdef const unsigned char* owners
    cdef PyObject* last_name = NULL
    cdef int keyed = 0
    if commands is None:
        raise TypeError("key_owner() needs a list of commands and a slot table, not None")
    owners = _slot_table(owner_of_slot)
    if at < 0 or at >= PyList_GET_SIZE(commands):
        raise IndexError("commands out of range")
    return _slot_and_owner(<object> PyList_GET_ITEM(commands, at), names, owners, &last_name, &keyed)


cpdef tuple owner_parts(list commands, Py_ssize_t start, Py_ssize_t stop, names, bytearray owner_of_slot):
    """owners.pure_owner_parts, in C: key_owners' pass that deals the stretch out by owner as it
    goes (a part number per owner, as they first come), with no byte of slot or owner to write
    and read again; None at the first command without an owner."""
    cdef const unsigned char* owners
    cdef PyObject* last_name = NULL
    cdef int keyed = 0
    cdef unsigned char part_of[256]  # an owner's part number (NOT_YET: none so far)
    cdef unsigned char owner_of[256]
    cdef Py_ssize_t counts[256]
    cdef Py_ssize_t at, owner, part, parts = 0
    cdef unsigned char* into
    cdef bytearray order
    cdef list counted
    cdef object count
    owners = _stretch_table(commands, start, stop, owner_of_slot, "owner_parts")
    memset(part_of, NOT_YET, sizeof(part_of))
    order = PyByteArray_FromStringAndSize(NULL, stop - start)
    into = <unsigned char*> PyByteArray_AS_STRING(order)
    for at in range(start, stop):
        owner = _slot_and_owner(<object> PyList_GET_ITEM(commands, at), names, owners, &last_name, &keyed) & 0xFF
        if owner == 0:  # (also a command with no slot: NO_SLOT_OWNER's owner is 0)
            return None
        part = part_of[owner]
        if part == NOT_YET:  # (owners are 1..255: at most 255 parts, numbered below NOT_YET)
            part = part_of[owner] = parts
            owner_of[parts] = owner
            counts[parts] = 0
            parts += 1
        counts[part] += 1
        into[at - start] = part
    counted = PyList_New(parts)
    for part in range(parts):
        count = counts[part]
        Py_INCREF(count)  # the list steals a reference
        PyList_SET_ITEM(counted, part, count)
    return order, PyBytes_FromStringAndSize(<const char*> owner_of, parts), counted



# Cimported by the compiled cluster route (route.pxd): a stretch's keys' slots and owners are C calls.

cpdef bytes key_owners(list commands, Py_ssize_t start, Py_ssize_t stop, names, bytearray owner_of_slot)
cpdef Py_ssize_t key_owner(list commands, Py_ssize_t at, names, bytearray owner_of_slot) except -1
cpdef tuple owner_parts(list commands, Py_ssize_t start, Py_ssize_t stop, names, bytearray owner_of_slot)

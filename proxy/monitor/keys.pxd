# Compiled from keys.py (setup.py's CORE): the hot-key sample, the big keys and the slow log run
# on the event loop's thread between requests, rarely, so their Python code is cold when it
# runs; compiled, a sample is a few C calls: the header scan of a sampled request and the
# Space-Saving table's update are typed.
cimport cython

@cython.locals(size=Py_ssize_t, argc=Py_ssize_t, length=Py_ssize_t, at=Py_ssize_t, end=Py_ssize_t,
               key_length=Py_ssize_t)
cpdef bint sample_request(bytes request) except -1
@cython.locals(entry=list, count=Py_ssize_t, now=Py_ssize_t, floor=Py_ssize_t)
cpdef offer(dict table, key, Py_ssize_t capacity, list heap)

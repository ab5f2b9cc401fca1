# cython: language_level=3
"""A reply queue's `append`, `popleft` and first entry as C calls: the compiled core's twin of
`pending.queue_append`, `pending.queue_popleft` and `pending.queue_head`.

Reply queues (a session's, a connection's `pending`) are deques. Compiled code calls a deque's
method through Python's call protocol even unbound (the method descriptor's vectorcall, its
argument checks), four such calls per request (benchmarks/README.md, "Figures behind the code"). These two
functions call the C functions behind `collections.deque.append` and `.popleft` directly, taken
once from their method descriptors at import, when those have the calling convention a deque's
methods have in CPython (METH_O, METH_NOARGS); for anything else, or any other queue type, the
queue's own method is called by name. A deque's first entry is read through its type's sequence
slot, its length is its object's size field (`Py_SIZE`, as the deque's own `len` reads it:
checked on a deque at import), without the truth test and the generic item lookup that
`queue and queue[0]` cost compiled. The core's modules cimport them (their
`.pxd` files) and import the pure ones from `pending` (their `.py` files), so each mode calls its
own.
"""

import collections

cdef extern from *:
    """
    static PyCFunction rg_deque_append = NULL;
    static PyCFunction rg_deque_popleft = NULL;
    static PyTypeObject *rg_deque_type = NULL;
    static int rg_deque_sized = 0;  /* Py_SIZE is a deque's length and sq_item reads an entry */

    static PyCFunction rg_method_function(PyObject *type, const char *name, int flags) {
        PyCFunction found = NULL;
        PyObject *method = PyObject_GetAttrString(type, name);
        if (method == NULL) {
            PyErr_Clear();
            return NULL;
        }
        if (Py_IS_TYPE(method, &PyMethodDescr_Type)) {
            PyMethodDef *def = ((PyMethodDescrObject *) method)->d_method;
            if (def != NULL && def->ml_flags == flags)
                found = def->ml_meth;
        }
        Py_DECREF(method);
        return found;
    }

    static void rg_queues_init(PyObject *deque) {
        if (!PyType_Check(deque))
            return;
        rg_deque_append = rg_method_function(deque, "append", METH_O);
        rg_deque_popleft = rg_method_function(deque, "popleft", METH_NOARGS);
        if (rg_deque_append != NULL && rg_deque_popleft != NULL) {
            Py_INCREF(deque);
            rg_deque_type = (PyTypeObject *) deque;
        }
    }

    static void rg_queues_check_size(PyObject *probe) {
        /* probe: a deque of three entries, the first of them 0 */
        PySequenceMethods *methods = Py_TYPE(probe)->tp_as_sequence;
        PyObject *first;
        if (rg_deque_type == NULL || !Py_IS_TYPE(probe, rg_deque_type) || Py_SIZE(probe) != 3
                || methods == NULL || methods->sq_item == NULL)
            return;
        first = methods->sq_item(probe, 0);
        if (first == NULL) {
            PyErr_Clear();
            return;
        }
        rg_deque_sized = PyLong_CheckExact(first) && PyLong_AsLong(first) == 0;
        Py_DECREF(first);
    }

    static int rg_queue_direct(void) { return rg_deque_type != NULL; }

    static PyObject *rg_queue_append(PyObject *queue, PyObject *entry) {
        if (Py_IS_TYPE(queue, rg_deque_type))
            return rg_deque_append(queue, entry);
        return PyObject_CallMethod(queue, "append", "(O)", entry);  /* "(O)": a tuple entry stays one argument */
    }

    static PyObject *rg_queue_head(PyObject *queue) {
        Py_ssize_t size;
        if (rg_deque_sized && Py_IS_TYPE(queue, rg_deque_type)) {
            if (Py_SIZE(queue) == 0)
                Py_RETURN_NONE;
            return rg_deque_type->tp_as_sequence->sq_item(queue, 0);
        }
        size = PyObject_Size(queue);
        if (size < 0)
            return NULL;
        if (size == 0)
            Py_RETURN_NONE;
        return PySequence_GetItem(queue, 0);
    }

    static PyObject *rg_queue_popleft(PyObject *queue) {
        if (Py_IS_TYPE(queue, rg_deque_type))
            return rg_deque_popleft(queue, NULL);
        return PyObject_CallMethod(queue, "popleft", NULL);
    }
    """
    void rg_queues_init(object deque)
    void rg_queues_check_size(object probe)
    bint rg_queue_direct()
    bint rg_deque_sized
    object rg_queue_append(object queue, object entry)
    object rg_queue_popleft(object queue)
    object rg_queue_head(object queue)


rg_queues_init(collections.deque)
rg_queues_check_size(collections.deque((0, 1, 2)))


def direct() -> bool:
    """Whether a deque's methods are called as C functions here (else by name)."""
    return rg_queue_direct()


def direct_head() -> bool:
    """Whether a deque's first entry is read through its sequence slot here (else as any queue's)."""
    return rg_deque_sized


cpdef queue_append(queue, entry):
    """deque.append(queue, entry)."""
    rg_queue_append(queue, entry)


cpdef queue_popleft(queue):
    """deque.popleft(queue): its first entry (IndexError when it is empty)."""
    return rg_queue_popleft(queue)


cpdef queue_head(queue):
    """The first entry of `queue`, None when it is empty."""
    return rg_queue_head(queue)

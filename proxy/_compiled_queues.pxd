# Cimported by the compiled core (see _compiled_queues.pyx): a reply queue's append, popleft
# and first entry as C calls. Their `.py` files import the pure ones from proxy.pending.

cpdef queue_append(queue, entry)
cpdef queue_popleft(queue)
cpdef queue_head(queue)

"""proxy/_compiled_queues.pyx: a reply queue's append and popleft in C do what the pure
`pending.queue_append` / `queue_popleft` (the deque's own methods) do, for a deque and, by name,
for anything else."""

import collections

import pytest

from proxy import compiled, pending

queues = compiled.load("proxy._compiled_queues")
TWINS = [pytest.param((pending.queue_append, pending.queue_popleft), id="pure")]
if queues is not None:
    TWINS.append(pytest.param((queues.queue_append, queues.queue_popleft), id="compiled"))


def test_the_compiled_build_calls_a_deque_s_c_functions():
    if queues is None:
        pytest.skip("the compiled queue functions are not built")
    assert queues.direct()


@pytest.mark.parametrize("twins", TWINS)
def test_append_then_popleft_in_order(twins):
    append, popleft = twins
    queue = collections.deque()
    entries = [object() for _ in range(1000)]
    for entry in entries[:600]:
        assert append(queue, entry) is None
    taken = [popleft(queue) for _ in range(300)]
    for entry in entries[600:]:
        append(queue, entry)
    taken += [popleft(queue) for _ in range(700)]
    assert taken == entries and not queue


@pytest.mark.parametrize("twins", TWINS)
def test_popleft_of_an_empty_queue_raises_index_error(twins):
    _, popleft = twins
    with pytest.raises(IndexError):
        popleft(collections.deque())


@pytest.mark.parametrize("twins", TWINS)
def test_a_bounded_deque_drops_from_the_left_as_its_append_does(twins):
    append, popleft = twins
    queue = collections.deque(maxlen=2)
    for entry in (1, 2, 3):
        append(queue, entry)
    assert list(queue) == [2, 3] and popleft(queue) == 2


def test_other_queues_get_their_own_methods():
    """A subclass's override and a list's append are called by name in C (the pure twins, the
    deque's unbound methods, take deques only)."""
    if queues is None:
        pytest.skip("the compiled queue functions are not built")

    class Counting(collections.deque):
        appended = 0

        def append(self, entry):
            Counting.appended += 1
            super().append(entry)

    queue = Counting()
    queues.queue_append(queue, "a")
    assert Counting.appended == 1 and queues.queue_popleft(queue) == "a"
    items = []
    queues.queue_append(items, 1)
    queues.queue_append(items, (2, 3))  # one entry, not two arguments
    assert items == [1, (2, 3)]
    with pytest.raises(AttributeError):
        queues.queue_popleft(items)
    with pytest.raises(AttributeError):
        queues.queue_append(None, 1)

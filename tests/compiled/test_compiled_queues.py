"""proxy/_compiled_queues.pyx: a reply queue's append and popleft in C do what the pure
`pending.queue_append` / `queue_popleft` (the deque's own methods) do, for a deque and, by name,
for anything else."""

import collections

import pytest

from proxy import compiled, pending

pytestmark = pytest.mark.compiled_twin  # run again with the pure modules (tests/conftest.py)

queues = compiled.load("proxy._compiled_queues")
TWINS = [pytest.param((pending.queue_append, pending.queue_popleft), id="pure")]
HEADS = [pytest.param(pending.queue_head, id="pure")]
if queues is not None:
    TWINS.append(pytest.param((queues.queue_append, queues.queue_popleft), id="compiled"))
    HEADS.append(pytest.param(queues.queue_head, id="compiled"))


def test_the_compiled_build_calls_a_deque_s_c_functions():
    """Its append and popleft, and its first entry read through its size and sequence slot."""
    if queues is None:
        pytest.skip("the compiled queue functions are not built")
    assert queues.direct()
    assert queues.direct_head()


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


@pytest.mark.parametrize("queue_head", HEADS)
def test_the_head_is_the_first_entry_or_none(queue_head):
    queue = collections.deque()
    assert queue_head(queue) is None
    entries = [object() for _ in range(200)]  # more than a deque's block of 64
    for entry in entries:
        queue.append(entry)
    for entry in entries:
        assert queue_head(queue) is entry
        assert queue.popleft() is entry
    assert queue_head(queue) is None
    bounded = collections.deque([1, 2], maxlen=2)
    bounded.append(3)
    assert queue_head(bounded) == 2


@pytest.mark.parametrize("queue_head", HEADS)
def test_other_queues_have_their_own_length_and_items(queue_head):
    class Hiding(collections.deque):
        def __len__(self):
            return 0

    class Shifted(collections.deque):
        def __getitem__(self, index):
            return ("shifted", super().__getitem__(index))

    assert queue_head(Hiding([1, 2])) is None
    assert queue_head(Shifted([1, 2])) == ("shifted", 1)
    assert queue_head([]) is None and queue_head(["a", "b"]) == "a"

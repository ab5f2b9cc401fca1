"""replies.interleave, pure and compiled: replies of several parts dealt back into the order a
stretch's commands had (a cluster's pipeline over several masters). Every reply shape of the
splitter's table, random orders and parts, byte for byte against replies cut one by one; and the
refusals (a part short of replies, a part never taken, a bad part number)."""

from __future__ import annotations

import random
import subprocess
import sys

import pytest

from proxy.resp import replies
from tests.resp.test_replies import REPLIES
from tests.resp.twins import compiled_replies


@pytest.fixture(params=["pure", "compiled"])
def interleave(request):
    return replies.pure_interleave if request.param == "pure" else compiled_replies("interleave")


# Whole replies only (a push is no reply: it goes with the reply after it).
WHOLE = [(name, enc) for name, enc, is_push in REPLIES if not is_push]
PUSH = next(enc for _name, enc, is_push in REPLIES if is_push)


def deal(order, chosen):
    """The parts and the expected client-order bytes for replies `chosen[i]` taken by `order[i]`."""
    parts = [b""] * (max(order) + 1)
    for index, reply in zip(order, chosen):
        parts[index] += reply
    return parts, b"".join(chosen)


@pytest.mark.parametrize("name,enc", WHOLE, ids=[name for name, _ in WHOLE])
def test_each_reply_shape_goes_back_in_its_place(interleave, name, enc):
    order = bytearray([0, 1, 1, 0, 2, 0])
    chosen = [enc if at % 2 else b"+OK\r\n" for at in range(len(order))]
    parts, expected = deal(order, chosen)
    assert interleave(parts, order) == expected
    assert interleave(parts, bytes(order)) == expected


@pytest.mark.parametrize("seed", range(60))
def test_random_orders_and_replies(interleave, seed):
    rng = random.Random(seed)
    count = rng.randint(1, 40)
    nparts = rng.randint(1, min(count, 6))
    order = bytearray(list(range(nparts)) + [rng.randrange(nparts) for _ in range(count - nparts)])
    rng.shuffle(order)
    chosen = [rng.choice(WHOLE)[1] for _ in order]
    parts, expected = deal(order, chosen)
    assert interleave(parts, order) == expected


def test_a_push_goes_with_the_reply_after_it(interleave):
    parts = [b":1\r\n" + PUSH + b":2\r\n", b"+b\r\n"]
    assert interleave(parts, bytes([0, 1, 0])) == b":1\r\n+b\r\n" + PUSH + b":2\r\n"


def test_a_parts_last_reply_takes_the_rest_of_its_bytes(interleave):
    parts = [b":1\r\n:2\r\n" + PUSH, b"+b\r\n"]
    assert interleave(parts, bytes([0, 0, 1])) == b":1\r\n:2\r\n" + PUSH + b"+b\r\n"


def test_many_parts(interleave):
    order = bytearray(range(256)) * 2
    parts = [b":%d\r\n:%d\r\n" % (n, n + 1000) for n in range(256)]
    expected = b"".join(b":%d\r\n" % n for n in range(256)) + b"".join(b":%d\r\n" % (n + 1000) for n in range(256))
    assert interleave(parts, order) == expected


REFUSED = [
    ([b":1\r\n", b":2\r\n"], [0, 0, 1], ValueError),  # part 0 is one reply short
    ([b":1\r\n:2\r\n", b":3\r\n"], [0, 1, 1], ValueError),  # part 1 too, as its last reply
    ([b":1\r\n", b""], [0, 1], ValueError),  # a part with no bytes
    ([b":1\r\n", b":2\r\n"], [0, 0], ValueError),  # part 1 is never taken
    ([b":1\r\n"], [0, 1], IndexError),  # no part 1
    ([b"$5\r\nab", b":2\r\n"], [0, 0, 1], ValueError),  # a reply cut short
    ([b"*2\r\n$1\r\na\r\n", b":2\r\n"], [0, 0, 1], ValueError),  # an array cut short
]


@pytest.mark.parametrize("parts,order,error", REFUSED)
def test_what_does_not_add_up_is_refused(interleave, parts, order, error):
    with pytest.raises(error):
        interleave(parts, bytes(order))


@pytest.mark.parametrize("parts,order,error", REFUSED)
def test_a_refusal_leaves_nothing_behind_for_the_next_stretch(interleave, parts, order, error):
    """The compiled interleave keeps one scanner for every call: one left in the middle of a
    reply by a refused stretch must not read the next stretch's replies as its rest."""
    with pytest.raises(error):
        interleave(parts, bytes(order))
    parts = [b"$3\r\nabc\r\n:1\r\n", b"*1\r\n+x\r\n"]
    assert interleave(parts, bytes([0, 1, 0])) == b"$3\r\nabc\r\n*1\r\n+x\r\n:1\r\n"


def test_the_compiled_module_may_be_imported_first():
    """`compiled.status()` imports the compiled module by name, before replies.py: replies.py's
    last lines then find it part initialised, and must find interleave there all the same."""
    if replies._compiled is None:
        pytest.skip("compiled interleave unavailable")
    code = ("import proxy.resp._compiled_replies as c; from proxy.resp import replies; "
            "assert replies.interleave is c.interleave and replies.ReplySplitter is c.ReplySplitter")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)

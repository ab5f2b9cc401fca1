"""Batch.requests_by_part, pure and compiled: a stretch's commands dealt out to one request per
part (a cluster's pipeline over several masters), each part's in order, copied whole."""

from __future__ import annotations

import random

import hiredis
import pytest

from proxy.resp import reader
from proxy.resp.reader import RequestReader


@pytest.fixture(params=["pure", "compiled"])
def pick(request):
    if request.param == "pure":
        return reader.pick_requests
    if reader._pick is None:
        pytest.skip("the compiled request split is not built")
    return reader._pick


COMMANDS = [("GET", "k"), ("SET", "key:1", "v" * 300), ("PING",), ("MSET", *"abcdefgh"), ("ECHO", ""),
            ("SET", "k", "\r\n*3\r\n")]


def batch_of(commands):
    batch = RequestReader().feed_read(b"".join(hiredis.pack_command(c) for c in commands))
    assert batch is not None and len(batch.commands) == len(commands)
    return batch


@pytest.mark.parametrize("seed", range(40))
def test_each_part_gets_its_commands_in_order(pick, seed):
    rng = random.Random(seed)
    commands = [rng.choice(COMMANDS) for _ in range(rng.randint(1, 30))]
    batch = batch_of(commands)
    first = rng.randrange(len(commands))
    parts = rng.randint(1, 5)
    order = bytearray(rng.randrange(parts) for _ in range(len(commands) - first))
    expected = [b"".join(hiredis.pack_command(commands[first + at]) for at in range(len(order)) if order[at] == part)
                for part in range(parts)]
    assert pick(batch.raw, batch.ends, first, order, parts) == expected
    assert pick(batch.raw, batch.ends, first, bytes(order), parts) == expected


def test_the_batch_method_is_the_function():
    batch = batch_of([("GET", "a"), ("GET", "b"), ("GET", "c")])
    assert batch.requests_by_part(1, bytearray([1, 0]), 2) == [hiredis.pack_command(("GET", "c")),
                                                              hiredis.pack_command(("GET", "b"))]


@pytest.mark.parametrize("first,order,parts", [
    (0, [0, 2], 2),  # no part 2
    (1, [0, 0, 0], 1),  # past the batch's last command
])
def test_out_of_range_is_refused(pick, first, order, parts):
    batch = batch_of([("GET", "a"), ("GET", "b"), ("GET", "c")])
    with pytest.raises(IndexError):
        pick(batch.raw, batch.ends, first, bytes(order), parts)

"""Batch.requests_by_part, pure and compiled: a stretch's commands dealt out to one request per
part (a cluster's pipeline over several masters), each part's in order, copied whole; with the
commands' ends given, or found again in the bytes (a batch of the compiled split has none until
asked: request_ends, pure and compiled)."""

from __future__ import annotations

import random
import struct

import hiredis
import pytest

from proxy.resp import reader
from proxy.resp.reader import RequestReader


def _twin(request, pure, compiled):
    """The pure function or its compiled twin, by the fixture's parameter."""
    if request.param == "pure":
        return pure
    if compiled is None:
        pytest.skip("the compiled request split is not built")
    return compiled


@pytest.fixture(params=["pure", "compiled"])
def pick(request):
    return _twin(request, reader.pure_pick_requests, reader._pick)


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
    assert pick(batch.raw, None, first, bytes(order), parts) == expected
    assert pick(batch.raw, None, first, bytes(order), parts, batch.commands) == expected


def _args(command) -> list:
    return [part.encode() for part in command]


# Commands that do not say the request's size: each is read from the bytes instead. (Given with
# the requests of COMMANDS[:3], command 1 in their place.)
NOT_THE_REQUEST = {
    "another argument": [b"SET", b"key:1", b"v" * 300, b"x"],
    "one byte more": [b"SET", b"key:1", b"v" * 301],
    "not a list": (b"SET", b"key:1", b"v" * 300),
    "not bytes": [b"SET", "key:1", b"v" * 300],
    "no command": None,
}


@pytest.mark.parametrize("wrong", NOT_THE_REQUEST, ids=list(NOT_THE_REQUEST))
def test_commands_that_do_not_match_the_bytes_leave_them_to_be_read(pick, wrong):
    """Given a batch's commands, the compiled pick takes each request's size from its arguments,
    checked against the request's first and last bytes; where they do not say it, the bytes do."""
    batch = batch_of(COMMANDS[:3])
    commands = [_args(COMMANDS[0]), NOT_THE_REQUEST[wrong], _args(COMMANDS[2])]
    packed = [hiredis.pack_command(c) for c in COMMANDS[:3]]
    assert pick(batch.raw, None, 0, b"\x01\x00\x01", 2, commands) == [packed[1], packed[0] + packed[2]]
    assert pick(batch.raw, None, 2, b"\x00", 1, commands) == [packed[2]]  # (1 skipped to reach 2)
    assert pick(batch.raw, None, 0, b"\x00\x00", 1, commands[:1]) == [packed[0] + packed[1]]  # (too few)


@pytest.fixture(params=["pure", "compiled"])
def request_ends(request):
    return _twin(request, reader.request_ends, reader._request_ends)


@pytest.mark.parametrize("seed", range(20))
def test_request_ends_are_where_each_command_ends(request_ends, seed):
    rng = random.Random(seed)
    commands = [rng.choice(COMMANDS) for _ in range(rng.randint(0, 30))]
    packed = [hiredis.pack_command(c) for c in commands]
    expected = [sum(len(p) for p in packed[:at + 1]) for at in range(len(packed))]
    assert request_ends(b"".join(packed)) == expected


@pytest.mark.parametrize("raw", [b"PING\r\n", b"*1\r\n$4\r\nPING\r\n*1\r\n", b"*1\r\n$4\r\nPIN", b"*1\r\n:4\r\n"])
def test_request_ends_refuse_what_is_not_whole_canonical_requests(request_ends, raw):
    with pytest.raises(ValueError):
        request_ends(raw)


def test_a_split_batch_finds_its_ends_when_asked():
    commands = [("GET", "a"), ("SET", "b", "v" * 100), ("GET", "c")]
    packed = [hiredis.pack_command(c) for c in commands]
    batch = batch_of(commands)
    if reader._split is not None:
        assert batch._ends is None  # the compiled split makes no offsets for a read forwarded whole
    assert batch.span(0, 3) == batch.raw
    assert batch.span(1, 2) == packed[1]
    assert batch.ends == [len(packed[0]), len(packed[0]) + len(packed[1]), len(batch.raw)]
    assert batch.offsets() is batch.ends  # found once


def test_the_batch_method_is_the_function():
    batch = batch_of([("GET", "a"), ("GET", "b"), ("GET", "c")])
    assert batch.requests_by_part(1, bytearray([1, 0]), 2) == [hiredis.pack_command(("GET", "c")),
                                                              hiredis.pack_command(("GET", "b"))]


@pytest.mark.parametrize("first,order,parts", [
    (0, [0, 2], 2),  # no part 2
    (1, [0, 0, 0], 1),  # past the batch's last command
])
@pytest.mark.parametrize("given", [True, False])
def test_out_of_range_is_refused(pick, first, order, parts, given):
    batch = batch_of([("GET", "a"), ("GET", "b"), ("GET", "c")])
    with pytest.raises(IndexError):
        pick(batch.raw, batch.ends if given else None, first, bytes(order), parts)


# -- the split's packed ends (a cluster client's reader) ---------------------------------------

needs_split = pytest.mark.skipif(reader.split_keeping_ends is None, reason="the compiled request split is not built")


def unpacked(packed: bytes) -> list:
    return list(struct.unpack("%dn" % (len(packed) // struct.calcsize("n")), packed))


@needs_split
@pytest.mark.parametrize("count", [1, 2, 3, 16, 255, 256, 257])
def test_the_split_keeps_where_each_command_ends(count):
    """From two to 256 commands taken: their ends, packed; else the list's item stays None. The
    commands are the plain split's."""
    rng = random.Random(count)
    data = b"".join(hiredis.pack_command(rng.choice(COMMANDS)) for _ in range(count))
    commands, plain, ends_out = [], [], [None]
    assert reader.split_keeping_ends(data, 1000, 10 ** 6, commands, ends_out) == len(data)
    assert reader._split(data, 1000, 10 ** 6, plain) == len(data) and commands == plain
    if 2 <= count <= 256:
        assert unpacked(ends_out[0]) == reader.request_ends(data)
    else:
        assert ends_out == [None]


@needs_split
def test_a_split_cut_short_keeps_the_ends_of_what_it_took():
    taken = b"".join(hiredis.pack_command(c) for c in COMMANDS[:3])
    ends_out = [None]
    assert reader.split_keeping_ends(taken + b"PING\r\n", 1000, 10 ** 6, [], ends_out) == len(taken)
    assert unpacked(ends_out[0]) == reader.request_ends(taken)


@needs_split
@pytest.mark.parametrize("ends_out", [None, [], [None, None]])
def test_the_ends_need_a_list_of_one_item(ends_out):
    with pytest.raises(TypeError):
        reader.split_keeping_ends(b"*1\r\n$4\r\nPING\r\n", 1000, 10 ** 6, [], ends_out)


@pytest.mark.parametrize("keep", [True, False], ids=["keeping", "plain"])
def test_a_reader_that_keeps_ends_gives_each_batch_its_own(keep):
    reader_ = RequestReader()
    if keep:
        reader_.keep_ends()
    reads = [[("GET", "a"), ("SET", "b", "v" * 100), ("GET", "c")], [("GET", "d")], COMMANDS]
    for commands in reads:
        batch = reader_.feed_read(b"".join(hiredis.pack_command(c) for c in commands))
        if keep and reader._split is not None and len(commands) > 1:
            assert unpacked(batch.packed_ends) == batch.ends
        else:
            assert batch.packed_ends is None
        order = bytearray(at % 2 for at in range(len(commands) - 1))
        assert batch.requests_by_part(1, order, 2) == reader.pure_pick_requests(batch.raw, batch.ends, 1, order, 2)
    # A read the split leaves partly to the Python reader: offsets of its own, no stale ends.
    batch = reader_.feed_read(b"".join(hiredis.pack_command(c) for c in reads[0]) + b"PING\r\n")
    assert batch.packed_ends is None and len(batch.commands) == 4


@needs_split
@pytest.mark.parametrize("seed", range(20))
def test_pick_takes_the_packed_ends(seed):
    rng = random.Random(seed)
    commands = [rng.choice(COMMANDS) for _ in range(rng.randint(2, 30))]
    raw = b"".join(hiredis.pack_command(c) for c in commands)
    ends_out = [None]
    reader.split_keeping_ends(raw, 1000, 10 ** 6, [], ends_out)
    first = rng.randrange(len(commands))
    parts = rng.randint(1, 5)
    order = bytearray(rng.randrange(parts) for _ in range(len(commands) - first))
    expected = reader.pure_pick_requests(raw, None, first, order, parts)
    assert reader._pick(raw, ends_out[0], first, order, parts) == expected


@needs_split
@pytest.mark.parametrize("ends", [struct.pack("2n", 14, 28), struct.pack("3n", 14, 99, 42), struct.pack("3n", -5, 28, 42)],
                         ids=["too few", "past the bytes", "negative"])
def test_packed_ends_that_do_not_fit_are_refused(ends):
    raw = b"".join(hiredis.pack_command(("GET", "k%d" % at)) for at in range(3))
    with pytest.raises(IndexError):
        reader._pick(raw, ends, 0, bytes([0, 1, 0]), 2)
    with pytest.raises(IndexError):
        reader._pick(raw, ends, 1, bytes([0, 1]), 2)

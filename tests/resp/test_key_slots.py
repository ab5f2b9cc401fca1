"""Batch.key_slots, pure and compiled: the hash slot of each command's argument 1 (what a cluster
route reads for commands whose one key is there), two bytes each. The compiled one has its own
CRC16 (two bytes a step): it must give binascii.crc_hqx's, with Redis's hash-tag rule."""

from __future__ import annotations

import random
from binascii import crc_hqx

import hiredis
import pytest

from proxy.resp import reader
from proxy.resp.reader import NO_SLOT, RequestReader
from proxy.routing.slots import SLOT_COUNT, hash_slot


@pytest.fixture(params=["pure", "compiled"])
def key_slots(request):
    if request.param == "pure":
        return reader.key_slots
    if reader._key_slots is None:
        pytest.skip("the compiled request split is not built")
    return reader._key_slots


def slots_of(data: bytes) -> list[int]:
    return [int.from_bytes(data[at:at + 2], "big") for at in range(0, len(data), 2)]


# Redis's own examples (cluster spec) and the edges of the tag rule; every length modulo 8, since
# the compiled CRC takes eight bytes a step, then two, then the last odd one alone.
TAGGED = [b"{user1000}.following", b"{user1000}.followers", b"foo{}{bar}", b"foo{{bar}}zap", b"foo{bar}{zap}",
          b"{", b"}", b"{}", b"}{", b"{a}", b"a{b", b"a}b{c}", b"", b"a", b"ab", b"abc", b"123456789",
          b"\x00\xff" * 40, b"{\x00}", "{ключ}:1".encode(), *(bytes(range(200, 200 + n)) for n in range(4, 20))]


def test_known_slots(key_slots):
    # the cluster spec's check value: CRC16("123456789") = 0x31C3
    assert slots_of(key_slots([[b"GET", b"123456789"]], 0, 1)) == [0x31C3 % SLOT_COUNT]
    assert slots_of(key_slots([[b"GET", b"{user1000}.following"], [b"GET", b"{user1000}.followers"]], 0, 2)) == \
        [hash_slot(b"user1000")] * 2


@pytest.mark.parametrize("key", TAGGED)
def test_the_hash_tag_rule(key_slots, key):
    assert slots_of(key_slots([[b"GET", key]], 0, 1)) == [hash_slot(key)]


@pytest.mark.parametrize("seed", range(20))
def test_random_keys_match_crc_hqx(key_slots, seed):
    rng = random.Random(seed)
    keys = [bytes(rng.randrange(256) for _ in range(rng.randrange(0, 70))) for _ in range(300)]
    keys += [b"key:%d" % rng.randrange(10**12) for _ in range(100)]
    got = slots_of(key_slots([[b"GET", key] for key in keys], 0, len(keys)))
    assert got == [hash_slot(key) for key in keys]
    untagged = [key for key in keys if b"{" not in key]
    assert slots_of(key_slots([[b"GET", key] for key in untagged], 0, len(untagged))) == \
        [crc_hqx(key, 0) % SLOT_COUNT for key in untagged]


def test_a_read_of_the_reader(key_slots):
    """What the readers make (lists of bytes), from the start, the middle and the end of a batch."""
    commands = [("GET", "a"), ("PING",), ("SET", "{t}x", "v"), ("MGET", "b", "c"), ("EXEC",), ("GET", "")]
    batch = RequestReader().feed_read(b"".join(hiredis.pack_command(c) for c in commands))
    want = [hash_slot(b"a"), NO_SLOT, hash_slot(b"t"), hash_slot(b"b"), NO_SLOT, hash_slot(b"")]
    assert slots_of(key_slots(batch.commands, 0, 6)) == want
    assert slots_of(key_slots(batch.commands, 2, 4)) == want[2:4]
    assert key_slots(batch.commands, 3, 3) == b""
    assert slots_of(batch.key_slots(1, 6)) == want[1:]


def test_what_has_no_bytes_at_argument_1(key_slots):
    commands = [[b"PING"], [], (b"GET", b"k"), [b"GET", "text"], [b"GET", 7], (b"GET",)]
    assert slots_of(key_slots(commands, 0, len(commands))) == [NO_SLOT, NO_SLOT, hash_slot(b"k"), NO_SLOT,
                                                               NO_SLOT, NO_SLOT]


@pytest.mark.parametrize("start, stop", [(-1, 1), (0, 3), (2, 1)])
def test_out_of_range_is_refused(key_slots, start, stop):
    with pytest.raises(IndexError):
        key_slots([[b"GET", b"a"], [b"GET", b"b"]], start, stop)

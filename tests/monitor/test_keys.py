"""The Space-Saving table of hot keys and the bounds of `monitor.keys`."""

import random

import pytest

from proxy.commands.table import CommandTable
from proxy.monitor import keys

pytestmark = pytest.mark.compiled_twin  # run again with the pure modules (tests/conftest.py)

keys.setup(CommandTable.from_snapshot())


@pytest.mark.parametrize("capacity, hot, cold, hits", [
    (8, [b"a", b"b"], 1000, 300),  # two hot keys among a thousand cold ones
    (16, [b"user:1"], 5000, 500),
    (4, [b"x", b"y", b"z"], 200, 100),
])
def test_space_saving_keeps_the_heavy_hitters(capacity, hot, cold, hits):
    rng = random.Random(7)
    stream = [key for key in hot for _ in range(hits)] + [b"cold:%d" % rng.randrange(cold) for _ in range(cold)]
    rng.shuffle(stream)
    table = {}
    heap = []
    for key in stream:
        keys.offer(table, key, capacity, heap)
    assert len(table) <= capacity
    for key in hot:
        count, error = table[key]
        assert count - error <= hits <= count  # the count overestimates by at most its error bound


@pytest.mark.parametrize("seed", range(4))
def test_the_heap_replaces_a_smallest_counter(seed):
    """Counts go up without the heap; whatever it holds, a new key replaces a counter of the
    table's smallest count, as the scan would (and the heap keeps one entry per key)."""
    rng = random.Random(seed)
    table, heap = {}, []
    offers = 4000
    for _ in range(offers):
        key = b"k%d" % int(rng.paretovariate(0.8))  # a few hot keys and a long tail
        smallest = min((entry[0] for entry in table.values()), default=0)
        replaces = len(table) == 8 and key not in table
        keys.offer(table, key, 8, heap)
        if replaces:
            assert table[key] == [smallest + 1, smallest]
        assert len(heap) == len(table) <= 8 and {key for _, key in heap} == set(table)
        assert all(count <= table[key][0] for count, key in heap)
    assert sum(entry[0] for entry in table.values()) == offers  # Space-Saving counts every offer


def sampled(sample):
    keys.reset()
    sample()
    found = dict(keys.HOT), keys.COUNTS["hot_samples"]
    keys.reset()
    return found


@pytest.mark.parametrize("request_bytes, in_place", [
    (b"*2\r\n$3\r\nGET\r\n$13\r\nuser:profile:1\r\n", True),
    (b"*2\r\n$3\r\nget\r\n$1\r\nk\r\n", True),
    (b"*5\r\n$3\r\nSET\r\n$3\r\nabc\r\n$1\r\nv\r\n$2\r\nEX\r\n$2\r\n60\r\n", True),
    (b"*2\r\n$3\r\nGET\r\n$200\r\n" + b"k" * 200 + b"\r\n", True),  # cut to KEY_BYTES
    (b"*2\r\n$3\r\nGET\r\n$0\r\n\r\n", True),  # the empty key
    (b"*3\r\n$7\r\nPUBLISH\r\n$2\r\nch\r\n$1\r\nm\r\n", True),  # no key: nothing sampled
    (b"*2\r\n$3\r\nGeT\r\n$1\r\nk\r\n", True),  # a spelling the table has not: as `sample`
    (b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n*1\r\n$4\r\nPING\r\n", True),  # the first command's
    (b"*1\r\n$4\r\nPING\r\n", False),
    (b"*12\r\n$4\r\nMSET\r\n$1\r\na\r\n", False),  # two-digit count: parsed instead
    (b"*2\r\n$10\r\nGETEX12345\r\n$1\r\nk\r\n", False),  # two-digit name length
])
def test_a_sampled_request_gives_the_key_the_parsed_command_gives(request_bytes, in_place):
    assert sampled(lambda: keys.sample_request(request_bytes)) == (sampled(
        lambda: keys.sample((keys.nth_command(request_bytes, 0),))) if in_place else ({}, 0))
    keys.reset()
    assert keys.sample_request(request_bytes) is in_place
    keys.reset()


def test_the_slow_log_and_the_big_keys_stay_bounded():
    keys.reset()
    for index in range(keys.SLOW_CAPACITY * 2):
        keys.slow([b"GET", b"k%d" % index], 0.5, 1)
    for index in range(keys.BIG_CAPACITY * 2):
        keys._big("request", [b"SET", b"k%d" % index, b"v"], keys.BIG_BYTES + index)
    assert len(keys.SLOW) == keys.SLOW_CAPACITY and keys.SLOW[-1][3] == b"k%d" % (keys.SLOW_CAPACITY * 2 - 1)
    assert len(keys.BIG) == keys.BIG_CAPACITY
    assert min(keys.BIG.values()) == keys.BIG_BYTES + keys.BIG_CAPACITY  # the biggest were kept
    keys.reset()


def test_keys_are_cut_and_values_never_kept():
    keys.reset()
    keys.slow([b"SET", b"k" * 1000, b"value"], 0.5, 1)
    (entry,) = keys.SLOW
    assert entry[3] == b"k" * keys.KEY_BYTES and b"value" not in entry
    keys.reset()

"""The Space-Saving table of hot keys and the bounds of `monitor.keys`."""

import random

import pytest

from proxy.commands.table import CommandTable
from proxy.monitor import keys

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
    for key in stream:
        keys.offer(table, key, capacity)
    assert len(table) <= capacity
    for key in hot:
        count, error = table[key]
        assert count - error <= hits <= count  # the count overestimates by at most its error bound


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

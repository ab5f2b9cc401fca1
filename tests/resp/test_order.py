"""order.runs: a stretch's order cut into runs of one part."""

import pytest

from proxy.resp.order import runs


@pytest.mark.parametrize("order,first,expected", [
    (b"", 0, []),
    (b"\x00", 0, [(0, 0, 1)]),
    (b"\x00\x00\x01\x00", 0, [(0, 0, 2), (1, 2, 3), (0, 3, 4)]),
    (bytearray([2, 2, 2]), 5, [(2, 5, 8)]),
    (bytearray([0, 1, 2, 1]), 3, [(0, 3, 4), (1, 4, 5), (2, 5, 6), (1, 6, 7)]),
    (bytes([255, 255, 0]), 0, [(255, 0, 2), (0, 2, 3)]),
])
def test_runs(order, first, expected):
    assert runs(order, first) == expected

"""order.runs: a stretch's order cut into runs of one part."""

import pytest

from proxy import compiled
from proxy.resp.order import runs, zeroed_order


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


@pytest.mark.parametrize("count", [0, 1, 16, 1000])
def test_a_new_order_is_every_command_part_0s(count):
    makers = [zeroed_order]
    built = compiled.load("proxy.resp._compiled_requests")
    if built is not None:
        makers.append(built.zeroed_order)
    for make in makers:
        order = make(count)
        assert type(order) is bytearray and order == bytearray(count)
        order.append(1)  # a new object each time, its own to change
        assert make(count) == bytearray(count)


def test_an_order_of_fewer_than_no_commands_is_refused():
    with pytest.raises(ValueError):
        zeroed_order(-1)
    built = compiled.load("proxy.resp._compiled_requests")
    if built is not None:
        with pytest.raises(ValueError):
            built.zeroed_order(-1)

"""SlotConnections, the routes' table of a connection per hash slot: one byte per slot, the
number of its connection in a short list (no server needed)."""

from proxy.backends.cluster.router import SlotConnections
from proxy.backends.cluster.routing.slots import SLOT_COUNT


class Conn:
    """A connection stand-in: compared by identity, as the table must."""

    def __eq__(self, other):  # a table that compared with == would confuse every one of these
        return True

    __hash__ = object.__hash__


def lookup(table: SlotConnections, slot: int):
    return table.conns[table.owner[slot]]


def test_empty_table_knows_no_connection():
    table = SlotConnections()
    assert len(table.owner) == SLOT_COUNT
    assert all(lookup(table, slot) is None for slot in (0, 1, 5000, SLOT_COUNT - 1))


def test_remembered_by_identity_once():
    table = SlotConnections()
    a, b = Conn(), Conn()
    table.remember(0, a)
    table.remember(100, b)
    table.remember(SLOT_COUNT - 1, a)
    assert lookup(table, 0) is a and lookup(table, SLOT_COUNT - 1) is a and lookup(table, 100) is b
    assert table.conns == [None, a, b] and table.conns[1] is a and table.conns[2] is b
    table.remember(0, b)  # a slot that moved
    assert lookup(table, 0) is b and len(table.conns) == 3
    table.remember(100, None)  # asked, no owner for now
    assert lookup(table, 100) is None


def test_forget_in_place():
    table = SlotConnections()
    owner, conns = table.owner, table.conns
    table.remember(7, Conn())
    table.forget()
    assert table.owner is owner and table.conns is conns  # routes hold these objects
    assert lookup(table, 7) is None and conns == [None] and not any(owner)


def test_full_list_starts_again():
    """Connections replaced over time fill the list: at 256 (a byte's numbers) it starts again,
    and what it forgot is asked for again (reads None), never another slot's connection."""
    table = SlotConnections()
    conns = [Conn() for _ in range(300)]
    for slot, conn in enumerate(conns[:255]):
        table.remember(slot, conn)
    assert len(table.conns) == 256 and all(lookup(table, slot) is conns[slot] for slot in range(255))
    table.remember(255, conns[255])
    assert table.conns[1:] == [conns[255]] and table.conns[1] is conns[255]
    assert lookup(table, 255) is conns[255]
    assert all(lookup(table, slot) is None for slot in range(255))
    table.remember(3, conns[3])
    assert lookup(table, 3) is conns[3] and lookup(table, 255) is conns[255]

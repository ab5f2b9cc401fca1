"""A cluster route's key owners: for a stretch of a client's commands, the hash slot of each one's
key and the number of the connection that slot last went to, in one pass over the commands.

The route (route.py) calls these on a batch's `commands` for the commands whose one key is
argument 1 (`RouteTable.first_arg`), with its slot table (`ClusterRoute.slot_owner`: a byte for
each of the 16,384 slots, 0 for a slot it has no connection for yet). `key_owners` gives three
bytes a command, `key_owner_of` the same for one command as a number (a read of one command),
`owner_parts` deals a stretch out by owner as it goes when every command has one (the usual
pipeline, sent without the route's walk). The `pure_` functions are the reference; compiled
(`_compiled_owners.pyx`, the CRC16 in C) the names below are its C functions, which the compiled
route cimports (route.pxd). No I/O here.
"""

from __future__ import annotations

from ... import compiled
from .routing.slots import SLOT_COUNT, hash_slot

__all__ = ["NO_SLOT", "key_owners", "key_owner_of", "owner_parts"]

NO_SLOT = 0xFFFF  # in key_owners: the command's key is not argument 1


def pure_key_owners(commands: list, start: int, stop: int, names, owner_of_slot) -> bytes:
    """Three bytes for each of commands[start:stop]: the Redis Cluster hash slot of its argument 1
    (big-endian) and that slot's byte in `owner_of_slot` (16,384 bytes), for a command whose
    name is in `names`; NO_SLOT and 0 for others. (A cluster route's commands whose one key is
    argument 1, and the number of the connection it last gave for the slot.) Compiled, one C
    pass: a name is looked up once for a run of commands that share it."""
    if len(owner_of_slot) != SLOT_COUNT:
        raise ValueError("a slot table has a byte for each of the 16384 slots")
    if start < 0 or stop > len(commands) or start > stop:
        raise IndexError("commands out of range")
    out = bytearray(3 * (stop - start))
    at = 0
    for args in commands[start:stop]:
        slot, owner = NO_SLOT, 0
        if type(args) in (list, tuple) and len(args) > 1 and args[0] in names and type(args[1]) is bytes:
            slot = hash_slot(args[1])
            owner = owner_of_slot[slot]
        out[at:at + 3] = (slot >> 8, slot & 0xFF, owner)
        at += 3
    return bytes(out)


def pure_key_owner(commands: list, at: int, names, owner_of_slot) -> int:
    """`key_owner_of`: pure_key_owners of the one command `at`, as (slot << 8) | owner."""
    first, second, owner = pure_key_owners(commands, at, at + 1, names, owner_of_slot)
    return (first << 16) | (second << 8) | owner


def pure_owner_parts(commands: list, start: int, stop: int, names, owner_of_slot):
    """A cluster stretch dealt out by owner in one pass: None unless every command of
    commands[start:stop] has a slot and an owner (a byte of `owner_of_slot` other than 0) in
    key_owners; else (order, owners, counts): each command's part number, in order of the parts'
    first commands (a bytearray), each part's owner (bytes) and its number of commands (a list)."""
    found = pure_key_owners(commands, start, stop, names, owner_of_slot)
    order = bytearray(stop - start)
    owners = bytearray()
    counts = []
    for at in range(stop - start):
        owner = found[3 * at + 2]
        if owner == 0:
            return None
        part = owners.find(owner)
        if part < 0:
            part = len(owners)
            owners.append(owner)
            counts.append(0)
        counts[part] += 1
        order[at] = part
    return order, bytes(owners), counts


_compiled = compiled.load("proxy.backends.cluster._compiled_owners")
# The compiled functions when built (the compiled route cimports them under these names:
# route.pxd), the twins otherwise.
key_owners = _compiled.key_owners if _compiled is not None else pure_key_owners
key_owner_of = _compiled.key_owner if _compiled is not None else pure_key_owner
owner_parts = _compiled.owner_parts if _compiled is not None else pure_owner_parts

"""Where a command goes in a cluster, and how multi-key commands are split across slots.

Theory of operation
-------------------
``Planner.plan(args, node_for_slot)`` looks at one client request (its parsed arguments) and
returns one of three decisions; it does no I/O and keeps no state between calls:

* ``Forward(slot, node)``: send the client's own bytes, unchanged, to ``node`` (``slot`` and
  ``node`` are None for a command without keys: any node will do).
* ``Split(subcommands, ...)``: a command from ``SPLIT_COMMANDS`` whose keys span several
  slots. Each ``SubCommand`` holds the keys of one slot (with their values, for MSET), in the
  client's order, and the node to send it to. When every sub-command has its final reply,
  ``Split.merge(replies)`` returns the one reply the client gets, built from the sub-replies'
  bytes (never re-encoded values).
* ``Reject(reply)``: answer the client with ``reply`` and send nothing: ``CROSSSLOT`` for
  any other command whose keys span slots, ``CLUSTERDOWN Hash slot not served`` when a slot
  has no node.

Rules, each as Redis Cluster itself applies them (src/cluster.c ``getNodeByQuery``):

1. The keys are what the command table's key specs say (``find_keys``), shard channels
   (``SPUBLISH``/``SSUBSCRIBE``, key specs flagged ``NOT_KEY``) included: Redis routes them by
   slot too.
2. All keys must be in one **slot**, not merely on one node: a node answers ``CROSSSLOT`` to
   keys of two slots it owns both. So a split makes one sub-command per slot; ``by_node()``
   groups them for writing.
3. A command with the wrong number of arguments is forwarded to its first key's node, where
   Redis answers the arity error (Redis checks arity before slots). A split command whose
   arguments are not whole groups (``MSET a 1 b``) is not split: Redis answers CROSSSLOT
   for it as well when its keys span slots.

Merging, per ``SPLIT_COMMANDS`` (``Split.merge``):

==========================  ============================  ======================================
commands                    each sub-reply                the client's reply
==========================  ============================  ======================================
MGET                        ``*k`` + k elements           ``*N`` + the N elements in the
                                                          client's key order, bytes as received
DEL UNLINK EXISTS TOUCH     ``:n``                        ``:sum``
MSET                        ``+OK``                       ``+OK``
==========================  ============================  ======================================

Any sub-reply that is an error makes the whole reply that error (the first one, in
sub-command order). The I/O layer resolves redirections per sub-command before merging
(``MOVED``/``ASK``: resend that sub-command; see ``redirect.py``); a redirection still
passed to ``merge`` is an error like any other. A split MSET is not atomic across slots,
as in every cluster proxy: each slot's part is.

The I/O layer around it, in outline::

    decision = planner.plan(args, slotmap.master_for_slot)
    if isinstance(decision, Forward):      # node None: any node (no keys)
        send(decision.node, the client's own request bytes)
    elif isinstance(decision, Reject):
        reply(decision.reply)
    else:                                  # Split
        for node, indexes in decision.by_node().items():
            send(node, b"".join(decision.subcommands[i].encode() for i in indexes))
        # ... replies[i] = the final reply to subcommands[i] (after MOVED/ASK retries) ...
        reply(decision.merge(replies))     # in the client's reply order, like any other reply

Transactions (MULTI ... EXEC) are not planned here: every queued command must go to one
node, which the session layer checks with the same ``Forward`` slots.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

import hiredis

from ....commands.keyspecs import find_keys
from ....commands.table import CommandTable
from ....resp.replies import ReplySplitter
from .redirect import CLUSTERDOWN_SLOT_NOT_SERVED, CROSSSLOT
from .slots import hash_slot

__all__ = [
    "SPLIT_COMMANDS",
    "Forward",
    "Planner",
    "Reject",
    "Split",
    "SubCommand",
    "merge_all_ok",
    "merge_sum",
    "merge_values",
    "split_array",
]

N = TypeVar("N", bound=Hashable)  # a node: an Address for the cluster router


@dataclass(frozen=True, slots=True)
class Forward(Generic[N]):
    """Send the request unchanged to ``node``; both None: it has no keys, any node."""

    slot: int | None
    node: N | None


@dataclass(frozen=True, slots=True)
class Reject:
    """Answer the client with ``reply``; send nothing upstream."""

    reply: bytes


@dataclass(frozen=True, slots=True)
class SubCommand(Generic[N]):
    node: N
    slot: int
    args: tuple[bytes, ...]  # the command name as the client spelled it, then this slot's groups
    keys: tuple[int, ...]  # for each key here, its index among the client's keys (0-based)

    def encode(self) -> bytes:
        """The sub-command as a RESP request."""
        return hiredis.pack_command(self.args)


Merge = Callable[["Split", Sequence[bytes]], bytes]


@dataclass(frozen=True, slots=True)
class Split(Generic[N]):
    subcommands: tuple[SubCommand[N], ...]
    key_count: int  # keys in the client's command
    merger: Merge = field(repr=False)

    def merge(self, replies: Sequence[bytes]) -> bytes:
        """The client's reply from ``replies[i]``, the complete reply to ``subcommands[i]``."""
        if len(replies) != len(self.subcommands):
            raise ValueError(f"{len(replies)} replies for {len(self.subcommands)} sub-commands")
        return self.merger(self, replies)

    def by_node(self) -> dict[N, list[int]]:
        """Indexes into ``subcommands``, grouped by node (nodes in order of first use)."""
        groups: dict[N, list[int]] = {}
        for i, sub in enumerate(self.subcommands):
            groups.setdefault(sub.node, []).append(i)
        return groups


Decision = Forward | Split | Reject


# -- merging ----------------------------------------------------------------------------


def _first_error(replies: Sequence[bytes]) -> bytes | None:
    for reply in replies:
        if reply[:1] == b"-":
            return reply
    return None


def split_array(reply: bytes) -> list[bytes]:
    """The exact bytes of each element of an array reply (``*k\\r\\n`` + k elements)."""
    if reply[:1] != b"*":
        raise ValueError(f"not an array reply: {reply[:40]!r}")
    nl = reply.find(b"\r\n")
    count = int(reply[1:nl]) if nl > 0 else -1
    if count < 0:
        raise ValueError(f"not an array reply with elements: {reply[:40]!r}")
    elements: list[bytes] = []
    splitter = ReplySplitter()
    pos = nl + 2
    for _ in range(count):
        end, done, _pushes = splitter.scan(reply, pos, 1)
        if done != 1:
            raise ValueError(f"array reply cut short after {len(elements)} of {count} elements")
        elements.append(reply[pos:end])
        pos = end
    if pos != len(reply):
        raise ValueError("bytes after the end of an array reply")
    return elements


def merge_values(split: Split, replies: Sequence[bytes]) -> bytes:
    """MGET: the elements of every sub-reply, put back in the client's key order."""
    error = _first_error(replies)
    if error is not None:
        return error
    out: list[bytes] = [b""] * split.key_count
    for sub, reply in zip(split.subcommands, replies):
        elements = split_array(reply)
        if len(elements) != len(sub.keys):
            raise ValueError(f"{len(elements)} values for {len(sub.keys)} keys")
        for at, element in zip(sub.keys, elements):
            out[at] = element
    return b"*%d\r\n" % split.key_count + b"".join(out)


def merge_sum(split: Split, replies: Sequence[bytes]) -> bytes:
    """DEL, UNLINK, EXISTS, TOUCH: the sum of the integer replies."""
    error = _first_error(replies)
    if error is not None:
        return error
    total = 0
    for reply in replies:
        if reply[:1] != b":" or reply[-2:] != b"\r\n":
            raise ValueError(f"not an integer reply: {reply[:40]!r}")
        total += int(reply[1:-2])
    return b":%d\r\n" % total


def merge_all_ok(split: Split, replies: Sequence[bytes]) -> bytes:
    """MSET: +OK when every part said +OK."""
    error = _first_error(replies)
    if error is not None:
        return error
    for reply in replies:
        if reply != b"+OK\r\n":
            raise ValueError(f"not +OK: {reply[:40]!r}")
    return b"+OK\r\n"


# The commands split across slots, by name, with how their replies merge. Adding one is a
# table edit, provided its keys are one range key spec to the last argument (groups of
# ``keystep`` arguments, the key first) and its reply merges like one of these.
SPLIT_COMMANDS: Mapping[str, Merge] = {
    "mget": merge_values,
    "del": merge_sum,
    "unlink": merge_sum,
    "exists": merge_sum,
    "touch": merge_sum,
    "mset": merge_all_ok,
}


# -- planning ---------------------------------------------------------------------------


class Planner:
    """Routing decisions for a command table (the upstream's, or ``from_snapshot()``)."""

    __slots__ = ("table", "split_commands")

    def __init__(self, table: CommandTable, split_commands: Mapping[str, Merge] = SPLIT_COMMANDS) -> None:
        self.table = table
        self.split_commands = split_commands

    def plan(self, args: Sequence[bytes], node_for_slot: Callable[[int], N | None]) -> Decision:
        """The decision for ``args`` (``args[0]`` the command name); ``node_for_slot`` is
        typically ``SlotMap.master_for_slot``, None meaning no node owns the slot."""
        spec = self.table.lookup(args)
        if spec is None or not spec.key_specs:
            return Forward(None, None)  # unknown command or no keys: any node answers the same
        found = find_keys(spec, args, include_not_keys=True)
        if not found:
            return Forward(None, None)
        argc = len(args)
        arity = spec.arity
        first_slot = hash_slot(args[found[0][0]])
        if (argc != arity) if arity > 0 else (argc < -arity):
            return _forward(first_slot, node_for_slot)  # Redis answers the arity error
        slots = [hash_slot(args[i]) for i, _ in found]
        if slots.count(first_slot) == len(slots):
            return _forward(first_slot, node_for_slot)
        merger = self.split_commands.get(spec.name)
        if merger is None:
            return Reject(CROSSSLOT)
        step = found[0][1].find_keys.keystep
        if (argc - 1) % step or [i for i, _ in found] != list(range(1, argc, step)):
            return Reject(CROSSSLOT)  # not whole groups: Redis Cluster says CROSSSLOT too
        return _split(args, slots, step, merger, node_for_slot)


def _forward(slot: int, node_for_slot: Callable[[int], N | None]) -> Forward | Reject:
    node = node_for_slot(slot)
    if node is None:
        return Reject(CLUSTERDOWN_SLOT_NOT_SERVED)
    return Forward(slot, node)


def _split(args: Sequence[bytes], slots: list[int], step: int, merger: Merge,
           node_for_slot: Callable[[int], N | None]) -> Split | Reject:
    name = args[0]
    groups: dict[int, tuple[list[bytes], list[int]]] = {}
    for k, slot in enumerate(slots):
        group = groups.get(slot)
        if group is None:
            group = groups[slot] = ([name], [])
        at = 1 + k * step
        group[0].extend(args[at : at + step])
        group[1].append(k)
    subcommands = []
    for slot, (sub_args, keys) in groups.items():
        node = node_for_slot(slot)
        if node is None:
            return Reject(CLUSTERDOWN_SLOT_NOT_SERVED)
        subcommands.append(SubCommand(node, slot, tuple(sub_args), tuple(keys)))
    return Split(tuple(subcommands), len(slots), merger)

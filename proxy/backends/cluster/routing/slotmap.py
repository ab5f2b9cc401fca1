"""The cluster topology as an immutable snapshot: which master owns each slot.

Theory of operation
-------------------
A ``SlotMap`` is built once from a node's ``CLUSTER SHARDS`` reply (Redis 7) or, from older
servers, its ``CLUSTER SLOTS`` reply, both as ``hiredis.Reader`` parses them (RESP2: bytes,
ints, nested lists, maps as flat key/value lists; RESP3 dicts are accepted too). It is never
changed afterwards: a ``MOVED`` redirection makes a new map (``with_moved``), a refresh makes
another one, and the I/O layer swaps the reference. Readers never see a half-built map.

Two rules keep it correct:

* **Lookup is two indexing operations.** ``_index`` is an ``array('H')`` of 16384 node
  numbers; ``_table[n]`` is that master's ``Address`` (``_table[0]`` is None: no owner), and
  ``_replicas[n]`` its replicas. Nothing is computed per lookup.
* **Only usable nodes route.** A node whose ``health`` is ``fail`` or ``loading`` is left
  out: a failed master's slots have no owner (``master_for_slot`` is None, ``coverage_complete``
  is False) until the cluster promotes a replica and the map is refreshed; a failed or loading
  replica is not among ``replicas_for_slot``. ``CLUSTER SLOTS`` has no health field: Redis 7
  already omits failed and loading replicas from it, and a failed master is listed until its
  replica takes over.

Addresses come from the preferred ``endpoint`` (``CLUSTER SLOTS``: the first element of a node),
which is what Redis also writes in ``MOVED``/``ASK``:

* an IP or a hostname: used as it is;
* empty (``""``; ``CLUSTER SLOTS``: NULL): the node's endpoint is unknown (nodes behind a
  load balancer, ``cluster-preferred-endpoint-type unknown-endpoint``), or the node does not
  know its own IP yet: use the host we reached the node at that answered (``source``);
* ``?``: the preferred type is hostname but this node announces none; its ``ip`` (in
  ``CLUSTER SHARDS``, or the ``ip`` metadata of ``CLUSTER SLOTS``) is used when the reply has
  one, else the host of ``source``.

Equality compares routing only (owner and replicas of every slot), not node ids or health,
so a map built from ``CLUSTER SHARDS`` equals the one built from ``CLUSTER SLOTS`` of the same
cluster, and a refresh that changes nothing compares equal to the map in use.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ....config import Address
from .slots import SLOT_COUNT, hash_slot

__all__ = ["Node", "SlotMap", "SlotRange", "TopologyError", "UNROUTABLE_HEALTH"]

UNROUTABLE_HEALTH = frozenset({"fail", "loading"})


class TopologyError(ValueError):
    """A CLUSTER SHARDS / CLUSTER SLOTS reply that cannot be a topology (or an error reply)."""


@dataclass(frozen=True, slots=True)
class Node:
    """One node as the reply described it (routed or not); for logs and diagnostics."""

    address: Address
    id: str = ""
    role: str = "master"  # 'master' | 'replica'
    health: str = "online"  # 'online' | 'loading' | 'fail' (CLUSTER SLOTS: always 'online')

    @property
    def routable(self) -> bool:
        return self.health not in UNROUTABLE_HEALTH


@dataclass(frozen=True, slots=True)
class SlotRange:
    start: int
    end: int  # inclusive, as Redis writes ranges
    master: Address
    replicas: tuple[Address, ...] = ()


class SlotMap:
    __slots__ = ("_index", "_table", "_replicas", "_position", "_masters", "_covered", "nodes")

    def __init__(self, index: array, table: Sequence[Address | None],
                 replicas: Sequence[tuple[Address, ...]], nodes: Iterable[Node] = (),
                 _covered: int | None = None) -> None:
        """Internal: use ``from_ranges``, ``from_cluster_shards`` or ``from_cluster_slots``."""
        if len(index) != SLOT_COUNT or table[0] is not None or len(table) != len(replicas):
            raise ValueError("SlotMap: inconsistent index/table")
        self._index = index
        self._table = tuple(table)
        self._replicas = tuple(replicas)
        self._position = {address: n for n, address in enumerate(self._table) if n}
        self._covered = SLOT_COUNT - index.count(0) if _covered is None else _covered
        self._masters: tuple[Address, ...] | None = None  # computed on first use
        self.nodes: tuple[Node, ...] = tuple(nodes)

    # -- construction -------------------------------------------------------------

    @classmethod
    def empty(cls) -> SlotMap:
        return cls(array("H", bytes(2 * SLOT_COUNT)), (None,), ((),))

    @classmethod
    def from_ranges(cls, ranges: Iterable[tuple[int, int, Address, Sequence[Address]] | SlotRange],
                    nodes: Iterable[Node] = ()) -> SlotMap:
        """From (start, end, master, replicas) ranges, ends inclusive. A later range wins a slot
        claimed twice. A master's replicas are the last non-empty list given for it."""
        index = array("H", bytes(2 * SLOT_COUNT))
        table: list[Address | None] = [None]
        replicas: list[tuple[Address, ...]] = [()]
        position: dict[Address, int] = {}
        for item in ranges:
            if isinstance(item, SlotRange):
                start, end, master, reps = item.start, item.end, item.master, item.replicas
            else:
                start, end, master, reps = item
            if not (0 <= start <= end < SLOT_COUNT):
                raise TopologyError(f"slot range {start}-{end} is not within 0-{SLOT_COUNT - 1}")
            n = position.get(master)
            if n is None:
                n = position[master] = len(table)
                if n > 0xFFFF:
                    raise TopologyError("more than 65535 masters")
                table.append(master)
                replicas.append(())
            if reps or not replicas[n]:
                replicas[n] = tuple(reps)
            index[start : end + 1] = array("H", [n]) * (end - start + 1)
        return cls(index, table, replicas, nodes)

    @classmethod
    def from_cluster_shards(cls, reply: Any, source: Address | None = None, *,
                            tls: bool = False) -> SlotMap:
        """From a ``CLUSTER SHARDS`` reply (Redis 7+).

        ``source`` is the address the reply came from; it is needed only when an endpoint is
        unknown (see the module notes). ``tls`` picks each node's ``tls-port``.
        """
        shards = _list(reply, "CLUSTER SHARDS reply")
        ranges: list[tuple[int, int, Address, tuple[Address, ...]]] = []
        nodes: list[Node] = []
        port_field = "tls-port" if tls else "port"
        for shard in shards:
            fields = _pairs(shard, "shard")
            if "slots" not in fields or "nodes" not in fields:
                raise TopologyError(f"a shard without 'slots' and 'nodes': {shard!r}")
            bounds = [_int(v, "slot") for v in _list(fields["slots"], "slots")]
            if len(bounds) % 2:
                raise TopologyError(f"odd number of slot bounds in a shard: {bounds}")
            master: Address | None = None
            reps: list[Address] = []
            for raw in _list(fields["nodes"], "nodes"):
                info = _pairs(raw, "node")
                if port_field not in info:
                    raise TopologyError(f"node {_text(info.get('id'))!r} has no {port_field!r}")
                address = _address(info.get("endpoint"), info.get("ip"),
                                   _int(info[port_field], port_field), source)
                node = Node(address, _text(info.get("id")), _text(info.get("role")),
                            _text(info.get("health", "online")))
                nodes.append(node)
                if not node.routable:
                    continue
                if node.role == "master":
                    master = address
                else:
                    reps.append(address)
            if master is not None:
                ranges.extend((bounds[i], bounds[i + 1], master, tuple(reps))
                              for i in range(0, len(bounds), 2))
        return cls.from_ranges(ranges, nodes)

    @classmethod
    def from_cluster_slots(cls, reply: Any, source: Address | None = None) -> SlotMap:
        """From a ``CLUSTER SLOTS`` reply: [[start, end, master, replica...], ...], each node
        [endpoint, port, id (3.2+), metadata (7.0+: flat key/value list)]."""
        ranges: list[tuple[int, int, Address, tuple[Address, ...]]] = []
        nodes: dict[Address, Node] = {}
        for entry in _list(reply, "CLUSTER SLOTS reply"):
            entry = _list(entry, "slot range")
            if len(entry) < 3:
                raise TopologyError(f"slot range without a master: {entry!r}")
            start, end = _int(entry[0], "slot"), _int(entry[1], "slot")
            members = []
            for i, raw in enumerate(entry[2:]):
                raw = _list(raw, "node")
                if len(raw) < 2:
                    raise TopologyError(f"node without endpoint and port: {raw!r}")
                meta = _pairs(raw[3], "node metadata") if len(raw) > 3 else {}
                address = _address(raw[0], meta.get("ip"), _int(raw[1], "port"), source)
                members.append(address)
                node = Node(address, _text(raw[2]) if len(raw) > 2 else "", "replica" if i else "master")
                nodes.setdefault(address, node)
            ranges.append((start, end, members[0], tuple(members[1:])))
        return cls.from_ranges(ranges, nodes.values())

    # -- lookups (the hot path) ---------------------------------------------------

    def master_for_slot(self, slot: int) -> Address | None:
        """The master owning ``slot``, None when no usable master owns it."""
        return self._table[self._index[slot]]

    def master_for_key(self, key: bytes) -> Address | None:
        return self._table[self._index[hash_slot(key)]]

    def replicas_for_slot(self, slot: int) -> tuple[Address, ...]:
        """The usable replicas of the master owning ``slot`` (empty when it has none)."""
        return self._replicas[self._index[slot]]

    def masters(self) -> tuple[Address, ...]:
        """Every master owning at least one slot, in the order of the first slot each owns."""
        if self._masters is None:
            # dict.fromkeys keeps first occurrences in order: owners by their first slot.
            self._masters = tuple(self._table[n] for n in dict.fromkeys(self._index) if n)
        return self._masters

    def coverage_complete(self) -> bool:
        """True when every one of the 16384 slots has a usable master."""
        return self._covered == SLOT_COUNT

    @property
    def covered_slots(self) -> int:
        return self._covered

    # -- derived maps -------------------------------------------------------------

    def with_moved(self, slot: int, address: Address) -> SlotMap:
        """The map after ``-MOVED slot address``: ``slot`` now belongs to ``address`` (a known
        master keeps its replicas; a new one has none known until the next refresh)."""
        if not 0 <= slot < SLOT_COUNT:
            raise ValueError(f"slot {slot} is not within 0-{SLOT_COUNT - 1}")
        n = self._position.get(address)
        if n is not None and self._index[slot] == n:
            return self
        table, replicas = self._table, self._replicas
        if n is None:
            n = len(table)
            if n > 0xFFFF:
                raise TopologyError("more than 65535 masters")
            table += (address,)
            replicas += ((),)
        index = array("H", self._index)
        covered = self._covered + (index[slot] == 0)
        index[slot] = n
        return SlotMap(index, table, replicas, self.nodes, covered)

    # -- describing ---------------------------------------------------------------

    def ranges(self) -> list[SlotRange]:
        """The map as maximal runs of slots with the same master, in slot order."""
        out: list[SlotRange] = []
        index, table, replicas = self._index, self._table, self._replicas
        start = 0
        while start < SLOT_COUNT:
            n = index[start]
            end = start
            while end + 1 < SLOT_COUNT and index[end + 1] == n:
                end += 1
            if n:
                out.append(SlotRange(start, end, table[n], replicas[n]))
            start = end + 1
        return out

    def describe(self) -> str:
        """One line for logs: coverage, each master with its slot ranges and replicas, then the
        nodes left out for their health."""
        by_master: dict[Address, list[SlotRange]] = {}
        for r in self.ranges():
            by_master.setdefault(r.master, []).append(r)
        parts = []
        for master, runs in by_master.items():
            spans = ",".join(f"{r.start}-{r.end}" if r.end > r.start else str(r.start) for r in runs[:8])
            if len(runs) > 8:
                spans += f",...({len(runs)} ranges)"
            reps = runs[-1].replicas
            parts.append(f"{master} [{spans}]" + (f" replicas {' '.join(map(str, reps))}" if reps else ""))
        unusable = [n for n in self.nodes if not n.routable]
        if unusable:
            parts.append("not routed: " + " ".join(f"{n.address} ({n.role} {n.health})" for n in unusable))
        text = f"{len(self.masters())} masters, {self._covered}/{SLOT_COUNT} slots covered"
        return text + (": " + "; ".join(parts) if parts else "")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SlotMap):
            return NotImplemented
        if self is other:
            return True
        if self._index == other._index and self._table == other._table:
            return self._replicas == other._replicas
        return self.ranges() == other.ranges()

    def __hash__(self) -> int:
        return hash(tuple(self.ranges()))

    def __repr__(self) -> str:
        return f"<SlotMap {len(self.masters())} masters, {self._covered}/{SLOT_COUNT} slots>"


# -- reading hiredis replies ----------------------------------------------------------


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, (bytes, bytearray)):
        return value.decode("utf-8", "replace")
    return str(value)


def _int(value: Any, what: str) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        raise TopologyError(f"{what}: {value!r} is not an integer") from None


def _list(value: Any, what: str) -> list | tuple:
    if isinstance(value, Exception):
        raise TopologyError(f"{what} is an error: {value}")
    if not isinstance(value, (list, tuple)):
        raise TopologyError(f"{what} is not a list: {value!r}")
    return value


def _pairs(value: Any, what: str) -> Mapping[str, Any]:
    """A RESP2 flat key/value list (or a RESP3 map) as a dict with str keys."""
    if isinstance(value, dict):
        return {_text(k): v for k, v in value.items()}
    value = _list(value, what)
    if len(value) % 2:
        raise TopologyError(f"{what} is not a list of key/value pairs: {value!r}")
    return {_text(value[i]): value[i + 1] for i in range(0, len(value), 2)}


def _address(endpoint: Any, ip: Any, port: int, source: Address | None) -> Address:
    host = _text(endpoint)
    if host == "?":
        host = _text(ip)
    if not host:
        if source is None:
            raise TopologyError("a node's endpoint is unknown and no source address was given")
        host = source.host
    if not 0 < port <= 65535:
        raise TopologyError(f"port {port} of {host} is out of range")
    return Address(host, port)

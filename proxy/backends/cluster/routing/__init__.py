"""Redis Cluster routing, sans-IO: hash slots (slots.py), the topology snapshot (slotmap.py),
redirection and cluster errors (redirect.py), and per-command routing decisions with the
splitting of multi-key commands across slots (multikey.py)."""

from .multikey import SPLIT_COMMANDS, Forward, Planner, Reject, Split, SubCommand, split_array
from .redirect import (
    ASKING,
    CLUSTERDOWN_SLOT_NOT_SERVED,
    CROSSSLOT,
    ClusterError,
    Redirect,
    classify_error,
    parse_redirect,
)
from .slotmap import Node, SlotMap, SlotRange, TopologyError
from .slots import SLOT_COUNT, common_slot, hash_slot, key_hash_tag

__all__ = [
    "ASKING",
    "CLUSTERDOWN_SLOT_NOT_SERVED",
    "CROSSSLOT",
    "SLOT_COUNT",
    "SPLIT_COMMANDS",
    "ClusterError",
    "Forward",
    "Node",
    "Planner",
    "Reject",
    "Redirect",
    "SlotMap",
    "SlotRange",
    "Split",
    "SubCommand",
    "TopologyError",
    "classify_error",
    "common_slot",
    "hash_slot",
    "key_hash_tag",
    "parse_redirect",
    "split_array",
]

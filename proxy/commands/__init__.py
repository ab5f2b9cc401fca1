"""The command table (from COMMAND INFO / COMMAND DOCS, or a snapshot) and the
key-spec interpreter. See table.py and keyspecs.py."""

from .keyspecs import GETKEYS_PROCS, find_keys, resolves_all_keys
from .table import DEFAULT_SNAPSHOT, SNAPSHOTS, BeginSearch, CommandSpec, CommandTable, FindKeys, KeySpec, snapshot_for

__all__ = [
    "DEFAULT_SNAPSHOT",
    "SNAPSHOTS",
    "GETKEYS_PROCS",
    "BeginSearch",
    "CommandSpec",
    "CommandTable",
    "FindKeys",
    "KeySpec",
    "find_keys",
    "resolves_all_keys",
    "snapshot_for",
]

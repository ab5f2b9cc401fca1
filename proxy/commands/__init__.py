"""The command table (from COMMAND INFO / COMMAND DOCS, or a snapshot) and the
key-spec interpreter. See table.py and keyspecs.py."""

from .keyspecs import GETKEYS_PROCS, find_keys, resolves_all_keys
from .table import DEFAULT_SNAPSHOT, BeginSearch, CommandSpec, CommandTable, FindKeys, KeySpec

__all__ = [
    "DEFAULT_SNAPSHOT",
    "GETKEYS_PROCS",
    "BeginSearch",
    "CommandSpec",
    "CommandTable",
    "FindKeys",
    "KeySpec",
    "find_keys",
    "resolves_all_keys",
]

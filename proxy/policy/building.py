"""The policy engine a process runs, from what the configuration says of the policy: a file, the
built-in baseline (no `policy:`), or no rules at all (`policy: none`); over the command table the
upstream gave (`serve`) or the package's snapshot (the offline subcommands, `policy check`)."""

from __future__ import annotations

from ..commands.table import CommandTable
from ..config import NO_POLICY
from .engine import Engine
from .loader import load_builtin, load_policy


def build_engine(path, table):
    """The policy engine for the file at path (None: the built-in baseline; NO_POLICY: no rules,
    None returned). Raises PolicyError."""
    if path == NO_POLICY:
        return None
    return Engine(load_policy(path, table) if path is not None else load_builtin(table), table)


def offline_engine(path):
    """The engine of a policy file (None: the built-in baseline) over the snapshot's command table."""
    return build_engine(path, CommandTable.from_snapshot())

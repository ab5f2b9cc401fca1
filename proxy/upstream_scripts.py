"""Loads the policy's approved scripts and function libraries upstream (rule C6 `scripts: approved`).

At start and on every policy reload, over a short-lived connection as the proxy's own upstream
user: `SCRIPT LOAD` of every approved script and `FUNCTION LOAD REPLACE` of every approved
function library, on the server, or on every node of a cluster (from `CLUSTER SHARDS`: a replica
answers FUNCTION LOAD with READONLY, which is expected, as the master replicates its functions to
it, so a replica promoted by a failover has them). The scripts' loading is a convenience: the
proxy sends an approved EVALSHA as EVAL of its body (`policy/rules/c6_scripts.py`), so an emptied
script cache (a restart, SCRIPT FLUSH, a new master) never shows a client NOSCRIPT. Functions
have no such fallback: they are what this module loads. Nothing here raises: the outcome is a
line for the log.
"""

from __future__ import annotations

import logging

import hiredis

from .upstream.probe import ask
from .upstream_acl import cluster_nodes

log = logging.getLogger("redis_guard.scripts")


def approved(engine):
    """(scripts, function libraries) approved by the engine's policy and its applications' rules."""
    scripts, libraries = {}, {}
    if engine is None:
        return scripts, libraries
    chains = [engine.policy.rules, *(app.rules for app in engine.policy.applications)]
    for chain in chains:
        for rule in chain:
            if rule.id == "C6" and getattr(rule, "scripts", None) == "approved" and rule.mode != "off":
                scripts.update(rule.library.scripts)
                for library in rule.library.libraries:
                    libraries[library.name] = library
    return scripts, libraries


def commands_for(scripts, libraries) -> list[tuple]:
    return ([("SCRIPT", "LOAD", script.body) for script in scripts.values()]
            + [("FUNCTION", "LOAD", "REPLACE", library.code) for library in libraries.values()])


async def load(commands, nodes, timeout: float = 5.0) -> list[str]:
    """Run `commands` on every node; what went wrong, one line per node that refused."""
    refused = []
    for node in nodes:
        try:
            replies = await ask(node, commands, timeout)
        except (TimeoutError, OSError, ConnectionError) as exc:
            refused.append(f"{node.address}: unreachable: {exc}")
            continue
        for command, reply in zip(commands, replies):
            if isinstance(reply, hiredis.ReplyError) and not str(reply).startswith("READONLY"):
                what = "FUNCTION LOAD" if command[0] == "FUNCTION" else "SCRIPT LOAD"
                refused.append(f"{node.address}: {what} refused: {reply}")
                break
    return refused


async def load_for(config, engine) -> str:
    """Load the approved set on the configured upstream; the line saying how it went ('' when the
    policy approves no scripts)."""
    scripts, libraries = approved(engine)
    if not scripts and not libraries:
        return ""

    try:
        nodes = await cluster_nodes(config.upstream_cluster[0]) if config.upstream_cluster else [config.upstream]
    except (TimeoutError, OSError, ConnectionError, ValueError) as exc:
        line = f"approved scripts: not loaded (cluster nodes unknown: {exc})"
        log.warning("%s", line)
        return line
    refused = await load(commands_for(scripts, libraries), nodes)
    where = f" on {len(nodes)} nodes" if len(nodes) > 1 else ""
    line = f"approved scripts: {len(scripts)} scripts and {len(libraries)} function libraries loaded{where}"
    if refused:
        line += f", refused: {'; '.join(refused)}"
        log.warning("%s", line)
    else:
        log.info("%s", line)
    return line

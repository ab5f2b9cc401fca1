"""Creates and updates the policy's ACL users on the upstream (`policy/acl.py` compiles them).

At start and on every policy reload (`upstream_acl: on`, the default), over a short-lived
connection as the proxy's own upstream user: `ACL SETUSER` for every compiled user (each starts
with `reset`, so a user holds exactly what the policy says, whatever it held before: nothing
accumulates), then `ACL DELUSER` for the users of the same policy that it no longer compiles (an
application removed). In front of a Redis Cluster, on every node (ACL is not replicated: masters
and replicas alike), from `CLUSTER SHARDS`; in front of a Sentinel-managed master, on the master
and the replicas its `ROLE` lists. When the proxy's user may not run ACL SETUSER (or
`upstream_acl: off`), the users may still be there, made by operators who manage Redis users
themselves (`redis-guard policy acl FILE` prints them): each is tried with `AUTH` on every node,
and when all log in they are used (`AclStatus.usable`); else the proxy runs without the second
wall and says so. Nothing here raises: the outcome is an `AclStatus` for the start-up line and
the log.
"""

from __future__ import annotations

import dataclasses
import logging

import hiredis

from .tls import upstream_context
from .upstream.probe import ask

log = logging.getLogger("redis_guard.acl")


@dataclasses.dataclass
class AclStatus:
    users: int = 0  # users applied on every node reached
    nodes: int = 0
    refused: list[str] = dataclasses.field(default_factory=list)  # "node: why", one per node that refused
    off: str = ""  # why nothing was tried
    present: bool = False  # not applied, yet every user logs in: the operators made them

    def line(self) -> str:
        """For the start-up line."""
        where = f" on {self.nodes} nodes" if self.nodes > 1 else ""
        if self.present:
            why = self.off or f"not applied ({'; '.join(self.refused)})"
            return f"upstream ACL users: {why}; the {self.users} users found upstream are used{where}"
        if self.off:
            return f"upstream ACL users: {self.off}"
        if self.refused:
            return (f"upstream ACL users: not applied ({'; '.join(self.refused)}): Redis's own ACL does not "
                    "back the policy inside scripts; see `redis-guard policy acl`")
        return f"upstream ACL users: {self.users} applied{where}"

    @property
    def ok(self) -> bool:
        return not self.refused and not self.off

    @property
    def usable(self) -> bool:
        """May the upstream connections log in as the users?"""
        return self.ok or self.present


async def apply(users, upstreams, timeout: float = 5.0) -> AclStatus:
    """Apply `users` (an AclUsers) on each upstream node (Upstream objects)."""
    status = AclStatus(users=len(users.users), nodes=len(upstreams))
    setusers = [user.setuser() for user in users.users]
    for node in upstreams:
        why = await _apply_one(users, node, setusers, timeout)
        if why is not None:
            status.refused.append(f"{node.address}: {why}")
    return status


async def _apply_one(users, node, setusers, timeout) -> str | None:
    try:
        replies = await ask(node, [*setusers, ("ACL", "USERS")], timeout)
        for reply in replies[:-1]:
            if isinstance(reply, hiredis.ReplyError):
                text = str(reply)
                return "not permitted" if text.startswith("NOPERM") else f"refused: {text}"
        existing = [name.decode("utf-8", "replace") for name in replies[-1]] if isinstance(replies[-1], list) else []
        stale = users.stale(existing)
        if stale:
            (deleted,) = await ask(node, [("ACL", "DELUSER", *stale)], timeout)
            if isinstance(deleted, hiredis.ReplyError):
                return f"removing {', '.join(stale)}: {deleted}"
            log.info("upstream %s: ACL users of applications no longer in the policy removed: %s",
                     node.address, ", ".join(stale))
    except (TimeoutError, OSError, ConnectionError) as exc:  # PermissionError: the proxy's own AUTH
        return f"unreachable: {exc}"
    return None


async def present(users, upstreams, timeout: float = 5.0) -> bool:
    """Does every user log in on every node (made by operators from `redis-guard policy acl`)?"""
    logins = [("AUTH", user.name, user.password) for user in users.users]
    for node in upstreams:
        try:
            replies = await ask(node, logins, timeout)
        except (TimeoutError, OSError, ConnectionError):
            return False
        if any(isinstance(reply, hiredis.ReplyError) for reply in replies):
            return False
    return True


async def cluster_nodes(seed, timeout: float = 5.0) -> list:
    """Every node of the cluster (masters and replicas) as an Upstream with the seed's
    credentials, from CLUSTER SHARDS (CLUSTER SLOTS on servers without it)."""
    from .routing.slotmap import SlotMap

    (reply,) = await ask(seed, [("CLUSTER", "SHARDS")], timeout)
    if isinstance(reply, hiredis.ReplyError):
        (reply,) = await ask(seed, [("CLUSTER", "SLOTS")], timeout)
        slotmap = SlotMap.from_cluster_slots(reply, seed.address)
    else:
        slotmap = SlotMap.from_cluster_shards(reply, seed.address, tls=upstream_context(seed.address) is not None)
    addresses = list(dict.fromkeys(node.address for node in slotmap.nodes if node.routable))
    if not addresses:
        addresses = list(slotmap.masters()) + [a for r in slotmap.ranges() for a in r.replicas]
    return [dataclasses.replace(seed, address=address) for address in addresses]


async def server_and_replicas(upstream, timeout: float = 5.0) -> list:
    """The server and the replicas its ROLE lists (ACL is not replicated: a Sentinel's replicas
    serve reads, and one of them becomes the master on failover)."""
    (role,) = await ask(upstream, [("ROLE",)], timeout)
    nodes = [upstream]
    if isinstance(role, list) and len(role) > 2 and role[0] in (b"master", "master"):
        for replica in role[2]:
            host = replica[0].decode() if isinstance(replica[0], bytes) else str(replica[0])
            address = dataclasses.replace(upstream.address, host=host, port=int(replica[1]))
            nodes.append(dataclasses.replace(upstream, address=address))
    return nodes


async def apply_for(config, users) -> AclStatus:
    """Apply on the configured upstream: the server (with a Sentinel, its replicas too), or
    every node of the cluster."""
    if users is None:
        return AclStatus(off="none (no policy)")
    if users.audit:
        return AclStatus(off="none (the policy is in audit mode: a dry run enforces nothing)")
    try:
        if config.upstream_cluster:
            nodes = await cluster_nodes(config.upstream_cluster[0])
        elif config.upstream_sentinel is not None:
            nodes = await server_and_replicas(config.upstream)
        else:
            nodes = [config.upstream]
    except (TimeoutError, OSError, ConnectionError, ValueError) as exc:
        return AclStatus(refused=[f"cluster nodes unknown: {exc}"])
    if config.upstream_acl:
        status = await apply(users, nodes)
    else:
        status = AclStatus(users=len(users.users), nodes=len(nodes), off="off (upstream_acl: off)")
    if not status.ok:
        status.present = await present(users, nodes)
        if not status.present and status.refused:
            log.warning("%s", status.line())
    return status

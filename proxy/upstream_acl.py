"""Creates and updates the policy's ACL users on the upstream (`policy/acl.py` compiles them).

At start and on every policy reload (`upstream_acl: on`, the default), over a short-lived
connection as the proxy's own upstream user: `ACL SETUSER` for every compiled user (each starts
with `reset`, so a user holds exactly what the policy says, whatever it held before: nothing
accumulates), then `ACL DELUSER` for the users of the same policy that it no longer compiles (an
application removed; only a user that still holds the password the proxy derives for it: never one
an operator made). In front of a Redis Cluster, on every node (ACL is not replicated: masters
and replicas alike), from `CLUSTER SHARDS`; in front of a Sentinel-managed master, on the master
and the replicas its `ROLE` lists. When the proxy's user may not run ACL SETUSER (or
`upstream_acl: off`), the users may still be there, made by operators who manage Redis users
themselves (`redis-guard policy acl FILE` prints them): each is tried with `AUTH` on every node,
and when all log in they are used (`AclStatus.usable`); else the proxy runs without the second
wall and says so. Nothing here raises: the outcome is an `AclStatus` for the start-up line and
the log. It also says (a warning) when the upstream's `default` user needs no password: anyone
who reaches Redis directly, not through the proxy, bypasses every rule.

Users are removed again (`remove`, `remove_for`) when their policy is renamed or replaced on a
reload, and at a clean exit: a policy's users go together, on each node, only when no connection
of another process is authenticated as any of them (CLIENT LIST's `user=`, minus this process's
own pooled connections by their address, the backend's `ours()`; a running proxy keeps its warm
spares open as the policy's user, so its users count as used while it runs), and only users that this
process applied (`CREATED`), whose name starts with `redis-guard:` and that still hold the
password the proxy derived for them (ACL GETUSER): a user an operator made or changed is never
deleted. When CLIENT LIST or ACL GETUSER is refused, nothing is deleted. After a reload the
backend's connections open as the new policy's users (`retarget`, a cluster's routers too), and
users still in use are tried again in the background for a bounded time (`retire`): the workers
of one proxy reload one by one, and each sees its siblings' connections until they switch.

ACL users live in the server's memory only (neither RDB nor AOF keeps them): a restarted server
has lost them and refuses the proxy's start-up AUTH with WRONGPASS. The `Keeper` of a worker
applies them again then (`UpstreamConnection.users_lost`), once for all the connections refused
at the same time, and logs it once; the refused connections run their start-up again and the
requests queued behind them go on. `/ready` checks that the users log in and applies them again
too (`monitor/ready.py`), so an idle proxy is ready again after a restart. A changed `run_id`
(`Keeper.opened`) is a restart too, for a server that kept older users (an aclfile). In front of a
Sentinel, all of this goes to the master the backend follows now (`following`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import logging
import time

import hiredis

from .backends.cluster.routing.slotmap import SlotMap
from .policy.acl import USER_PREFIX, password_for
from .tls import upstream_context
from .upstream.connection import SHARED, SPARE
from .upstream.probe import ask, ask_blocking

log = logging.getLogger("redis_guard.acl")


@dataclasses.dataclass
class AclStatus:
    users: int = 0  # users applied on every node reached
    nodes: int = 0
    refused: list[str] = dataclasses.field(default_factory=list)  # "node: why", one per node that refused
    off: str = ""  # why nothing was tried
    present: bool = False  # not applied, yet every user logs in: the operators made them
    open_default: bool = False  # the upstream's `default` user needs no password

    # Without the users, clients' scripts (EVAL, FCALL) run as the proxy's own upstream user.
    OPEN = "scripts (EVAL, FCALL) run as the proxy's own upstream user, unchecked inside"
    OPEN_DEFAULT = ("the upstream's `default` user has no password: whoever reaches Redis directly bypasses "
                    "the guard (set one: requirepass or ACL SETUSER default, and give it to the proxy's URL)")

    def line(self) -> str:
        """For the start-up line."""
        text = self._line()
        return f"{text}; {self.OPEN_DEFAULT}" if self.open_default else text

    def _line(self) -> str:
        where = f" on {self.nodes} nodes" if self.nodes > 1 else ""
        if self.present:
            why = self.off or f"not applied ({'; '.join(self.refused)})"
            return f"upstream ACL users: {why}; the {self.users} users found upstream are used{where}"
        if self.off.startswith("off"):
            return f"upstream ACL users: {self.off}: {self.OPEN}"
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


# policy name -> its AclUsers, for every policy whose users this process applied upstream: the
# only users it may remove (workers inherit it from the parent that applied them at start).
CREATED: dict[str, object] = {}


async def apply(users, upstreams, timeout: float = 5.0) -> AclStatus:
    """Apply `users` (an AclUsers) on each upstream node (Upstream objects)."""
    status = AclStatus(users=len(users.users), nodes=len(upstreams))
    setusers = [user.setuser() for user in users.users]
    for node in upstreams:
        why = await _apply_one(users, node, setusers, timeout)
        if why is None:
            CREATED[users.policy_name] = users
        else:
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
        stale = [name for name in users.stale(existing) if await _still_ours(node, name, timeout)]
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
            replies = await ask(node, logins, timeout, one_by_one=True)  # (see probe.ask_blocking)
        except (TimeoutError, OSError, ConnectionError):
            return False
        if any(isinstance(reply, hiredis.ReplyError) for reply in replies):
            return False
    return True


async def default_needs_no_password(node, timeout: float = 5.0) -> bool:
    """Is the node's `default` user on with `nopass`? False when unknown (NOPERM: the proxy's
    user may not look; unreachable)."""
    try:
        (reply,) = await ask(node, [("ACL", "GETUSER", "default")], timeout)
    except (TimeoutError, OSError, ConnectionError):
        return False
    if not isinstance(reply, list):
        return False  # an error (NOPERM, no ACL before Redis 6), or no such user
    fields = dict(zip(reply[::2], reply[1::2], strict=False))
    flags = fields.get(b"flags", fields.get("flags"))
    flags = {flag.decode() if isinstance(flag, bytes) else flag for flag in flags or ()}
    return "on" in flags and "nopass" in flags


async def cluster_nodes(seed, timeout: float = 5.0) -> list:
    """Every node of the cluster (masters and replicas) as an Upstream with the seed's
    credentials, from CLUSTER SHARDS (CLUSTER SLOTS on servers without it)."""
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


def following(config, backend=None):
    """`config` with a Sentinel-managed master's current address (the backend follows failovers;
    the configuration holds the master of start-up) as its upstream."""
    address = getattr(backend, "address", None)
    if config.upstream_sentinel is None or address is None or address == config.upstream.address:
        return config
    return config.replace(upstream=dataclasses.replace(config.upstream, address=address))


async def apply_for(config, users) -> AclStatus:
    """Apply on the configured upstream: the server (with a Sentinel, its replicas too), or
    every node of the cluster."""
    seed = config.upstream_cluster[0] if config.upstream_cluster else config.upstream
    open_default = await default_needs_no_password(seed)
    if open_default:
        log.warning("upstream %s: %s", seed.address, AclStatus.OPEN_DEFAULT)
    status = await _apply_for(config, users)
    status.open_default = open_default
    return status


async def _apply_for(config, users) -> AclStatus:
    if users is None:
        return AclStatus(off="none (no policy)")
    if users.audit:
        return AclStatus(off="none (the policy is in audit mode: a dry run enforces nothing)")
    try:
        nodes = await _nodes(config)
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


def _fields(line: str) -> dict[str, str]:
    return dict(part.split("=", 1) for part in line.split(" ") if "=" in part)


async def users_in_use(node, names, own, timeout: float = 5.0) -> set[str] | None:
    """The users of `names` that a connection of another process (its address not in `own`) is
    authenticated as on `node`, from CLIENT LIST; None when CLIENT LIST is refused."""
    (listing,) = await ask(node, [("CLIENT", "LIST")], timeout)
    if isinstance(listing, hiredis.ReplyError) or not isinstance(listing, (bytes, str)):
        return None
    text = listing.decode("utf-8", "replace") if isinstance(listing, bytes) else listing
    used = set()
    for line in text.splitlines():
        fields = _fields(line)
        if fields.get("user") in names and fields.get("addr") not in own:
            used.add(fields["user"])
    return used


async def _still_ours(node, name: str, timeout: float) -> bool:
    """Does the user on the server still hold exactly the password the proxy derives for it
    (`policy.acl.password_for`, ACL GETUSER)?"""
    (reply,) = await ask(node, [("ACL", "GETUSER", name)], timeout)
    if not isinstance(reply, list):
        return False  # gone, or GETUSER refused
    described = dict(zip(reply[0::2], reply[1::2]))
    hashes = described.get(b"passwords", described.get("passwords"))
    wanted = hashlib.sha256(password_for(name, node.password).encode()).hexdigest()
    return isinstance(hashes, list) and [h.decode() if isinstance(h, bytes) else h for h in hashes] == [wanted]


async def remove(users, upstreams, own=frozenset(), timeout: float = 5.0, wait: float = 0.0) -> list[str]:
    """Delete the users of `users` (an AclUsers this process applied) on each node where no
    connection of another process is authenticated as any of them, waiting up to `wait` seconds
    for such connections to go (workers stopping together). What was done, one line a node."""
    if users.policy_name not in CREATED:
        return []
    names = {user.name for user in users.users if user.name.startswith(USER_PREFIX + ":")}
    done = []
    for node in upstreams:
        try:
            deadline = asyncio.get_running_loop().time() + wait
            while True:
                used = await users_in_use(node, names, own, timeout)
                if used and asyncio.get_running_loop().time() < deadline:
                    await asyncio.sleep(0.1)
                    continue
                break
            if used is None:
                done.append(f"{node.address}: kept (CLIENT LIST refused: whether another proxy uses them is unknown)")
                continue
            if used:
                done.append(f"{node.address}: kept, in use by another connection ({', '.join(sorted(used))})")
                continue
            ours = [name for name in sorted(names) if await _still_ours(node, name, timeout)]
            if ours:
                (deleted,) = await ask(node, [("ACL", "DELUSER", *ours)], timeout)
                if isinstance(deleted, hiredis.ReplyError):
                    done.append(f"{node.address}: not removed ({deleted})")
                    continue
                done.append(f"{node.address}: removed {', '.join(ours)}")
        except (TimeoutError, OSError, ConnectionError) as exc:
            done.append(f"{node.address}: unreachable: {exc}")
    return done


async def _nodes(config) -> list:
    if config.upstream_cluster:
        return await cluster_nodes(config.upstream_cluster[0])
    if config.upstream_sentinel is not None:
        return await server_and_replicas(config.upstream)
    return [config.upstream]


async def remove_for(config, users, own=frozenset(), wait: float = 0.0) -> list[str]:
    """`remove` on the configured upstream's nodes, the connections whose address is in `own`
    (this process's) excepted; the users are forgotten (`CREATED`) once removed everywhere."""
    if users is None or users.policy_name not in CREATED:
        return []
    try:
        nodes = await _nodes(config)
    except (TimeoutError, OSError, ConnectionError, ValueError) as exc:
        return [f"nodes unknown: {exc}"]
    own = {addr.decode() if isinstance(addr, bytes) else addr for addr in own}
    done = await remove(users, nodes, own, wait=wait)
    for line in done:
        log.info("upstream ACL users of policy '%s': %s", users.policy_name, line)
    if all(": removed " in line for line in done):
        CREATED.pop(users.policy_name, None)
    return done


def retarget(backend, old, new) -> bool:
    """After a reload replaced the policy's users `old` by `new`: the backend's connections for
    an identity of `old` open from now on as the matching user of `new` (same application, else
    the user of no application), so that `old` can be deleted under its sessions (a deleted
    user's connections are closed by Redis and reopen as the new user). False when the backend
    cannot, and `old` then stays until exit. In front of a cluster: the routers of an identity
    of `old` (their node pools) and its spare pools."""
    apps = {user.name: user.app for user in old.users}
    routers = getattr(backend, "routers", None)
    if isinstance(routers, dict):
        return _retarget_cluster(backend, routers, apps, new)
    openers = getattr(backend, "openers", None)
    if not isinstance(openers, dict):
        return False
    for key, opener in openers.items():
        identity = key[0]
        if isinstance(identity, tuple) and identity and identity[0] in apps:
            name, password = new.credentials_for(apps[identity[0]])
            opener.upstream = dataclasses.replace(opener.upstream, username=name, password=password)
    return True


def _retarget_cluster(backend, routers, apps, new) -> bool:
    def moved(upstream):
        name, password = new.credentials_for(apps[upstream.username])
        return dataclasses.replace(upstream, username=name, password=password)

    for identity, router in routers.items():
        if identity[0] in apps:
            router.username, router.password = new.credentials_for(apps[identity[0]])
            for pool in router.pools.values():
                pool.opener.upstream = moved(pool.opener.upstream)
    for (_node, _protocol, identity), spares in getattr(backend, "spares", {}).items():
        if identity[0] in apps:
            spares.opener.upstream = moved(spares.opener.upstream)
    return True


async def retire(config, backend, current, every: float = 1.0, within: float = 30.0) -> None:
    """A reload applied `current`: remove the users of the policies this process applied before
    (a renamed or replaced policy), where no other process uses them. Those kept because another
    connection still uses them (the sibling workers, which reload one by one, or another proxy)
    are tried again in the background every `every` seconds for up to `within` seconds (`RETRY`,
    cancelled by the next reload and at exit): each try first closes this process's idle
    connections still logged in as them (they reopen as `current`'s users), so once every worker
    has reloaded, the last one to try finds them unused and deletes them."""
    cancel_retry()
    kept = []
    for users in [users for name, users in CREATED.items() if name != current.policy_name]:
        if not retarget(backend, users, current):
            log.info("upstream ACL users of policy '%s' kept until exit (the cluster's connections use them)",
                     users.policy_name)
            continue
        await remove_for(config, users, backend.ours().addrs)
        if users.policy_name in CREATED:
            kept.append(users)
    if kept and within > 0:
        RETRY[0] = asyncio.ensure_future(_retry(config, backend, kept, every, within))


RETRY: list = [None]  # the background task of `retire` still trying, if any


def cancel_retry() -> None:
    task, RETRY[0] = RETRY[0], None
    if task is not None and not task.done():
        task.cancel()


def close_idle_as(backend, names) -> set:
    """Close this process's connections logged in as one of `names` that wait for no reply and
    belong to no client (shared and spare ones): they reopen, when next needed, as the user their
    opener says now (`retarget`). The addresses Redis knows the closed ones by (it may list them
    a moment longer)."""
    closed = set()
    for role, conn in backend.connections():
        upstream = conn.upstream
        if (role in (SHARED, SPARE) and upstream is not None and upstream.username in names
                and not conn.pending):
            if conn.sockname is not None:
                closed.add(conn.sockname)
            conn.close()
    return closed


async def _retry(config, backend, kept, every: float, within: float) -> None:
    deadline = asyncio.get_running_loop().time() + within
    while kept and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(every)
        for users in list(kept):
            if users.policy_name not in CREATED:  # removed meanwhile (at exit, or by another reload)
                kept.remove(users)
                continue
            closed = close_idle_as(backend, {user.name for user in users.users})
            await remove_for(config, users, backend.ours().addrs | closed)
            if users.policy_name not in CREATED:
                kept.remove(users)
    for users in kept:
        log.info("upstream ACL users of policy '%s' kept until exit (still in use %gs after the reload)",
                 users.policy_name, within)


async def remove_at_exit(config, own=frozenset(), wait: float = 0.0) -> None:
    """At a clean exit (the proxy's connections closed; `own` their addresses): remove the users
    this process applied, waiting up to `wait` seconds for the connections of workers stopping
    with it to go."""
    cancel_retry()
    for users in list(CREATED.values()):
        await remove_for(config, users, own, wait=wait)


class Keeper:
    """Applies a worker's ACL users again when a server refused them (a restart without them):
    `reapply(label)` is a future of whether they log in again; the connections refused meanwhile
    share one attempt, and an attempt that failed is not repeated for `RETRY_AFTER` seconds. In
    front of a Sentinel, on the master the backend follows now (`following`), not that of start-up.
    Once they are back, `after` loads what else the restart lost (the approved function libraries)."""

    RETRY_AFTER = 1.0

    def __init__(self, config, users, clock=time.monotonic, backend=None, after=None):
        self.config = config
        self.users = users
        self.backend = backend
        self.after = after  # (config) -> awaitable: what a restart lost besides the users (approved scripts)
        self.clock = clock
        self.running = None  # the future of the attempt under way
        self.failed_at = float("-inf")
        self.applied_at = float("-inf")
        self.applied = 0  # times the users were applied again (for tests and the log)
        self.run_ids: dict = {}  # address -> (the server's run_id seen last, `applied` then)
        self.run_id_due: dict = {}  # address -> clock of its next check (one at a time)

    def owns(self, name) -> bool:
        return bool(name) and any(user.name == name for user in self.users.users)

    def reapply(self, label: str, why: str = "refused the policy's ACL users (restarted without them)"):
        if self.running is not None and not self.running.done():
            return self.running
        loop = asyncio.get_running_loop()
        recent = self.clock() - self.failed_at < self.RETRY_AFTER
        if recent or self.clock() - self.applied_at < self.RETRY_AFTER:  # just applied: the start-up runs again
            future = loop.create_future()
            future.set_result(not recent)
            return future
        self.running = loop.create_task(self._apply(label, why))
        return self.running

    async def _apply(self, label: str, why: str) -> bool:
        status = await apply_for(following(self.config, self.backend), self.users)
        if status.ok:
            self.applied += 1
            self.applied_at = self.clock()
            log.warning("upstream %s %s: %s again", label, why, status.line().removeprefix("upstream ACL users: "),
                        extra={"fields": {"event": "acl_users_reapplied", "upstream": label}})
            if self.after is not None:
                await self.after(following(self.config, self.backend))
            return True
        self.failed_at = self.clock()
        log.error("upstream %s refused the policy's ACL users and they could not be applied again: %s",
                  label, status.line(), extra={"fields": {"event": "acl_users_lost", "upstream": label}})
        return False


    # -- a changed run_id: the server restarted -------------------------------------------------

    RUN_ID_EVERY = 1.0  # seconds: at most one INFO server per address in this time

    def opened(self, address) -> None:
        """A connection to `address` is being opened (start-up, a reconnect): its server's run_id
        is compared with the one seen last, over a connection of its own as the proxy's upstream
        user (INFO server), at most once a RUN_ID_EVERY per address (a burst of reconnects, one
        check at its end). A change is a restart: logged once, the users applied again, since a
        server that kept users (an aclfile) may hold an older policy's. Off the serving path."""
        if address in self.run_id_due:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        delay = max(0.0, self.run_ids.get(address, (None, 0, float("-inf")))[2] + self.RUN_ID_EVERY - self.clock())
        self.run_id_due[address] = self.clock() + delay
        loop.call_later(delay, lambda: loop.create_task(self._check_run_id(address)))

    async def _check_run_id(self, address) -> None:
        try:
            own = dataclasses.replace(self.config.upstream, address=address)
            try:
                (reply,) = await ask(own, [("INFO", "server")], 2.0)
            except (TimeoutError, OSError, ConnectionError):
                return
            run_id = run_id_of(reply)
            if run_id is None:
                return
            seen, applied, _at = self.run_ids.get(address, (None, self.applied, 0.0))
            self.run_ids[address] = (run_id, self.applied, self.clock())
            if seen is None or seen == run_id or applied != self.applied:  # first look; same; applied since
                return
            self.reapply(str(address), f"restarted (run_id {run_id[:8]}, was {seen[:8]})")
        finally:
            self.run_id_due.pop(address, None)


def run_id_of(reply) -> str | None:
    """The run_id line of INFO server's reply (None: refused, or none)."""
    if isinstance(reply, bytes):
        reply = reply.decode("utf-8", "replace")
    if not isinstance(reply, str):
        return None
    for line in reply.splitlines():
        if line.startswith("run_id:"):
            return line.split(":", 1)[1].strip() or None
    return None


def missing(users, upstream, timeout: float = 1.0, everyone: bool = False) -> list[str]:
    """The users that do not log in on `upstream` (blocking, for the readiness probe's thread):
    their names, or ["?"] with why when the server could not be asked. Without `everyone`, the
    user of clients of no application only: every version of the policy has it, whereas the
    users of applications come and go with reloads in the workers, which this process (the
    monitor's, the parent of workers) does not follow."""
    checked = users.users if everyone else [users.by_app[None]]
    try:
        _, replies = ask_blocking(upstream, [("AUTH", user.name, user.password) for user in checked], timeout,
                                  one_by_one=True)  # (a failed AUTH's reply: see ask_blocking)
    except OSError as exc:
        return [f"? ({exc.strerror or exc})"]
    return [user.name for user, reply in zip(checked, replies, strict=False)
            if isinstance(reply, hiredis.ReplyError)]

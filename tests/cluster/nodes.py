"""A real Redis Cluster for tests: N masters x R replicas of redis-server on loopback, ended by pid.

    cluster = RedisCluster(masters=3, replicas=1)
    try:
        node = cluster.master_for_key("user:1")
        cluster.client(node).set("user:1", "x")
        cluster.migrate_slot(cluster.keyslot("user:1"), node, other)   # or begin/move_keys/finish
        cluster.kill(node); new = cluster.wait_for_failover(node)
    finally:
        cluster.close()

Also: replicas=0; ports=[...] (fixed ports, for replies whose bytes name them); join=False (nodes
that have not met: call create() to join them, or meet and assign slots by hand); bind= (more
addresses to listen on, e.g. "::1 127.0.0.1"). `addresses` gives each node as a proxy.config.Address.

Every wait is bounded in time and in number of polls; every process is one this class started and
is stopped by its own pid. Nothing listens anywhere but 127.0.0.1 unless `bind` says so, and port
6379 is never used.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from proxy.config import Address
from tests.servers import STARTED, missing_cluster_tools, redis_server_binary, wait_for, worker_slice

HOST = "127.0.0.1"
BUS_OFFSET = 10000
SLOTS = 16384
POLL = 0.05  # seconds between polls of every bounded wait


class ClusterError(RuntimeError):
    pass


def _no_retry() -> Retry:
    # redis-py >= 6 retries connection errors 3 times with a backoff of seconds by default, which
    # turns every probe of a killed node into a long stall.
    return Retry(NoBackoff(), 0)


def _bindable(port: int) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((HOST, port))
        except OSError:
            return False
    return True


def _ephemeral_low() -> int:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def pick_cluster_ports(count: int, avoid: set[int] = frozenset(), attempts: int = 2000) -> list[int]:
    """`count` ports P with P and P+10000 (the cluster bus port) both free and < 65536.

    Candidates are drawn below the kernel's ephemeral range (bus port included) so outgoing
    connections cannot take them between the check and redis-server's bind, from this pytest-xdist
    worker's slice so that workers cannot both take one; 6379 is never chosen.
    """
    # P in 10000-19999 (bus 20000-29999: below the ephemeral start, above tests/servers.PORTS), the
    # pytest-xdist worker's own slice of it.
    low, high = worker_slice(10000, min(_ephemeral_low() - BUS_OFFSET, 20000))
    rng = random.Random()
    taken = set(avoid)
    chosen: list[int] = []
    for _ in range(attempts):
        if len(chosen) == count:
            break
        port = rng.randrange(low, high) if high - low > 100 else _os_free_port()
        bus = port + BUS_OFFSET
        if port == 6379 or bus >= 65536 or {port, bus} & taken:
            continue
        if _bindable(port) and _bindable(bus):
            chosen.append(port)
            taken |= {port, bus}
    if len(chosen) < count:
        raise ClusterError(f"found only {len(chosen)} of {count} free port pairs in {attempts} tries")
    return chosen


def _os_free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


@dataclass(eq=False)
class ClusterNode:
    """One redis-server of the cluster. `role`/`master_id` are as of the last `RedisCluster.refresh()`."""

    port: int
    process: subprocess.Popen | None = None
    node_id: str = ""
    role: str = "master"  # "master" or "replica"
    master_id: str | None = None  # for a replica: its master's node id
    log_path: str = ""
    paused: bool = False  # SIGSTOPped by RedisCluster.pause()/kill(node, SIGSTOP)
    _control: redis.Redis | None = field(default=None, repr=False)

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    @property
    def address(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def bus_port(self) -> int:
        return self.port + BUS_OFFSET

    @property
    def running(self) -> bool:
        """The process exists (it may be paused)."""
        return self.process is not None and self.process.poll() is None

    @property
    def alive(self) -> bool:
        """Running and not paused: expected to answer."""
        return self.running and not self.paused

    @property
    def is_master(self) -> bool:
        return self.role == "master"

    def log(self, tail: int = 40) -> str:
        try:
            with open(self.log_path, errors="replace") as f:
                return "".join(f.readlines()[-tail:])
        except OSError:
            return ""

    def __repr__(self) -> str:  # short, for assertion messages
        state = "up" if self.alive else "paused" if self.running else "down"
        return f"<ClusterNode {self.port} {self.role} {self.node_id[:8]} pid={self.pid} {state}>"


class RedisCluster:
    def __init__(self, masters: int = 3, replicas: int = 1, *, node_timeout_ms: int = 1000,
                 ready_timeout: float = 30.0, extra_args: tuple[str, ...] = (),
                 ports: Sequence[int] | None = None, join: bool = True, bind: str = HOST):
        """`masters * (1 + replicas)` nodes, joined and ready unless `join=False` (then each node is
        its own one-node cluster owning no slot, and the masters/replicas split is only what a
        later `create()` uses). `ports`: exactly these (bus: port + 10000), or fail; by default
        free ones. `bind`: what redis-server listens on; it must include 127.0.0.1."""
        missing = missing_cluster_tools()
        if missing:
            raise ClusterError(f"{' and '.join(missing)} not installed (apt-get install -y redis-server)")
        if join and masters < 3:
            # redis-cli --cluster create refuses fewer than 3 masters
            raise ClusterError("a Redis Cluster needs at least 3 masters")
        total = masters * (1 + replicas)
        if ports is not None and (len(ports) != total or 6379 in ports):
            raise ClusterError(f"ports: want {total} ports other than 6379, got {list(ports)}")
        self.masters_count = masters
        self.replicas_count = replicas
        self.node_timeout_ms = node_timeout_ms
        self.extra_args = tuple(extra_args)
        self.bind = bind
        self.dir = tempfile.mkdtemp(prefix="rg-test-cluster-")
        self.nodes: list[ClusterNode] = []
        self._clients: list[redis.Redis] = []
        try:
            for port in ports if ports is not None else pick_cluster_ports(total):
                self.nodes.append(self._start_node(port, attempts=1 if ports is not None else 5))
            if join:
                self.create(ready_timeout)
        except BaseException:
            self.close()
            raise

    # ---------------------------------------------------------------- processes

    def _spawn(self, node: ClusterNode) -> None:
        args = [redis_server_binary(), "--port", str(node.port), "--bind", self.bind,
                "--cluster-enabled", "yes", "--cluster-config-file", f"nodes-{node.port}.conf",
                "--cluster-node-timeout", str(self.node_timeout_ms),
                "--save", "", "--appendonly", "no", "--dir", self.dir,
                # 7.0 waits 5 s before a diskless full sync to batch replicas; nothing to batch here
                "--repl-diskless-sync-delay", "0",
                # CLUSTER SHARDS calls a replica 'loading' until its offset passes 0, which takes the
                # master's first replication ping (every 10 s by default)
                "--repl-ping-replica-period", "1", *self.extra_args]
        node.log_path = os.path.join(self.dir, f"redis-{node.port}.log")
        with open(node.log_path, "ab") as log:
            node.process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, cwd=self.dir)
        STARTED.append("cluster node")

    def _wait_started(self, node: ClusterNode, timeout: float = 10.0) -> bool:
        """True once `node`'s own process answers on its port (checked by pid, not just a listener)."""
        deadline = time.monotonic() + timeout
        for _ in range(int(timeout / POLL) + 1):
            if not node.alive or time.monotonic() > deadline:
                break
            try:
                if int(self._control(node).info("server")["process_id"]) == node.pid:
                    return True
            except (redis.RedisError, OSError, KeyError, ValueError):
                pass
            time.sleep(POLL)
        return False

    def _start_node(self, port: int, attempts: int = 5) -> ClusterNode:
        """Start a node on `port`; if another process wins that port meanwhile, take fresh ports."""
        for _ in range(attempts):
            node = ClusterNode(port=port)
            self._spawn(node)
            if self._wait_started(node):
                node.node_id = self.command(node, "CLUSTER", "MYID")
                return node
            self._stop_process(node, signal.SIGKILL)
            self._drop_control(node)
            used = {n.port for n in self.nodes} | {n.bus_port for n in self.nodes}
            port = pick_cluster_ports(1, avoid=used | {port, port + BUS_OFFSET})[0]
        raise ClusterError(f"could not start a cluster node after {attempts} attempts:\n{node.log()}")

    def _stop_process(self, node: ClusterNode, sig: int = signal.SIGTERM, timeout: float = 10.0) -> None:
        proc = node.process
        if proc is None:
            return
        if proc.poll() is None:
            try:
                os.kill(proc.pid, sig)
            except ProcessLookupError:
                pass
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(timeout)

    def create(self, timeout: float = 30.0, *, wait: bool = True) -> None:
        """Join every node with `redis-cli --cluster create` (the first `masters` nodes become the
        masters, in order); then, unless `wait=False`, wait_ready()."""
        cmd = ["redis-cli", "--cluster", "create", *[n.address for n in self.nodes],
               "--cluster-replicas", str(self.replicas_count), "--cluster-yes"]
        try:
            out = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                 timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            raise ClusterError(f"redis-cli --cluster create took over {timeout}s") from exc
        if out.returncode != 0 or "[OK] All 16384 slots covered" not in out.stdout:
            raise ClusterError(f"redis-cli --cluster create failed ({out.returncode}):\n"
                               f"{out.stdout}\n{out.stderr}")
        if wait:
            self.wait_ready(timeout, masters=self.masters_count,
                            replicas=self.masters_count * self.replicas_count)

    # ---------------------------------------------------------------- connections

    def _control(self, node: ClusterNode) -> redis.Redis:
        """A cached decode_responses connection for this class's own commands (no retries)."""
        if node._control is None:
            node._control = redis.Redis(host=HOST, port=node.port, decode_responses=True,
                                        socket_timeout=10, socket_connect_timeout=2,
                                        retry=_no_retry())
        return node._control

    def _drop_control(self, node: ClusterNode) -> None:
        if node._control is not None:
            node._control.close()
            node._control = None

    def client(self, node: ClusterNode, **kwargs) -> redis.Redis:
        """A plain (non-cluster) redis-py client to this one node; closed by `close()`."""
        options = {"host": HOST, "port": node.port, "socket_timeout": 10,
                   "socket_connect_timeout": 2, "retry": _no_retry(), **kwargs}
        client = redis.Redis(**options)
        self._clients.append(client)
        return client

    def command(self, node: ClusterNode, *args):
        """Run one command on `node` (decoded replies) - for CLUSTER/INFO/WAIT and the like."""
        return self._control(node).execute_command(*args)

    def _live(self) -> list[ClusterNode]:
        return [n for n in self.nodes if n.alive]

    def _any_live(self, prefer_master: bool = True) -> ClusterNode:
        live = self._live()
        if prefer_master:
            live.sort(key=lambda n: not n.is_master)
        for node in live:
            try:
                self.command(node, "PING")
                return node
            except (redis.RedisError, OSError):
                continue
        raise ClusterError("no cluster node answers")

    # ---------------------------------------------------------------- topology

    @property
    def addresses(self) -> list[Address]:
        """Every node (live or not, in start order) as the proxy spells an address."""
        return [Address(HOST, n.port) for n in self.nodes]

    @property
    def seeds(self) -> str:
        """'127.0.0.1:p1,127.0.0.1:p2,...' of the live nodes, for --upstream-cluster."""
        return ",".join(n.address for n in self._live())

    def node_by_id(self, node_id: str) -> ClusterNode:
        for node in self.nodes:
            if node.node_id == node_id:
                return node
        raise KeyError(node_id)

    def node_by_port(self, port: int) -> ClusterNode:
        for node in self.nodes:
            if node.port == port:
                return node
        raise KeyError(port)

    def cluster_nodes(self, via: ClusterNode) -> dict[str, dict]:
        """`via`'s CLUSTER NODES view: {node_id: {port, flags, master_id, slots(set), importing, migrating}}."""
        view: dict[str, dict] = {}
        for line in self.command(via, "CLUSTER", "NODES").splitlines():
            parts = line.split()
            if len(parts) < 8:
                continue
            node_id, addr, flags, master = parts[0], parts[1], set(parts[2].split(",")), parts[3]
            slots: set[int] = set()
            importing, migrating = {}, {}
            for item in parts[8:]:
                if item.startswith("["):  # [slot->-id] migrating, [slot-<-id] importing
                    body = item.strip("[]")
                    if "->-" in body:
                        slot, other = body.split("->-")
                        migrating[int(slot)] = other
                    elif "-<-" in body:
                        slot, other = body.split("-<-")
                        importing[int(slot)] = other
                    continue
                lo, _, hi = item.partition("-")
                slots.update(range(int(lo), int(hi or lo) + 1))
            port = int(addr.split("@")[0].rsplit(":", 1)[1])
            view[node_id] = {"port": port, "flags": flags,
                             "master_id": None if master == "-" else master,
                             "slots": slots, "importing": importing, "migrating": migrating}
        return view

    def refresh(self) -> list[ClusterNode]:
        """Update every node's role/master_id from a live node's CLUSTER NODES (killed nodes keep theirs)."""
        via = self._any_live()
        view = self.cluster_nodes(via)
        for node in self.nodes:
            entry = view.get(node.node_id)
            if entry is None:
                continue
            if "master" in entry["flags"]:
                node.role, node.master_id = "master", None
            elif "slave" in entry["flags"] or "replica" in entry["flags"]:
                node.role, node.master_id = "replica", entry["master_id"]
        return self.nodes

    def masters(self) -> list[ClusterNode]:
        """Live masters, as the cluster sees them now."""
        self.refresh()
        return [n for n in self.nodes if n.alive and n.is_master]

    def replicas(self, of: ClusterNode | None = None) -> list[ClusterNode]:
        """Live replicas (of one master if `of` is given), as the cluster sees them now."""
        self.refresh()
        return [n for n in self.nodes if n.alive and n.role == "replica"
                and (of is None or n.master_id == of.node_id)]

    def keyslot(self, key: str | bytes) -> int:
        return int(self.command(self._any_live(), "CLUSTER", "KEYSLOT", key))

    def shards(self, via: ClusterNode | None = None) -> list[dict]:
        """CLUSTER SHARDS normalised: [{'slots': [(lo, hi), ...], 'nodes': [{'id', 'port', 'role', 'health', ...}]}]."""
        raw = self.command(via or self._any_live(), "CLUSTER", "SHARDS")
        shards = []
        for shard in raw:
            if not isinstance(shard, dict):  # unparsed RESP2: flat key/value list
                shard = dict(zip(shard[::2], shard[1::2]))
            nodes = [n if isinstance(n, dict) else dict(zip(n[::2], n[1::2])) for n in shard["nodes"]]
            flat = [int(s) for s in shard["slots"]]
            shards.append({"slots": list(zip(flat[::2], flat[1::2])), "nodes": nodes})
        return shards

    def owner_of_slot(self, slot: int, via: ClusterNode | None = None) -> ClusterNode:
        """The master serving `slot` according to `via`'s (or any live node's) CLUSTER SHARDS."""
        for shard in self.shards(via):
            if any(lo <= slot <= hi for lo, hi in shard["slots"]):
                # Redis 7.2+ keeps a failed-over master in its shard, still called master (health
                # "fail"): the online one serves the slot.
                masters = sorted((entry for entry in shard["nodes"] if entry.get("role") == "master"),
                                 key=lambda entry: entry.get("health") != "online")
                if masters:
                    return self.node_by_id(masters[0]["id"])
        raise ClusterError(f"no master owns slot {slot}")

    def master_for_key(self, key: str | bytes) -> ClusterNode:
        return self.owner_of_slot(self.keyslot(key))

    def node_for_key_not_owning(self, key: str | bytes) -> ClusterNode:
        """A live master that does NOT own `key`'s slot (answers -MOVED for it)."""
        owner = self.master_for_key(key)
        return next(n for n in self.masters() if n is not owner)

    # ---------------------------------------------------------------- waiting

    def _wait(self, what: str, check, timeout: float):
        """wait_for(check), with ClusterError and every node's state when it times out."""
        try:
            return wait_for(check, timeout, what, interval=POLL,
                            errors=(redis.RedisError, OSError, ClusterError, KeyError))
        except TimeoutError as exc:
            raise ClusterError(f"{exc}\n{self.describe()}") from None

    def _info_field(self, node: ClusterNode, section: str, name: str) -> str | None:
        text = self.command(node, "INFO", section) if section != "cluster" else \
            self.command(node, "CLUSTER", "INFO")
        if isinstance(text, dict):
            value = text.get(name)
            return None if value is None else str(value)
        for line in text.splitlines():
            if line.startswith(name + ":"):
                return line.split(":", 1)[1].strip()
        return None

    def _state_ok(self, node: ClusterNode) -> bool:
        return self._info_field(node, "cluster", "cluster_state") == "ok"

    @staticmethod
    def _shape(view: dict[str, dict]) -> dict[str, tuple]:
        """What every node must agree on: each node's role, master and slots (not its failure flags)."""
        return {node_id: ("master" if "master" in e["flags"] else "replica",
                          e["master_id"], frozenset(e["slots"]))
                for node_id, e in view.items()}

    def _converged(self) -> dict[str, tuple] | None:
        """The agreed shape if every live node says cluster_state:ok, knows every node, sees no live
        node as failing, and all live nodes' views agree on roles, masters and slot owners."""
        live = self._live()
        live_ids = {n.node_id for n in live}
        agreed = None
        for node in live:
            if not self._state_ok(node):
                return None
            view = self.cluster_nodes(node)
            if len(view) != len(self.nodes):
                return None
            for node_id, entry in view.items():
                failing = "fail" in entry["flags"] or "fail?" in entry["flags"]
                if failing and (node_id in live_ids or entry["slots"]):
                    return None
            shape = self._shape(view)
            if agreed is None:
                agreed = shape
            elif shape != agreed:
                return None
        return agreed

    def _all_online(self) -> bool:
        """Every live node's CLUSTER SHARDS calls every live node 'online' (not 'loading')."""
        live = self._live()
        for node in live:
            health = {e.get("id"): e.get("health") for shard in self.shards(node) for e in shard["nodes"]}
            if any(health.get(n.node_id) != "online" for n in live):
                return False
        return True

    def _replicas_linked(self) -> bool:
        """Every live replica's master_link_status is up."""
        for node in self._live():
            info = self.command(node, "INFO", "replication")
            if info.get("role") == "slave" and info.get("master_link_status") != "up":
                return False
        return True

    def wait_ready(self, timeout: float = 30.0, *, masters: int | None = None,
                   replicas: int | None = None) -> None:
        """Until every live node says cluster_state:ok, all live views agree on roles and slot owners
        (optionally: with this many slot-owning masters and replicas), every node's own INFO role
        matches that view, every replica's master_link_status is up and every live node's CLUSTER
        SHARDS calls every live node online."""

        def ready():
            shape = self._converged()
            if shape is None:
                return False
            owners = sum(1 for role, _, slots in shape.values() if role == "master" and slots)
            followers = sum(1 for role, _, _ in shape.values() if role == "replica")
            if masters is not None and owners != masters:
                return False
            if replicas is not None and followers != replicas:
                return False
            for node in self._live():
                role = self.command(node, "INFO", "replication").get("role")
                if ("master" if role == "master" else "replica") != shape[node.node_id][0]:
                    return False
            return self._replicas_linked() and self._all_online()

        self._wait("cluster_state:ok on every node, agreeing views, all replica links up and all online",
                   ready, timeout)
        self.refresh()

    def describe(self) -> str:
        lines = []
        for node in self.nodes:
            line = repr(node)
            if node.alive:
                try:
                    line += " state=" + str(self._info_field(node, "cluster", "cluster_state"))
                    line += " link=" + str(self._info_field(node, "replication", "master_link_status"))
                except (redis.RedisError, OSError) as exc:
                    line += f" unreachable ({exc!r})"
            lines.append(line)
        return "\n".join(lines)

    # ---------------------------------------------------------------- faults

    def kill(self, node: ClusterNode, sig: int = signal.SIGKILL) -> None:
        """Signal this node's own process (by pid) and reap it (SIGTERM falls back to SIGKILL after
        10 s). SIGSTOP/SIGCONT pause/resume it instead (see pause/resume)."""
        if sig == signal.SIGSTOP:
            return self.pause(node)
        if sig == signal.SIGCONT:
            return self.resume(node)
        if node.paused and node.running and sig != signal.SIGKILL:
            # A stopped process would not act on SIGTERM; SIGKILL ends it without letting it run
            # again (a hung server that dies answers nothing of what it was sent).
            os.kill(node.pid, signal.SIGCONT)
        node.paused = False
        self._stop_process(node, sig)
        self._drop_control(node)

    def pause(self, node: ClusterNode) -> None:
        """SIGSTOP the node: it keeps its sockets but answers nothing (a hung server). Paused nodes are
        left out of `seeds`, `masters()`, `replicas()` and every wait."""
        if not node.running:
            raise ClusterError(f"{node!r} is not running")
        os.kill(node.pid, signal.SIGSTOP)
        node.paused = True
        self._drop_control(node)

    def resume(self, node: ClusterNode) -> None:
        """SIGCONT a paused node (no wait; call wait_ready() to wait for it to rejoin)."""
        if node.running:
            os.kill(node.pid, signal.SIGCONT)
        node.paused = False

    def restart(self, node: ClusterNode, timeout: float = 30.0) -> None:
        """Start a stopped node again on its port with its nodes-P.conf; it rejoins (a dead old master
        comes back as a replica of whoever replaced it). Waits until the cluster is ready again."""
        if node.running:
            raise ClusterError(f"{node!r} is still running")
        self._drop_control(node)
        self._spawn(node)
        if not self._wait_started(node):
            raise ClusterError(f"{node!r} did not come back:\n{node.log()}")
        self.wait_ready(timeout)

    def wait_for_failover(self, old_master: ClusterNode, timeout: float = 30.0) -> ClusterNode:
        """After `old_master` died (or was paused): until one of its replicas is master, owns its slots in every live
        node's view, and cluster_state is ok everywhere reachable. Returns the promoted node."""
        candidates = [n for n in self.nodes if n.master_id == old_master.node_id and n.alive]
        if not candidates:
            raise ClusterError(f"{old_master!r} has no live replica to fail over to")

        def promoted():
            for node in candidates:
                if self._info_field(node, "replication", "role") == "master":
                    return node
            return None

        new = self._wait(f"a replica of {old_master!r} to become master", promoted, timeout)

        def settled():
            shape = self._converged()
            if shape is None:
                return False
            role, _, slots = shape[new.node_id]
            return role == "master" and slots and not shape[old_master.node_id][2]

        self._wait(f"every live node to see {new!r} as master with cluster_state:ok", settled, timeout)
        self.refresh()
        return new

    # ---------------------------------------------------------------- resharding

    def begin_migration(self, slot: int, src: ClusterNode, dst: ClusterNode) -> None:
        """IMPORTING on dst first, then MIGRATING on src (the order redis-cli uses)."""
        self.command(dst, "CLUSTER", "SETSLOT", slot, "IMPORTING", src.node_id)
        self.command(src, "CLUSTER", "SETSLOT", slot, "MIGRATING", dst.node_id)

    def keys_in_slot(self, node: ClusterNode, slot: int, count: int = 1000) -> list[str]:
        return self.command(node, "CLUSTER", "GETKEYSINSLOT", slot, count)

    def move_keys(self, slot: int, src: ClusterNode, dst: ClusterNode, keys_batch: int = 100,
                  limit: int | None = None, replace: bool = False, timeout: float = 30.0) -> int:
        """MIGRATE the slot's keys from src to dst in batches; at most `limit` keys if given.
        Returns how many keys moved. Bounded by `timeout` and a batch count."""
        moved = 0
        deadline = time.monotonic() + timeout
        max_batches = 100_000
        for _ in range(max_batches):
            want = keys_batch if limit is None else min(keys_batch, limit - moved)
            if want <= 0:
                return moved
            keys = self.keys_in_slot(src, slot, want)
            if not keys:
                return moved
            if time.monotonic() > deadline:
                break
            args = ["MIGRATE", dst.address.split(":")[0], dst.port, "", 0, 5000]
            if replace:
                args.append("REPLACE")
            self.command(src, *args, "KEYS", *keys)
            moved += len(keys)
        raise ClusterError(f"move_keys of slot {slot} not done after {timeout}s ({moved} moved)")

    def finish_migration(self, slot: int, src: ClusterNode, dst: ClusterNode, timeout: float = 30.0) -> None:
        """SETSLOT NODE dst on dst, then src, then every other live master; wait until every live node
        sees dst owning the slot and nobody is migrating/importing it."""
        leftover = self.keys_in_slot(src, slot, 10)
        if leftover:
            raise ClusterError(f"slot {slot} still has keys on {src!r}: {leftover}")
        self.command(dst, "CLUSTER", "SETSLOT", slot, "NODE", dst.node_id)
        self.command(src, "CLUSTER", "SETSLOT", slot, "NODE", dst.node_id)
        for node in self.masters():
            if node is not src and node is not dst:
                self.command(node, "CLUSTER", "SETSLOT", slot, "NODE", dst.node_id)

        def agreed():
            for node in self._live():
                view = self.cluster_nodes(node)
                if slot not in view[dst.node_id]["slots"]:
                    return False
                for entry in view.values():
                    if slot in entry["importing"] or slot in entry["migrating"]:
                        return False
            return True

        self._wait(f"every live node to see slot {slot} on {dst!r}", agreed, timeout)

    def migrate_slot(self, slot: int, src: ClusterNode, dst: ClusterNode, keys_batch: int = 100,
                     timeout: float = 30.0) -> int:
        """The full manual resharding of one slot; returns the number of keys moved."""
        self.begin_migration(slot, src, dst)
        moved = self.move_keys(slot, src, dst, keys_batch=keys_batch, timeout=timeout)
        self.finish_migration(slot, src, dst, timeout=timeout)
        return moved

    @contextmanager
    def migration(self, slot: int, src: ClusterNode, dst: ClusterNode, keys_batch: int = 100):
        """`with cluster.migration(slot, a, b): ...` - the body runs with the slot MIGRATING/IMPORTING
        (call move_keys inside to move some keys); on a clean exit the rest move and the slot is
        handed over."""
        self.begin_migration(slot, src, dst)
        yield
        self.move_keys(slot, src, dst, keys_batch=keys_batch)
        self.finish_migration(slot, src, dst)

    # ---------------------------------------------------------------- teardown

    def close(self) -> None:
        for client in self._clients:
            try:
                client.close()
            except Exception:
                pass
        self._clients.clear()
        for node in self.nodes:  # signal all first, then reap: one shutdown wait, not six
            self._drop_control(node)
            if node.running:
                try:
                    if node.paused:
                        os.kill(node.pid, signal.SIGCONT)
                    os.kill(node.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
            node.paused = False
        for node in self.nodes:
            self._stop_process(node, signal.SIGTERM, timeout=10)
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> RedisCluster:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

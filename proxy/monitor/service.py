"""How `redis-guard serve` turns monitoring on: the calls `serve/command.py` makes, in their order.

Before forking: `prepare` (the command table's names, the policy loaded) and `bind` (the HTTP
address, so that a busy port fails the start with its address; with workers, the directory of
their snapshot sockets). In each worker once it listens: `worker_ready` (the proxy its
snapshot counts; with workers, its snapshot socket). After forking: `MonitorServer.start`.
On SIGTERM: `draining` (/ready answers 503 from then on, before the listener closes); at exit:
`release`.
"""

from __future__ import annotations

import asyncio
import dataclasses

from .. import upstream_acl
from ..backends.cluster.connection import Part, RoutedPending
from ..backends.sentinel import find_master
from ..config import NO_POLICY
from ..policy.acl import compile_users
from ..policy.building import build_engine
from . import live, liveness, snapshot, workers
from .http import BindError, MonitorServer, local_source, workers_source
from .ready import Readiness

__all__ = ["BindError", "bind", "draining", "prepare", "release", "worker_ready"]


def prepare(table, policy_path, engine) -> None:
    live.setup(table, (RoutedPending, Part))
    snapshot.policy_loaded(policy_path, engine)


def bind(config, acl_users=None, table=None) -> tuple[MonitorServer | None, str | None]:
    """(the HTTP server, not serving yet, or None without `metrics:`; the workers' snapshot
    directory, or None with one process). Raises BindError naming the address. `acl_users`: the
    policy's users the clients' connections run as (the readiness probe logs in as each)."""
    if config.metrics is None:
        return None, None
    directory = workers.make_directory() if config.workers > 1 else None
    source = workers_source(directory) if directory else local_source
    timeout = config.liveness_timeout
    alive = (lambda: workers.liveness(directory, timeout)) if directory else (lambda: liveness.check(timeout))
    upstreams = config.upstream_cluster or (config.upstream,)
    try:
        server = MonitorServer(config.metrics, source, readiness(config, upstreams, acl_users, table), alive)
    except BindError:
        if directory:
            workers.remove_directory(directory)
        raise
    return server, directory


def readiness(config, upstreams, acl_users, table=None) -> Readiness:
    """What /ready asks (monitor/ready.py); its calls run on the HTTP server's thread, each on a
    loop of its own (asyncio.run)."""
    locate = None
    if config.upstream_sentinel is not None:
        def locate() -> list:
            """The master the sentinels name now (ConnectionError when none is confirmed)."""
            address = asyncio.run(find_master(config.upstream_sentinel))
            return [dataclasses.replace(config.upstream, address=address)]

    if acl_users is None:
        return Readiness(upstreams, config.policy != NO_POLICY, workers=config.workers, locate=locate)

    def reapply(users, upstream) -> None:
        asyncio.run(upstream_acl.apply_for(config.replace(upstream=upstream), users))

    def current_users(names):
        """The users of the policy file as it is now, when the workers run it (a reload)."""
        if table is None:
            return None
        try:
            engine = build_engine(config.policy, table)
        except Exception:  # noqa: BLE001 - a file the workers refused too: not probed
            return None
        users = compile_users(engine, config.upstream.password) if engine is not None else None
        return users if users is not None and users.policy_name in names else None

    return Readiness(upstreams, config.policy != NO_POLICY, workers=config.workers, users=acl_users,
                     missing=upstream_acl.missing, reapply=reapply if config.upstream_acl else None,
                     locate=locate, current_users=current_users)


def worker_ready(proxy, directory: str | None) -> None:
    snapshot.attach(proxy)
    liveness.attach(proxy.loop)
    if directory:
        timeout = proxy.config.liveness_timeout
        workers.serve(directory, snapshot.build, lambda: liveness.turns(proxy.loop, timeout))


def release(monitor: tuple) -> None:
    """At exit: the workers' snapshot directory goes."""
    if monitor[1] is not None:
        workers.remove_directory(monitor[1])


def draining(server: MonitorServer | None) -> None:
    snapshot.set_draining()
    if server is not None:
        server.draining = True

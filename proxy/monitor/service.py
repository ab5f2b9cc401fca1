"""How `redis-guard serve` turns monitoring on: the calls `cli.py` makes, in their order.

Before forking: `prepare` (the command table's names, the policy loaded) and `bind` (the HTTP
address, so that a busy port fails the start with its address; with workers, the directory of
their snapshot sockets). In each worker once it listens: `worker_ready` (the proxy its
snapshot counts; with workers, its snapshot socket). After forking: `MonitorServer.start`.
On SIGTERM: `draining` (/ready answers 503 from then on, before the listener closes); at exit:
`release`.
"""

from __future__ import annotations

from ..config import NO_POLICY
from . import live, liveness, snapshot, workers
from .http import BindError, MonitorServer, local_source, workers_source
from .ready import Readiness

__all__ = ["BindError", "bind", "draining", "prepare", "release", "worker_ready"]


def prepare(table, policy_path, engine) -> None:
    live.setup(table)
    snapshot.policy_loaded(policy_path, engine)


def bind(config, acl_users=None) -> tuple[MonitorServer | None, str | None]:
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
        server = MonitorServer(config.metrics, source, readiness(config, upstreams, acl_users), alive)
    except BindError:
        if directory:
            workers.remove_directory(directory)
        raise
    return server, directory


def readiness(config, upstreams, acl_users) -> Readiness:
    if acl_users is None:
        return Readiness(upstreams, config.policy != NO_POLICY, workers=config.workers)
    from .. import upstream_acl

    def reapply() -> None:
        import asyncio

        asyncio.run(upstream_acl.apply_for(config, acl_users))  # (the HTTP server's thread: a loop of its own)

    return Readiness(upstreams, config.policy != NO_POLICY, workers=config.workers, users=acl_users,
                     missing=upstream_acl.missing, reapply=reapply if config.upstream_acl else None)


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

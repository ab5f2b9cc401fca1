"""`redis-guard serve`: everything resolved before accepting a connection (the configuration, the
upstream, the command table, the policies, the upstream ACL users and scripts, the monitoring
HTTP server), then one serving process (worker.py), or `--workers N` of them sharing the port
(SO_REUSEPORT) under the supervisor (supervisor.py). It prints one line containing `ready` on
stderr when clients can connect."""

from __future__ import annotations

import logging
import socket
import sys

from .. import compiled, upstream_scripts
from ..config import NO_POLICY, Address, ConfigError
from ..monitor import service
from ..policy.acl import compile_users
from ..policy.base import PolicyError
from ..policy.building import build_engine
from ..policy.shadow import ShadowPolicy
from ..policy.watcher import file_stamp
from ..supervisor import Supervisor
from ..upstream_acl import apply_for
from .loop import run
from .options import config_from_args
from .upstream import load_command_table, resolve_upstream, upstream_text
from .worker import run_worker

log = logging.getLogger("redis_guard")


def cmd_serve(args) -> int:
    try:
        config = config_from_args(args)
    except ConfigError as exc:
        print(f"redis-guard: {exc}", file=sys.stderr)
        return 2
    except ValueError as exc:  # a TLS file that does not load
        print(f"redis-guard: {exc}", file=sys.stderr)
        return 2
    try:
        config, local = (config, None) if config.upstream_cluster or config.upstream_sentinel else \
            resolve_upstream(config)
    except (FileNotFoundError, RuntimeError) as exc:
        print(f"redis-guard: {exc}", file=sys.stderr)
        return 2
    try:
        table, databases, source = run(load_command_table(config.upstream))
        try:
            engine = build_engine(config.policy, table)
            shadow = ShadowPolicy(build_engine(config.shadow_policy, table)) if config.shadow_policy else None
        except PolicyError as exc:
            print(f"redis-guard: {exc}", file=sys.stderr)
            return 2
        acl_users, acl = _upstream_acl(config, engine)
        service.prepare(table, config.policy, engine)
        monitor = service.bind(config, acl_users, table)
        if monitor[0] is not None:
            log.info("metrics on http://%s/metrics (also /healthz, /ready, /debug/hotkeys, /debug/bigkeys, "
                     "/debug/slowlog)", config.metrics)
        try:
            if config.workers > 1:
                return serve_workers(config, table, databases, source, engine, shadow, monitor, acl_users, acl)
            if monitor[0] is not None:
                monitor[0].start()
            return run_worker(
                config, table, databases, engine=engine, shadow=shadow, monitor=monitor, acl_users=acl_users,
                on_ready=lambda proxy: log_ready(config, proxy.bound_address, source, 1, engine, shadow, acl),
            )
        finally:
            service.release(monitor)
    except OSError as exc:  # a BindError names its address; a cluster that does not answer says so
        print(f"redis-guard: {exc.strerror or exc}", file=sys.stderr)
        return 1
    finally:
        if local is not None:
            local.stop()


def _upstream_acl(config, engine):
    """(the policy's ACL users when they are applied upstream, else None; the outcome of applying
    them) at start (policy/acl.py), and rule C6's approved scripts loaded upstream (upstream_scripts.py)."""
    users = compile_users(engine, config.upstream.password) if engine is not None else None
    status = run(apply_for(config, users))
    run(upstream_scripts.load_for(config, engine))
    return (users if status.usable else None), status


def log_ready(config, address, source: str, workers: int, engine=None, shadow=None, acl=None) -> None:
    """The line saying clients can connect, formatted like every other line."""
    host, port = address[0], address[1]
    listen = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    policy = (f"policy '{engine.policy.name}' ({engine.policy.mode}, {len(engine.policy.rules)} rules)"
              if engine is not None else "no policy")
    if shadow is not None:
        policy += f", shadow policy '{shadow.name}'"
    upstream = upstream_text(config)
    fields = {"event": "ready", "listen": listen, "upstream": upstream, "workers": workers, "command_table": source,
              "policy": engine.policy.name if engine is not None else None,
              "shadow_policy": shadow.name if shadow is not None else None,
              "upstream_acl": acl.line() if acl is not None else None,
              "metrics": str(config.metrics) if config.metrics is not None else None,
              "compiled": compiled.status()}
    logging.getLogger("redis_guard.ready").info(  # written at any --log-level
        "redis-guard ready: listening on %s, upstream %s, %s, command table from %s, %d worker%s, hot path %s%s",
        listen, upstream, policy, source, workers, "s" if workers != 1 else "", fields["compiled"],
        f", {acl.line()}" if acl is not None else "", extra={"fields": fields})


def _reserve(listen: Address) -> socket.socket:
    """Bind once with SO_REUSEPORT so every worker binds the same (possibly ephemeral) port."""
    family = socket.AF_INET6 if ":" in listen.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((listen.host, listen.port))
    return sock


def serve_workers(config, table, databases, source, engine=None, shadow=None, monitor=(None, None), acl_users=None,
                  acl=None) -> int:
    """The parent of `--workers N`: the port reserved (kept for workers forked again), the
    workers supervised (`supervisor.py`), the monitoring HTTP server run here."""
    try:
        reserved = _reserve(config.listen)
    except OSError as exc:
        raise service.BindError(f"cannot listen on {config.listen}: {exc.strerror or exc}") from None
    address = reserved.getsockname()
    config = config.replace(listen=Address(config.listen.host, address[1]))
    stamps = {path: file_stamp(path) for path in (config.policy, config.shadow_policy)
              if path not in (None, NO_POLICY)}
    server, counts = monitor[0], (monitor[0].source if monitor[0] is not None else None)

    def work(notify_ready) -> int:
        reserved.close()
        if server is not None:
            server.socket.close()  # the parent's: a worker must not keep the metrics port
        try:
            return run_worker(
                config, table, databases, reuse_port=True, engine=engine, shadow=shadow, acl_users=acl_users,
                on_ready=lambda proxy: notify_ready(), monitor=(None, monitor[1]), stamps=stamps,
            )
        except OSError as exc:  # a BindError names its address; a cluster that does not answer says so
            print(f"redis-guard: {exc.strerror or exc}", file=sys.stderr)
            return 1

    supervisor = Supervisor(
        config.workers, work,
        on_forked=server.start if server is not None else None,  # after the forks: no thread of it in a worker
        on_ready=lambda: log_ready(config, address, source, config.workers, engine, shadow, acl),
        on_spawn=getattr(counts, "spawned", None), on_exit=getattr(counts, "retire", None),
        on_stop=lambda: service.draining(server),
    )
    try:
        return supervisor.run()
    finally:
        reserved.close()

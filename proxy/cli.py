"""Command line: `redis-guard serve`, `policy check|explain`, `schema docs`, and `audit` (in
`audit/command.py`).

`serve` resolves everything it needs before accepting a connection: the configuration, the
upstream (starting a local redis-server for the quick start when none is configured or
answering), and the command table (asked of the upstream, else the snapshot in the package).
It prints one line containing `ready` on stderr when clients can connect.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import os
import signal
import socket
import sys
import threading

import hiredis

from . import compiled
from .config import (
    NO_POLICY,
    Address,
    ConfigError,
    Upstream,
    check_face,
    load_config,
    parse_address,
    parse_cluster_seeds,
    parse_face,
    parse_policy,
    parse_sentinel,
    parse_switch,
    parse_upstream,
)

log = logging.getLogger("redis_guard")

DEFAULT_UPSTREAM = Upstream(Address("127.0.0.1", 6379))


# Container objects allocated, net of those freed, before the cyclic collector's youngest pass.
# In flight, a cluster client's pipeline over several masters holds a couple of dozen of them (its
# commands, Scatter, Parts, reply chunks) until its replies are in, so 50 such clients keep
# Python's default of 700 crossed and the passes walking what is in flight (measured:
# benchmarks/README.md, "Figures behind the code"). Nearly everything the proxy makes is freed by reference
# counts; what cycles there are (an exception's traceback) wait for 50,000 allocations instead.
YOUNG_COLLECTION_THRESHOLD = 50_000


def settle_collector() -> None:
    """Once start-up is done: what it built (the command table, the policy's compiled plans)
    lives as long as the process, so it is frozen out of the cyclic collector's sight (its full
    passes stopped walking it, a measured share of the CPU at -P 16), and the youngest
    pass waits for YOUNG_COLLECTION_THRESHOLD allocations."""
    gc.freeze()
    _young, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_COLLECTION_THRESHOLD, middle, old)


def _new_loop():
    try:
        import uvloop

        return uvloop.new_event_loop()
    except ImportError:  # pragma: no cover - uvloop is a dependency; this keeps pdb sessions simple
        return asyncio.new_event_loop()


async def load_command_table(upstream):
    """(table, databases, source) from the upstream's COMMAND INFO/DOCS, else the snapshot."""
    from .commands.table import CommandTable, snapshot_for
    from .upstream.probe import ask

    version = None
    try:
        info, docs, databases, server = await ask(
            upstream, [("COMMAND", "INFO"), ("COMMAND", "DOCS"), ("CONFIG", "GET", "databases"), ("INFO", "server")]
        )
        version = _redis_version(server)
        if isinstance(info, hiredis.ReplyError) or isinstance(docs, hiredis.ReplyError):
            raise RuntimeError(f"COMMAND INFO/DOCS refused: {info if isinstance(info, Exception) else docs}")
        table = CommandTable.from_replies(info, docs, version)
        table.from_server = True
        source = "upstream"
    except Exception as exc:  # any failure: the snapshot is a complete table too
        # the snapshot of the upstream's release when INFO told it (8.x's commands on an 8.x)
        path = snapshot_for(version)
        log.warning("command table from snapshot %s (upstream could not be asked: %s)", path.name, exc)
        return CommandTable.from_snapshot(path), 16, "snapshot"
    count = 16
    if isinstance(databases, list) and len(databases) == 2:
        try:
            count = int(databases[1])
        except ValueError:
            pass
    return table, count, source


def _redis_version(reply) -> str | None:
    """redis_version of an INFO server reply (None: not one)."""
    if isinstance(reply, bytes):
        for line in reply.decode("utf-8", "replace").splitlines():
            if line.startswith("redis_version:"):
                return line.partition(":")[2].strip()
    return None


def _resolve_upstream(config):
    """The configured upstream, else a Redis on 127.0.0.1:6379, else a local one we start."""
    from .localredis import LocalRedis
    from .upstream.probe import answers

    if config.upstream is not None:
        return config, None
    runner = asyncio.Runner(loop_factory=_new_loop)
    try:
        found = runner.run(answers(DEFAULT_UPSTREAM))
    finally:
        runner.close()
    if found:
        log.info("no upstream configured: using the Redis answering on %s", DEFAULT_UPSTREAM.address)
        return config.replace(upstream=DEFAULT_UPSTREAM), None
    local = LocalRedis()
    log.warning(
        "no upstream configured and none answers on %s: started redis-server on 127.0.0.1:%d "
        "(pid %d, no persistence); it stops with the proxy",
        DEFAULT_UPSTREAM.address, local.port, local.pid,
    )
    return config.replace(upstream=Upstream(Address("127.0.0.1", local.port))), local


def build_engine(path, table):
    """The policy engine for the file at path (None: the built-in baseline; NO_POLICY: no rules,
    None returned). Raises PolicyError."""
    from .config import NO_POLICY
    from .policy import Engine, load_builtin, load_policy

    if path == NO_POLICY:
        return None
    return Engine(load_policy(path, table) if path is not None else load_builtin(table), table)


def _file_stamp(path):
    """What tells a changed file: modification time, size, inode (None: unreadable)."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (info.st_mtime_ns, info.st_size, info.st_ino)


class PolicyWatcher:
    """Hot reload: on SIGHUP and when the file changes, the new policy applies to the next command
    of every connection; an invalid file is refused with a log line and the running policy stays.
    With `shadow=True` the file is the shadow policy's (`shadow_policy:`), installed as
    `proxy.shadow` (`policy/shadow.py`) instead of the enforcing engine.

    The file is polled from a thread of its own, not from a timer in the event loop: while a timer
    is pending the loop waits in epoll with a timeout, and arming that timeout on every wait cost
    a measurable share of the CPU per request at 1 client on virtual machines
    (benchmarks/README.md, "Figures behind the code")."""

    def __init__(self, proxy, path, table, shadow: bool = False):
        self.proxy = proxy
        self.path = path
        self.table = table
        self.shadow = shadow
        self.role = "shadow" if shadow else "enforcing"
        self.stamp = self._stamp()
        self.stopped = threading.Event()

    def _stamp(self):
        return _file_stamp(self.path)

    def _running(self) -> str:
        if self.shadow:
            return self.proxy.shadow.name if self.proxy.shadow is not None else "none"
        return self.proxy.engine.policy.name if self.proxy.engine else "none"

    def reload(self, reason: str) -> None:
        from . import metrics
        from .monitor import snapshot
        from .policy import PolicyError
        from .policy.acl import compile_users

        self.stamp = self._stamp()
        try:
            engine = build_engine(self.path, self.table)
        except PolicyError as exc:
            metrics.POLICY_RELOADS.labels("refused", self.role).inc()
            log.error("%s policy reload (%s) refused, keeping policy '%s': %s", self.role, reason, self._running(), exc)
            return
        if self.shadow:
            from .infer.traffic import observing
            from .policy.shadow import ShadowPolicy

            # sessions start a fresh shadow state on their next command; a learner keeps observing
            self.proxy.shadow = observing(ShadowPolicy(engine), getattr(self.proxy, "learner", None))
        else:
            self.proxy.set_engine(engine)  # sessions keep their application if it has the same name
            snapshot.policy_loaded(self.path, engine)
            asyncio.ensure_future(self._apply_acl(compile_users(engine, self.proxy.config.upstream.password)))
            asyncio.ensure_future(_load_scripts(self.proxy.config, engine))  # C6's approved library
        metrics.POLICY_RELOADS.labels("applied", self.role).inc()
        log.info("%s policy reloaded (%s): '%s', %d rules", self.role, reason, engine.policy.name,
                 len(engine.policy.rules))

    async def _apply_acl(self, users) -> None:
        from .upstream_acl import apply_for, following, retire

        config = following(self.proxy.config, self.proxy.backend)  # a Sentinel's master now
        status = await apply_for(config, users)
        self.proxy.acl_users = users if status.usable else None  # the users upstream connections may log in as
        log.info("policy reloaded: %s", status.line())
        if status.ok:  # the users of a renamed or replaced policy, where no other proxy uses them
            await retire(config, self.proxy.backend, users)

    def start(self, loop, interval: float = 1.0) -> None:
        threading.Thread(target=self._watch, args=(loop, interval), name="policy-watcher", daemon=True).start()

    def stop(self) -> None:
        self.stopped.set()

    def _watch(self, loop, interval: float) -> None:
        scheduled = None  # the stamp a reload was last asked for
        while not self.stopped.wait(interval):
            stamp = self._stamp()
            # self.stamp is written on the loop's thread by reload(); a stale read only delays
            if stamp is not None and stamp != self.stamp and stamp != scheduled:
                scheduled = stamp
                try:
                    loop.call_soon_threadsafe(self.reload, "file changed")
                except RuntimeError:  # the loop has closed
                    return


def run_worker(config, table, databases, sock=None, reuse_port=False, on_ready=None, engine=None,
               shadow=None, monitor=(None, None), acl_users=None, stamps=None) -> int:
    """One process serving clients; `monitor` is (the HTTP server, the workers' snapshot directory);
    `acl_users` the policy's users the upstream connections run as (None: not applied upstream);
    `stamps` the policy files' stamps when `engine` and `shadow` were loaded: a worker forked
    again after a file changed loads it before it serves, as the running workers did."""
    from . import metrics, tls
    from .monitor import service
    from .server import Proxy

    async def main() -> int:
        loop = asyncio.get_running_loop()
        metrics.FINDING_LINES.interval = config.findings_log_interval
        proxy = Proxy(loop, config, table, databases, engine=engine)
        proxy.shadow = shadow
        learn = _learner(config, table, proxy, loop)  # serve --learn (proxy/infer/traffic.py)
        proxy.acl_users = acl_users
        watchers = [PolicyWatcher(proxy, path, table, shadow=is_shadow)
                    for path, is_shadow in ((config.policy, False), (config.shadow_policy, True))
                    if path not in (None, NO_POLICY)]
        for watcher in watchers:
            if stamps and stamps.get(watcher.path, watcher.stamp) != watcher.stamp:
                watcher.reload("changed since the proxy started")
        try:
            await proxy.start(sock=sock, reuse_port=reuse_port)
        except ConnectionError:  # no cluster node answered: not an address problem
            raise
        except OSError as exc:
            raise service.BindError(f"cannot listen on {config.listen}: {exc.strerror or exc}") from None
        if proxy.tls is not None or tls.upstream_enabled():
            watchers.append(tls.TLSWatcher(proxy.tls))  # SIGHUP reloads the certificates with the policies
        if proxy.tls is not None:
            where = proxy.tls_address or proxy.bound_address
            log.info("TLS on %s:%s (client certificates: %s)", where[0], where[1], config.tls.auth_clients)
        service.worker_ready(proxy, monitor[1])
        stop = asyncio.Event()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        loop.add_signal_handler(signal.SIGUSR1, proxy.log_state)
        if watchers:
            loop.add_signal_handler(signal.SIGHUP, lambda: [watcher.reload("SIGHUP") for watcher in watchers])
        for watcher in watchers:
            watcher.start(loop)
        if on_ready is not None:
            on_ready(proxy)
        settle_collector()
        await stop.wait()
        service.draining(monitor[0])  # /ready says 503 before the listener closes
        for watcher in watchers:
            watcher.stop()
        if learn is not None:
            learn.close()
        log.info("stopping: finishing in-flight replies (at most %gs)", config.shutdown_timeout)
        own = proxy.backend.ours().addrs  # what Redis may still list of them just after they close
        await proxy.shutdown(config.shutdown_timeout)
        from .upstream_acl import following

        await _remove_own_users(following(config, proxy.backend), own)  # a Sentinel's master now
        from .session.verdicts import flush_refusals

        flush_refusals()  # the refusals counted in bulk, if the loop's turn had not yet
        metrics.FINDING_LINES.flush()  # the findings the last interval gathered
        return 0

    with asyncio.Runner(loop_factory=_new_loop) as runner:
        return runner.run(main())


def _learner(config, table, proxy, loop):
    """With `learn:`, the learner in the sessions' shadow slot and its file writer (else None)."""
    if not config.learn:
        return None
    from .infer.traffic import Learner, LearnWriter, observing

    k1 = proxy.engine.policy.rule("K1") if proxy.engine is not None else None
    proxy.learner = Learner(table, getattr(k1, "delimiter", ":"))
    proxy.shadow = observing(proxy.shadow, proxy.learner)
    path = config.learn if config.workers == 1 else f"{config.learn}.{os.getpid()}"
    writer = LearnWriter(proxy.learner, path)
    writer.start(loop)
    log.info("learning: the commands and key shapes clients use are recorded in %s", path)
    return writer


async def _remove_own_users(config, own) -> None:
    """At a clean exit: the ACL users this process applied, where no other proxy uses them. A
    worker of several waits a little for its siblings, which stop with it, to close theirs."""
    from .upstream_acl import CREATED, remove_at_exit

    if not CREATED:
        return
    wait = 2.0 if config.workers > 1 else 0.0
    try:  # bounded: an upstream that does not answer must not hold the exit up
        await asyncio.wait_for(remove_at_exit(config, own, wait=wait), wait + 2.0)
    except TimeoutError:
        log.warning("upstream ACL users: not removed at exit (the upstream did not answer in time)")
_TLS_FLAGS = ("cert_file", "key_file", "ca_cert_file", "auth_clients", "protocols", "ciphers", "ciphersuites",
              "auth_clients_user")  # ciphersuites: refused with a reason (proxy/tls.py)
_UPSTREAM_TLS_FLAGS = ("ca_cert_file", "cert_file", "key_file", "server_name", "verify")


def _flag_section(args, prefix: str, names, current) -> dict | None:
    """The `--<prefix>*` flags given over the fields of `current` (a parsed section, or None), as
    the YAML section they amount to; None when no such flag is given."""
    import dataclasses

    given = {key: getattr(args, prefix + key) for key in names if getattr(args, prefix + key) is not None}
    if not given:
        return None
    section = dataclasses.asdict(current) if current is not None else {}
    section = {key: " ".join(value) if isinstance(value, tuple) else value  # (protocols, as written in YAML)
               for key, value in section.items()}
    section.update(given)
    return {key: value for key, value in section.items() if value is not None}


def _tls_flags(config, args):
    """`--tls-*` and `--upstream-tls-*` override the fields of `tls:` / `upstream_tls:`."""
    from . import tls

    if args.tls_listen:
        config = config.replace(tls_listen=parse_address(args.tls_listen, 6380))
    try:
        section = _flag_section(args, "tls_", _TLS_FLAGS, config.tls)
        if section is not None:
            config = config.replace(tls=tls.parse_server_tls(section, "--tls"))
        section = _flag_section(args, "upstream_tls_", _UPSTREAM_TLS_FLAGS, config.upstream_tls)
        if section is not None:
            if args.upstream_tls_verify is not None:
                section["verify"] = parse_switch(args.upstream_tls_verify, "--upstream-tls-verify")
            config = config.replace(upstream_tls=tls.parse_upstream_tls(section, "--upstream-tls"))
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    if config.tls_listen is not None and config.tls is None:
        raise ConfigError("tls_listen needs the tls settings (cert_file, key_file)")
    return config


def _configure_upstream_tls(config) -> None:
    """Every upstream connection of this process (and its workers) uses TLS when the upstream's
    URL says rediss:// (proxy/tls.py)."""
    from . import tls

    sentinel = config.upstream_sentinel
    if sentinel is not None:  # the sentinels and the master each with TLS or not
        tls.configure_upstream(config.upstream_tls, sentinel.tls or sentinel.sentinel_tls,
                               plain=() if sentinel.sentinel_tls else sentinel.sentinels,
                               only=sentinel.sentinels if not sentinel.tls else None)
        return
    seeds = (config.upstream,) + tuple(config.upstream_cluster)
    tls.configure_upstream(config.upstream_tls, any(seed is not None and seed.tls for seed in seeds))


def _upstream_text(config) -> str:
    if config.upstream_cluster:
        return "cluster " + ",".join(str(seed.address) for seed in config.upstream_cluster)
    if config.upstream_sentinel is not None:
        sentinel = config.upstream_sentinel
        return (f"sentinel master '{sentinel.master}' at {config.upstream.url()} (sentinels "
                f"{','.join(map(str, sentinel.sentinels))})")
    return config.upstream.url()


def _find_sentinel_master(config):
    """The master the sentinels name and ROLE confirms, as the upstream (ConfigError if none)."""
    from .backends.sentinel import find_master

    sentinel = config.upstream_sentinel
    runner = asyncio.Runner(loop_factory=_new_loop)
    try:
        address = runner.run(find_master(sentinel, config.connect_timeout))
    except ConnectionError as exc:
        raise ConfigError(str(exc)) from None
    finally:
        runner.close()
    return config.replace(upstream=Upstream(address, sentinel.username, sentinel.password, sentinel.db, sentinel.tls))


def _log_ready(config, address, source: str, workers: int, engine=None, shadow=None, acl=None) -> None:
    """The line saying clients can connect, formatted like every other line."""
    host, port = address[0], address[1]
    listen = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    policy = (f"policy '{engine.policy.name}' ({engine.policy.mode}, {len(engine.policy.rules)} rules)"
              if engine is not None else "no policy")
    if shadow is not None:
        policy += f", shadow policy '{shadow.name}'"
    upstream = _upstream_text(config)
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


def _serve_workers(config, table, databases, source, engine=None, shadow=None, monitor=(None, None), acl_users=None,
                   acl=None) -> int:
    """The parent of `--workers N`: the port reserved (kept for workers forked again), the
    workers supervised (`supervisor.py`), the monitoring HTTP server run here."""
    from .monitor import service
    from .supervisor import Supervisor

    try:
        reserved = _reserve(config.listen)
    except OSError as exc:
        raise service.BindError(f"cannot listen on {config.listen}: {exc.strerror or exc}") from None
    address = reserved.getsockname()
    config = config.replace(listen=Address(config.listen.host, address[1]))
    stamps = {path: _file_stamp(path) for path in (config.policy, config.shadow_policy)
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
        on_ready=lambda: _log_ready(config, address, source, config.workers, engine, shadow, acl),
        on_spawn=getattr(counts, "spawned", None), on_exit=getattr(counts, "retire", None),
        on_stop=lambda: service.draining(server),
    )
    try:
        return supervisor.run()
    finally:
        reserved.close()


def cmd_serve(args) -> int:
    try:
        config = load_config(args.config)
        if args.listen:
            config = config.replace(listen=parse_address(args.listen, 6380))
        if args.upstream:
            config = config.replace(upstream=parse_upstream(args.upstream), upstream_cluster=(),
                                    upstream_sentinel=None)
        if args.upstream_cluster:
            config = config.replace(upstream_cluster=parse_cluster_seeds(args.upstream_cluster), upstream_sentinel=None)
        if args.upstream_sentinel:
            config = config.replace(upstream_sentinel=parse_sentinel(args.upstream_sentinel, "--upstream-sentinel"),
                                    upstream_cluster=())
        if args.face:
            config = config.replace(face=parse_face(args.face))
        check_face(config)  # (before a Sentinel is asked for its master)
        config = _tls_flags(config, args)
        _configure_upstream_tls(config)
        if config.tls is not None:  # its files load, or the proxy does not start (ValueError below)
            from .tls import server_context

            server_context(config.tls)
        if config.upstream_sentinel is not None:
            config = _find_sentinel_master(config)
        if config.upstream_cluster:
            # The first seed names the cluster in logs and lends its credentials to every node.
            config = config.replace(upstream=config.upstream_cluster[0])
        if args.workers is not None:
            if args.workers < 1:
                raise ConfigError("--workers must be at least 1")
            config = config.replace(workers=args.workers)
        if config.workers > 1 and config.tls_listen is not None and config.tls_listen.port == 0:
            raise ConfigError("tls_listen: give a port with more than one worker (each would pick its own)")
        if args.policy:
            config = config.replace(policy=parse_policy(args.policy))
        if args.shadow_policy:
            config = config.replace(shadow_policy=os.path.abspath(args.shadow_policy))
        if args.learn:
            config = config.replace(learn=os.path.abspath(args.learn))
        if args.upstream_acl is not None:
            config = config.replace(upstream_acl=parse_switch(args.upstream_acl, "--upstream-acl"))
        if args.metrics:
            config = config.replace(metrics=parse_address(args.metrics, 9121))
    except ConfigError as exc:
        print(f"redis-guard: {exc}", file=sys.stderr)
        return 2
    except ValueError as exc:  # a TLS file that does not load
        print(f"redis-guard: {exc}", file=sys.stderr)
        return 2
    try:
        config, local = (config, None) if config.upstream_cluster or config.upstream_sentinel else \
            _resolve_upstream(config)
    except (FileNotFoundError, RuntimeError) as exc:
        print(f"redis-guard: {exc}", file=sys.stderr)
        return 2
    try:
        runner = asyncio.Runner(loop_factory=_new_loop)
        try:
            table, databases, source = runner.run(load_command_table(config.upstream))
        finally:
            runner.close()
        from .policy import PolicyError
        from .policy.shadow import ShadowPolicy

        try:
            engine = build_engine(config.policy, table)
            shadow = ShadowPolicy(build_engine(config.shadow_policy, table)) if config.shadow_policy else None
        except PolicyError as exc:
            print(f"redis-guard: {exc}", file=sys.stderr)
            return 2
        from .monitor import service

        acl_users, acl = _upstream_acl(config, engine)
        service.prepare(table, config.policy, engine)
        monitor = service.bind(config, acl_users, table)
        if monitor[0] is not None:
            log.info("metrics on http://%s/metrics (also /healthz, /ready, /debug/hotkeys, /debug/bigkeys, "
                     "/debug/slowlog)", config.metrics)
        try:
            if config.workers > 1:
                return _serve_workers(config, table, databases, source, engine, shadow, monitor, acl_users, acl)
            if monitor[0] is not None:
                monitor[0].start()
            return run_worker(
                config, table, databases, engine=engine, shadow=shadow, monitor=monitor, acl_users=acl_users,
                on_ready=lambda proxy: _log_ready(config, proxy.bound_address, source, 1, engine, shadow, acl),
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
    them) at start (policy/acl.py)."""
    from .policy.acl import compile_users
    from .upstream_acl import apply_for

    users = compile_users(engine, config.upstream.password) if engine is not None else None
    runner = asyncio.Runner(loop_factory=_new_loop)
    try:
        status = runner.run(apply_for(config, users))
        runner.run(_load_scripts(config, engine))
    finally:
        runner.close()
    return (users if status.usable else None), status


async def _load_scripts(config, engine) -> None:
    """Rule C6's approved scripts and functions, loaded upstream (upstream_scripts.py)."""
    from .upstream_scripts import load_for

    await load_for(config, engine)


def _offline_engine(path):
    """The engine of a policy file (None: the built-in baseline) over the snapshot's command table."""
    from .commands.table import CommandTable

    return build_engine(path, CommandTable.from_snapshot())


def _policy_file(args) -> str | None:
    """The FILE argument, or None for --builtin; exits with a usage error when neither is given."""
    if getattr(args, "builtin", False):
        return None
    if not args.file:
        print(f"redis-guard policy {args.policy_command}: give a policy FILE or --builtin", file=sys.stderr)
        raise SystemExit(2)
    return args.file


def cmd_policy_check(args) -> int:
    from .policy import BUILTIN, PolicyError

    path = _policy_file(args)
    try:
        engine = _offline_engine(path)
    except PolicyError as exc:
        print(f"{exc}", file=sys.stderr)
        if len(exc.errors) > 1:
            print(f"{len(exc.errors)} mistakes", file=sys.stderr)
        return 1
    policy = engine.policy
    shown = path if path is not None else f"built-in ({BUILTIN.name}, what serve runs without a policy)"
    convention = f" (convention {policy.seed}, docs/conventions.md)" if policy.seed else ""
    print(f"{shown}: valid policy '{policy.name}'{convention}")
    if policy.description:
        print(f"  {policy.description}")
    print(f"  mode: {policy.mode}" + ("  (dry run: every rule only logs and counts)" if policy.mode == "audit" else ""))
    print(f"  baseline guard: {policy.baseline()}")
    for rule in policy.rules:
        mode = engine.modes.get(rule.id, "off")
        print(f"  {rule.id:<4} {mode:<8} {rule.title}: {rule.describe()}")
    if policy.schema is not None:
        from .policy.schemadoc import summary

        enforced = "enforced by K10" if policy.rule("K10") is not None else "documentation only: no rule K10"
        print(f"  schema: {len(policy.schema)} key patterns ({enforced})")
        for pattern in policy.schema:
            print(f"    {summary(pattern)}")
    planned = sum(1 for name, plan in engine.plans.items() if plan is not None and name.islower())
    print(f"  compiled into {planned} commands")
    reviews = _review_scripts(engine)  # C6's approved scripts, read against the policy
    if engine.tenants is not None:
        print(f"  auth: {policy.auth}  (clients authenticate to the proxy; their credentials never reach Redis)")
        for app in policy.applications:
            app_engine = engine.tenants.engine(app.name)
            overrides = [rule for rule in app.rules if rule.id in app.overrides]
            print(f"  application '{app.name}' (user {app.user}): prefixes "
                  f"{', '.join(app.prefixes) or 'none'}{', read-only' if app.read_only else ''}")
            for rule in overrides:
                print(f"    {rule.id:<4} {app_engine.modes.get(rule.id, 'off'):<8} {rule.title}: {rule.describe()}")
    for review in reviews:
        print(f"  {review}")
    return 1 if any(review.level == "error" for review in reviews) else 0


def _review_scripts(engine) -> list:
    """`policy check`'s review of rule C6's approved scripts (policy/rules/_scripts.py)."""
    from .policy.rules._scripts import review

    rule = engine.policy.rule("C6")
    if rule is None or getattr(rule, "scripts", None) != "approved" or rule.mode == "off":
        return []
    t1 = engine.policy.rule("T1")
    return review(rule.library, engine.policy.rules, engine.table, t1 is not None and t1.mode != "off")


def cmd_policy_hash_password(args) -> int:
    """The stored form of a password for an application's `password_hash`. The password is read
    from stdin (without echo on a terminal), never from the command line, where `ps` shows it."""
    import getpass

    from .policy.passwords import hash_password

    if sys.stdin.isatty():
        password = getpass.getpass("password: ")
        if getpass.getpass("again: ") != password:
            print("redis-guard: the passwords differ", file=sys.stderr)
            return 1
    else:
        password = sys.stdin.readline().rstrip("\r\n")
    if not password:
        print("redis-guard: empty password", file=sys.stderr)
        return 1
    print(hash_password(password.encode("utf-8")))
    return 0


def cmd_policy_explain(args) -> int:
    """Exit status: 0 allowed (rewritten or audited included), 1 rejected, 2 a usage error, a
    broken policy or a command Redis would refuse whatever the policy (unknown, wrong arity)."""
    from . import errors
    from .policy import PolicyError
    from .policy.offline import REJECT, command_args, decide, unknown

    words = args.command[1:] if args.command[:1] == ["--"] else args.command
    command = command_args(words[0] if len(words) == 1 else words) if words else None
    if not command:
        print("redis-guard policy explain FILE -- COMMAND [ARG...]  (or one quoted command line)" if not words
              else f"redis-guard: unbalanced quotes in {words[0]!r}", file=sys.stderr)
        return 2
    try:
        engine = _offline_engine(args.file)
    except PolicyError as exc:
        print(f"{exc}", file=sys.stderr)
        return 2
    if args.app is not None:
        app_engine = engine.tenants.engine(args.app) if engine.tenants is not None else None
        if app_engine is None:
            names = [app.name for app in engine.policy.applications]
            print(f"redis-guard: no application '{args.app}' in {args.file} "
                  f"(applications: {', '.join(names) or 'none'})", file=sys.stderr)
            return 2
        engine = app_engine
    refused = unknown(engine.table, command)
    if refused:
        print(f"{command[0].decode('utf-8', 'replace').upper()}: {refused}: Redis refuses it whatever the "
              f"policy (the proxy forwards it and the client gets Redis's error)")
        return 2
    plan = engine.plan_for(command)
    if plan is None:
        print(f"{command[0].decode('utf-8', 'replace').upper()}: no rule of '{engine.policy.name}' applies: "
              "forwarded unchanged")
        return 0
    if engine.policy.schema is not None:
        _explain_schema(engine, command)
    rules = [rule.id for rule in (plan.command_rules or ())]
    if plan.check_keys:
        rules = [rule.id for rule in engine.key_rules] + rules
    rules += [rule.id for rule in (plan.rewrite_rules or ())]
    rules = list(dict.fromkeys(rules))  # a rule that both checks and rewrites is named once
    print(f"{plan.spec.name.upper()}: rules that run: {', '.join(rules) or 'none'}")
    outcome = decide(engine, command)
    for finding in outcome.findings:
        print(f"  {finding.rule} fired ({finding.mode}): {errors.violation_text(finding)}")
    print(f"decision: {outcome.describe()}")
    return 1 if outcome.verdict == REJECT else 0


def _explain_schema(engine, command) -> None:
    """The schema pattern of every key of the command."""
    from .commands.keyspecs import find_keys

    spec = engine.table.lookup(command)
    if spec is None:
        return
    for index, _ in find_keys(spec, command):
        key = command[index]
        pattern = engine.policy.schema.match(key)
        shown = key.decode("utf-8", "backslashreplace")
        if pattern is None:
            print(f"key '{shown}': no schema pattern")
        else:
            print(f"key '{shown}': schema pattern '{pattern.pattern}' ({pattern.type})")


def cmd_policy_test(args) -> int:
    from .policy.fixtures import run

    return run(args.paths, sys.stdout)


def cmd_policy_schema(args) -> int:
    from .policy.json_schema import text

    if args.output is None:
        sys.stdout.write(text())
    else:
        with open(args.output, "w", encoding="utf-8") as handle:
            handle.write(text())
    return 0


def cmd_policy_acl(args) -> int:
    """The policy's ACL users (policy/acl.py), for operators who manage Redis users themselves:
    ACL SETUSER lines (redis-cli reads them on stdin), or an ACL file's `user` lines."""
    from .policy import PolicyError
    from .policy.acl import compile_users

    path = _policy_file(args)
    try:
        engine = _offline_engine(path)
        upstream = parse_upstream(args.upstream) if args.upstream else None
    except (PolicyError, ConfigError) as exc:
        print(f"{exc}", file=sys.stderr)
        return 1
    users = compile_users(engine, upstream.password if upstream is not None else None)
    for user in users.users:
        print(user.line() if args.format == "file" else " ".join(user.setuser()))
    whose = "the upstream URL's password" if upstream is not None and upstream.password else "no upstream password"
    print(f"{len(users.users)} users of policy '{users.policy_name}'; passwords derived from {whose} "
          "(docs/policy.md, \"The second wall\")", file=sys.stderr)
    return 0


def cmd_schema_docs(args) -> int:
    from .policy import PolicyError, load_policy
    from .policy.schemadoc import markdown

    try:
        policy = load_policy(args.file)
    except PolicyError as exc:
        print(f"{exc}", file=sys.stderr)
        return 1
    if policy.schema is None:
        print(f"{args.file}: no 'schema:' section (docs/policy.md, \"Key schema\")", file=sys.stderr)
        return 1
    sys.stdout.write(markdown(policy, args.file, policy.rule("K10")))
    return 0


def _log_options(parser, defaults: bool) -> None:
    """--log-level and --log-format, before the subcommand (with defaults) and after it."""
    from .monitor.logs import FORMATS, LEVELS

    parser.add_argument("--log-level", type=str.upper, choices=LEVELS, help="default INFO",
                        default="INFO" if defaults else argparse.SUPPRESS)
    parser.add_argument("--log-format", choices=FORMATS, help="text (default) or json: one JSON object a line",
                        default="text" if defaults else argparse.SUPPRESS)


def build_parser() -> argparse.ArgumentParser:
    from . import __version__

    parser = argparse.ArgumentParser(prog="redis-guard", description=__doc__.split("\n")[0])
    parser.add_argument("--version", action="version", version=f"redis-guard {__version__}")
    _log_options(parser, defaults=True)
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the proxy")
    serve.add_argument("--config", help="YAML configuration file (e.g. configs/passthrough.yaml)")
    serve.add_argument("--listen", help="HOST:PORT or PORT (127.0.0.1) to accept clients on (default 127.0.0.1:6380)")
    serve.add_argument("--upstream", help="redis://[user:pass@]HOST:PORT[/DB] of the Redis server")
    serve.add_argument("--upstream-cluster", help="HOST:PORT[,HOST:PORT...]: seed nodes of a Redis Cluster")
    serve.add_argument("--upstream-sentinel", help="MASTER@HOST:PORT[,HOST:PORT...]: a master managed by Redis "
                       "Sentinel, and the sentinels to ask for it")
    serve.add_argument("--workers", type=int, help="processes sharing the port (SO_REUSEPORT)")
    serve.add_argument("--policy", help="policy file (e.g. configs/policies/strict-dotted.yaml), or none for no "
                       "rules; default: the built-in baseline")
    serve.add_argument("--shadow-policy", metavar="FILE", help="a candidate policy decided on live traffic "
                       "next to the enforcing one, changing nothing: its would-be rejections are counted and logged")
    serve.add_argument("--learn", metavar="FILE", help="record the commands and key shapes each client uses, "
                       "changing nothing, for `policy infer --from-traffic FILE`")
    serve.add_argument("--upstream-acl", help="on|off: create the policy's ACL users on the upstream (default on)")
    serve.add_argument("--metrics", help="HOST:PORT or PORT (127.0.0.1) to serve /metrics, /healthz, /ready on")
    serve.add_argument("--face", help="standalone|cluster: in front of a cluster, present a standalone server "
                       "(default) or a one-node cluster at the proxy's own address")
    serve.add_argument("--tls-listen", help="HOST:PORT or PORT: a second listener, with TLS (--listen stays plain)")
    for key in _TLS_FLAGS:  # Redis's own tls-* names
        serve.add_argument("--tls-" + key.replace("_", "-"), dest="tls_" + key, help="as tls: " + key)
    for key in _UPSTREAM_TLS_FLAGS:
        serve.add_argument("--upstream-tls-" + key.replace("_", "-"), dest="upstream_tls_" + key,
                           help="as upstream_tls: " + key + (" (on|off)" if key == "verify" else ""))
    serve.set_defaults(func=cmd_serve)
    policy = commands.add_parser("policy", help="check, explain or test a policy file").add_subparsers(
        dest="policy_command", required=True)
    check = policy.add_parser("check", help="validate a policy file and print what it enforces")
    check.add_argument("file", nargs="?")
    check.add_argument("--builtin", action="store_true", help="the built-in baseline policy instead of a file")
    check.set_defaults(func=cmd_policy_check)
    explain = policy.add_parser("explain", help="the decision for one command, without Redis: "
                                "redis-guard policy explain FILE -- SET user:1 v (exit 1 when rejected)")
    explain.add_argument("file")
    explain.add_argument("--app", help="decide as this application of the policy's applications: section")
    explain.add_argument("command", nargs=argparse.REMAINDER)
    explain.set_defaults(func=cmd_policy_explain)
    test = policy.add_parser("test", help="run fixture files of commands and expected verdicts "
                             "(exit 0 all pass, 1 a case fails, 2 a broken file)")
    test.add_argument("paths", nargs="+", metavar="FILE|DIR")
    test.set_defaults(func=cmd_policy_test)
    schema_json = policy.add_parser("schema", help="print the JSON Schema of policy files "
                                    "(docs/policy.schema.json), generated from the rules")
    schema_json.add_argument("-o", "--output", metavar="FILE", help="write it to FILE instead")
    schema_json.set_defaults(func=cmd_policy_schema)
    acl = policy.add_parser("acl", help="print the ACL users the policy compiles to (ACL SETUSER lines, or an "
                            "ACL file with --format file)")
    acl.add_argument("file", nargs="?")
    acl.add_argument("--builtin", action="store_true", help="the built-in baseline policy instead of a file")
    acl.add_argument("--upstream", help="redis://[user:pass@]HOST:PORT: the password the proxy's users' passwords "
                     "derive from (the proxy's own upstream URL)")
    acl.add_argument("--format", choices=("setuser", "file"), default="setuser")
    acl.set_defaults(func=cmd_policy_acl)
    schema = commands.add_parser("schema", help="the key schema of a policy file").add_subparsers(
        dest="schema_command", required=True)
    docs = schema.add_parser("docs", help="print the schema as a Markdown table")
    docs.add_argument("file")
    docs.set_defaults(func=cmd_schema_docs)
    from .audit.command import add_parser as add_audit_parser

    add_audit_parser(commands)
    from .infer.command import add_parser as add_infer_parser

    add_infer_parser(policy)
    hashing = policy.add_parser("hash-password", help="read a password on stdin, print the "
                                "password_hash an application's entry stores")
    hashing.set_defaults(func=cmd_policy_hash_password)
    for command in commands.choices.values():
        _log_options(command, defaults=False)
    return parser


def main(argv=None) -> int:
    from .monitor import logs

    args = build_parser().parse_args(argv)
    logs.setup(args.log_level, args.log_format)
    try:
        return args.func(args)
    except BrokenPipeError:  # `redis-guard policy check FILE | head`
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())

"""One process serving clients: the Proxy (server.py) on a loop of its own, its policy watchers
and certificate reload (SIGHUP), the learner of `serve --learn`, the signals (SIGTERM and SIGINT
stop it, finishing in-flight replies; SIGUSR1 logs its state), and at a clean exit the upstream
ACL users it applied. `serve` runs one, or `--workers N` of them forked (command.py)."""

from __future__ import annotations

import asyncio
import logging
import os
import signal

from .. import metrics, tls, upstream_acl
from ..config import NO_POLICY
from ..infer.traffic import Learner, LearnWriter, observing
from ..monitor import service
from ..policy.watcher import PolicyWatcher
from ..server import Proxy
from ..session.verdicts import flush_refusals
from .loop import new_loop, settle_collector

log = logging.getLogger("redis_guard")


def run_worker(config, table, databases, sock=None, reuse_port=False, on_ready=None, engine=None,
               shadow=None, monitor=(None, None), acl_users=None, stamps=None) -> int:
    """One process serving clients; `monitor` is (the HTTP server, the workers' snapshot directory);
    `acl_users` the policy's users the upstream connections run as (None: not applied upstream);
    `stamps` the policy files' stamps when `engine` and `shadow` were loaded: a worker forked
    again after a file changed loads it before it serves, as the running workers did."""
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
        await _remove_own_users(upstream_acl.following(config, proxy.backend), own)  # a Sentinel's master now
        flush_refusals()  # the refusals counted in bulk, if the loop's turn had not yet
        metrics.FINDING_LINES.flush()  # the findings the last interval gathered
        return 0

    with asyncio.Runner(loop_factory=new_loop) as runner:
        return runner.run(main())


def _learner(config, table, proxy, loop):
    """With `learn:`, the learner in the sessions' shadow slot and its file writer (else None)."""
    if not config.learn:
        return None
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
    if not upstream_acl.CREATED:
        return
    wait = 2.0 if config.workers > 1 else 0.0
    try:  # bounded: an upstream that does not answer must not hold the exit up
        await asyncio.wait_for(upstream_acl.remove_at_exit(config, own, wait=wait), wait + 2.0)
    except TimeoutError:
        log.warning("upstream ACL users: not removed at exit (the upstream did not answer in time)")

"""Hot reload of the policy files a serving process runs (`policy:` and `shadow_policy:`): on
SIGHUP and when a file changes, the new policy applies to the next command of every connection;
an invalid file is refused with a log line and the running policy stays. An enforcing policy's
ACL users and approved scripts are applied upstream again (upstream_acl.py, upstream_scripts.py)."""

from __future__ import annotations

import asyncio
import logging
import os
import threading

from .. import metrics, upstream_scripts
from ..infer.traffic import observing
from ..monitor import snapshot
from ..upstream_acl import apply_for, following, retire
from .acl import compile_users
from .base import PolicyError
from .building import build_engine
from .shadow import ShadowPolicy

log = logging.getLogger("redis_guard")


def file_stamp(path):
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
        return file_stamp(self.path)

    def _running(self) -> str:
        if self.shadow:
            return self.proxy.shadow.name if self.proxy.shadow is not None else "none"
        return self.proxy.engine.policy.name if self.proxy.engine else "none"

    def reload(self, reason: str) -> None:
        self.stamp = self._stamp()
        try:
            engine = build_engine(self.path, self.table)
        except PolicyError as exc:
            metrics.POLICY_RELOADS.labels("refused", self.role).inc()
            log.error("%s policy reload (%s) refused, keeping policy '%s': %s", self.role, reason, self._running(), exc)
            return
        if self.shadow:
            # sessions start a fresh shadow state on their next command; a learner keeps observing
            self.proxy.shadow = observing(ShadowPolicy(engine), getattr(self.proxy, "learner", None))
        else:
            self.proxy.set_engine(engine)  # sessions keep their application if it has the same name
            snapshot.policy_loaded(self.path, engine)
            asyncio.ensure_future(self._apply_acl(compile_users(engine, self.proxy.config.upstream.password)))
            asyncio.ensure_future(upstream_scripts.load_for(self.proxy.config, engine))  # C6's approved library
        metrics.POLICY_RELOADS.labels("applied", self.role).inc()
        log.info("%s policy reloaded (%s): '%s', %d rules", self.role, reason, engine.policy.name,
                 len(engine.policy.rules))

    async def _apply_acl(self, users) -> None:
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

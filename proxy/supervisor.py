"""Workers kept alive: the parent of `serve --workers N` forks them, restarts one that dies, and
stops when it cannot keep them alive.

The parent waits, single-threaded, in `select()` on two pipes: the one its signal handlers wake
(`signal.set_wakeup_fd`: SIGCHLD, SIGTERM, SIGINT, SIGHUP, SIGUSR1) and the one each worker
writes its pid to once it serves. Only its own workers are reaped (`waitpid(pid)`, never -1: a
local redis-server is a child too). A worker that exits while the proxy is not stopping is
logged with its exit status or signal and how long it lived, its last counts are kept by the
`on_exit` hook (`monitor.workers.Counts.retire`), and it is forked again after the delay
`RestartPolicy` decides. When workers keep dying (`RestartPolicy.limit` exits within
`WINDOW` seconds), the parent says so, stops the others and returns 1. A worker that exits
before every worker was ready once is a start-up failure: the others are stopped, 1 returned.
SIGHUP and SIGUSR1 are passed on to the workers (reload, state line); SIGTERM and SIGINT stop
them all (each drains its clients) and the parent returns when every one has exited.

A restarted worker is forked from the parent, which by then runs the monitoring HTTP server's
threads: only the forking thread exists in the child, which uses none of their locks.
"""

from __future__ import annotations

import collections
import logging
import os
import select
import signal
import time

log = logging.getLogger("redis_guard.supervisor")

FIRST_DELAY = 1.0  # seconds before a dead worker is forked again
MAX_DELAY = 30.0  # the delay doubles for a worker that dies again soon, up to this
STABLE_AFTER = 60.0  # a worker that lived this long starts its slot's delays over
WINDOW = 60.0  # exits counted towards giving up


class RestartPolicy:
    """When to fork a dead worker again, and when to give up: sans-IO, the clock given."""

    def __init__(self, workers: int):
        self.limit = max(5, 2 * workers)  # exits within WINDOW that stop the proxy
        self.exits: collections.deque = collections.deque()
        self.delays: dict[int, float] = {}  # slot -> the delay of its last restart

    def died(self, slot: int, lived: float, now: float) -> float | None:
        """Seconds to wait before forking slot's worker again; None: give up."""
        self.exits.append(now)
        while self.exits and self.exits[0] <= now - WINDOW:
            self.exits.popleft()
        if len(self.exits) >= self.limit:
            return None
        previous = self.delays.get(slot)
        delay = FIRST_DELAY if previous is None or lived >= STABLE_AFTER else min(previous * 2, MAX_DELAY)
        self.delays[slot] = delay
        return delay


def describe(status: int) -> str:
    """A wait status in words: 'exited with status 1', 'was killed by signal 9 (SIGKILL)'."""
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = "?"
        return f"was killed by signal {number} ({name})"
    return f"exited with status {os.waitstatus_to_exitcode(status)}"


class Supervisor:
    """`run()` forks `count` workers, each running `work(notify_ready)` (its exit status), and
    keeps them alive (module doc). Hooks, all on the parent's thread: `on_forked()` once the first
    workers are forked, `on_ready()` once all of them serve, `on_spawn(pid)` and `on_exit(pid,
    unasked)` for every worker (unasked: not while stopping), `on_stop()` when a stop begins."""

    def __init__(self, count: int, work, on_forked=None, on_ready=None, on_spawn=None, on_exit=None,
                 on_stop=None, clock=time.monotonic):
        self.count = count
        self.work = work
        self.hooks = {"forked": on_forked, "ready": on_ready, "spawn": on_spawn, "exit": on_exit,
                      "stop": on_stop}
        self.clock = clock
        self.policy = RestartPolicy(count)
        self.pids: list[int | None] = [None] * count
        self.born = [0.0] * count
        self.restart_at: list[float | None] = [None] * count
        self.replacing: dict[int, int] = {}  # new pid -> the pid it replaced, until it is ready
        self.dead = [None] * count  # slot -> the pid of its worker that died, until forked again
        self.ready: set[int] = set()
        self.all_ready = False
        self.stopping = False
        self.requested: list[int] = []  # signals received, handled by the loop
        self.status = 0
        self.buffer = b""

    def _hook(self, name: str, *args) -> None:
        hook = self.hooks[name]
        if hook is not None:
            hook(*args)

    # -- the child ------------------------------------------------------------------------------

    def _fork(self, slot: int) -> None:
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                signal.set_wakeup_fd(-1)
                for signum in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT):
                    signal.signal(signum, signal.SIG_DFL)
                for signum in (signal.SIGHUP, signal.SIGUSR1):  # until the worker's loop handles them
                    signal.signal(signum, signal.SIG_IGN)
                for fd in (self.wake_r, self.wake_w, self.ready_r):
                    os.close(fd)
                code = self.work(lambda: os.write(self.ready_w, f"{os.getpid()}\n".encode()))
            except BaseException:
                log.exception("worker %d failed", os.getpid())
            finally:
                logging.shutdown()
                os._exit(code)
        self.pids[slot] = pid
        self.born[slot] = self.clock()
        self.restart_at[slot] = None
        self._hook("spawn", pid)

    # -- the parent -----------------------------------------------------------------------------

    def _signalled(self, signum, frame) -> None:
        self.requested.append(signum)

    def _install(self) -> dict:
        self.wake_r, self.wake_w = os.pipe()
        self.ready_r, self.ready_w = os.pipe()
        for fd in (self.wake_r, self.wake_w):
            os.set_blocking(fd, False)
        previous = {"wakeup": signal.set_wakeup_fd(self.wake_w)}
        for signum in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1):
            previous[signum] = signal.signal(signum, self._signalled)
        return previous

    def _uninstall(self, previous: dict) -> None:
        signal.set_wakeup_fd(previous.pop("wakeup"))
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        for fd in (self.wake_r, self.wake_w, self.ready_r, self.ready_w):
            os.close(fd)

    def _live(self) -> list[int]:
        return [pid for pid in self.pids if pid is not None]

    def _kill(self, signum: int) -> None:
        for pid in self._live():
            try:
                os.kill(pid, signum)
            except ProcessLookupError:
                pass

    def _stop(self, why: str | None = None) -> None:
        if self.stopping:
            return
        self.stopping = True
        self.restart_at = [None] * self.count
        if why is not None:
            log.error("%s; stopping the proxy", why, extra={"fields": {"event": "workers_stop", "reason": why}})
        self._hook("stop")
        self._kill(signal.SIGTERM)

    def _handle_signals(self) -> None:
        while self.requested:
            signum = self.requested.pop(0)
            if signum in (signal.SIGTERM, signal.SIGINT):
                self._stop()
            elif signum in (signal.SIGHUP, signal.SIGUSR1) and not self.stopping:
                self._kill(signum)

    def _reap(self) -> None:
        for slot, pid in enumerate(self.pids):
            if pid is None:
                continue
            try:
                done, status = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                done, status = pid, 0
            if done == 0:
                continue
            self.pids[slot] = None
            self.ready.discard(pid)
            self.replacing.pop(pid, None)
            self._hook("exit", pid, not self.stopping)
            self._exited(slot, pid, status)

    def _exited(self, slot: int, pid: int, status: int) -> None:
        if self.stopping:
            # SIGTERM before its loop handled it (a worker still starting) is the stop asked for
            if status != 0 and not (os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGTERM):
                self.status = 1
                log.warning("worker %d %s while stopping", pid, describe(status))
            return
        now = self.clock()
        lived = now - self.born[slot]
        what = f"worker {pid} {describe(status)} after {lived:.1f}s"
        if not self.all_ready:
            self.status = 1
            self._stop(f"{what}, before every worker was ready")
            return
        delay = self.policy.died(slot, lived, now)
        fields = {"event": "worker_exit", "worker": pid, "lived_seconds": round(lived, 3),
                  "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
                  "status": os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else None,
                  "restart_in": delay}
        if delay is None:
            self.status = 1
            self._stop(f"{what}: workers keep dying ({self.policy.limit} exits within {WINDOW:g}s), "
                       "cannot keep them alive")
            return
        log.error("%s; restarting it in %gs", what, delay, extra={"fields": fields})
        self.restart_at[slot] = now + delay
        self.dead[slot] = pid

    def _restart_due(self) -> None:
        now = self.clock()
        for slot, due in enumerate(self.restart_at):
            if due is not None and due <= now and not self.stopping:
                try:
                    self._fork(slot)
                except OSError as exc:  # no memory, too many processes: counted as a death
                    delay = self.policy.died(slot, 0.0, now)
                    if delay is None:
                        self.status = 1
                        self._stop(f"cannot fork a worker: {exc}")
                        return
                    log.error("cannot fork a worker: %s; trying again in %gs", exc, delay)
                    self.restart_at[slot] = now + delay
                    continue
                self.replacing[self.pids[slot]] = self.dead[slot]
                self.dead[slot] = None

    def _read_ready(self) -> None:
        self.buffer += os.read(self.ready_r, 4096)
        *lines, self.buffer = self.buffer.split(b"\n")
        for line in lines:
            pid = int(line)
            if pid not in self.pids:
                continue
            self.ready.add(pid)
            old = self.replacing.pop(pid, None)
            if old is not None:
                log.info("worker %d serves in place of worker %d", pid, old,
                         extra={"fields": {"event": "worker_restarted", "worker": pid, "replaced": old}})
        if not self.all_ready and len(self.ready) == self.count:
            self.all_ready = True
            self._hook("ready")

    def _wait(self) -> None:
        dues = [due for due in self.restart_at if due is not None]
        timeout = max(min(dues) - self.clock(), 0.0) if dues else None
        readable = select.select([self.wake_r, self.ready_r], [], [], timeout)[0]
        if self.wake_r in readable:
            try:
                while os.read(self.wake_r, 512):
                    pass
            except BlockingIOError:
                pass
        if self.ready_r in readable:
            self._read_ready()

    def run(self) -> int:
        previous = self._install()
        try:
            try:
                for slot in range(self.count):
                    self._fork(slot)
            except OSError as exc:
                self.status = 1
                self._stop(f"cannot fork a worker: {exc}")
            self._hook("forked")
            while True:
                self._handle_signals()
                self._reap()
                if self.stopping and not self._live():
                    return self.status
                self._restart_due()
                self._wait()
        finally:
            self._uninstall(previous)

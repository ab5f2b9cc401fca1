"""Snapshots and liveness of forked workers, for the process that serves HTTP.

With `--workers N` each worker counts in its own memory. Each one listens on a unix socket
`worker-PID.sock` in a private directory (mode 0700) the parent made before forking, from a
daemon thread blocked in accept(): nothing runs in the worker until the parent connects, and its
event loop never sees a timer or a task for it. The parent sends one byte: `s` asks for one JSON
snapshot (`snapshot.build`, built on that thread), `l` for proof of liveness, answered `ok` only
after a callback went through the worker's event loop (`liveness.turns`). The socket of a worker
that has exited is removed.

`Counts` is the parent's source of merged snapshots. Counters never go backwards when a worker
dies: the parent keeps the last snapshot each worker answered; a worker that does not answer a
scrape (stopped, too slow) is counted at its last counters, and a dead worker's last counters
(`retire`, told by the supervisor) are folded into a base added to every scrape. Gauges of a
worker that did not answer are left out; `redis_guard_workers` says how many answered.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import socket
import tempfile
import threading
import time

from . import snapshot

log = logging.getLogger("redis_guard.monitor")

SNAPSHOT = b"s"
LIVENESS = b"l"
REQUEST_TIMEOUT = 5.0  # how long a worker waits for the request byte of a connection


def make_directory() -> str:
    return tempfile.mkdtemp(prefix="redis-guard-workers-")  # mode 0700


def remove_directory(path: str) -> None:
    shutil.rmtree(path, ignore_errors=True)


def serve(directory: str, build, alive=None) -> threading.Thread | None:
    """In a worker: answer `s` with json(build()) and `l` with b"ok" when alive() (a round trip
    through the event loop) is true, else b"stuck". A socket that cannot be bound leaves this
    worker out of the scrapes (logged with its path); it still serves clients."""
    path = os.path.join(directory, f"worker-{os.getpid()}.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(path)
        listener.listen(8)
    except OSError as exc:
        listener.close()
        log.error("cannot serve this worker's metrics on %s: %s", path, exc.strerror or exc)
        return None

    def answer() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                try:
                    conn.settimeout(REQUEST_TIMEOUT)
                    request = conn.recv(1)
                    if request == LIVENESS:
                        conn.sendall(b"ok" if alive is None or alive() else b"stuck")
                    elif request == SNAPSHOT:
                        conn.sendall(json.dumps(build()).encode())
                except OSError:
                    pass  # the asker went away
                except Exception:  # a scrape must never take the worker down
                    log.exception("worker snapshot failed")

    thread = threading.Thread(target=answer, name="monitor-snapshots", daemon=True)
    thread.start()
    return thread


def _sockets(directory: str) -> list[str]:
    try:
        return sorted(os.path.join(directory, name) for name in os.listdir(directory) if name.endswith(".sock"))
    except OSError:
        return []


def _gone(path: str) -> None:
    try:
        os.unlink(path)  # its worker has exited
    except OSError:
        pass


def collect(directory: str, timeout: float = 2.0) -> list[dict]:
    """In the serving process: every worker's snapshot."""
    snapshots = []
    for path in _sockets(directory):
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
                conn.settimeout(timeout)
                conn.connect(path)
                conn.sendall(SNAPSHOT)
                chunks = []
                while chunk := conn.recv(1 << 16):
                    chunks.append(chunk)
            snapshots.append(json.loads(b"".join(chunks)))
        except (ConnectionRefusedError, FileNotFoundError):
            _gone(path)
        except (OSError, ValueError) as exc:
            log.warning("worker snapshot %s: %s", os.path.basename(path), exc)
    return snapshots


def liveness(directory: str, timeout: float) -> tuple[bool, str]:
    """In the serving process: (every worker's loop turned within `timeout`, the reason). All
    workers are asked at once, so a stuck one costs one timeout, not one each."""
    asked = []
    for path in _sockets(directory):
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.settimeout(timeout)
            conn.connect(path)
            conn.sendall(LIVENESS)
            asked.append((path, conn))
        except (ConnectionRefusedError, FileNotFoundError):
            conn.close()
            _gone(path)
        except OSError as exc:
            conn.close()
            asked.append((path, exc))
    deadline = time.monotonic() + timeout + 1.0  # the worker waits `timeout` itself, then says so
    stuck = []
    for path, conn in asked:
        pid = os.path.basename(path)[len("worker-"):-len(".sock")]
        if isinstance(conn, Exception):
            stuck.append(f"worker {pid}: {conn}")
            continue
        with conn:
            try:
                conn.settimeout(max(deadline - time.monotonic(), 0.001))
                answer = conn.recv(16)
            except OSError:
                answer = b""
        if answer != b"ok":
            stuck.append(f"worker {pid}: event loop stuck: it has not run a callback within {timeout:g}s")
    if stuck:
        return False, "; ".join(stuck)
    return True, "ok"


class Counts:
    """The merged snapshot of every worker, counters kept across worker deaths (module doc)."""

    def __init__(self, directory: str, timeout: float = 2.0):
        self.directory = directory
        self.timeout = timeout
        self.scraping = threading.Lock()  # one scrape at a time: `last` only moves forward
        self.lock = threading.Lock()  # `last`, `base`, `retired` (retire runs on the supervisor's thread)
        self.last: dict[int, dict] = {}
        self.base: dict | None = None
        self.retired: set[int] = set()
        self.exits = 0  # workers that exited unasked

    def __call__(self) -> dict:
        with self.scraping:
            answered = collect(self.directory, self.timeout)
            with self.lock:
                answered = [snap for snap in answered if snap.get("pid") not in self.retired]
                pids = set()
                for snap in answered:
                    self.last[snap["pid"]] = snap
                    pids.add(snap["pid"])
                silent = [snapshot.counters_only(snap) for pid, snap in self.last.items() if pid not in pids]
                if self.base is not None:
                    silent.append(self.base)
        merged = snapshot.merge(answered + silent)
        merged["workers"] = len(answered)
        merged["worker_exits"] = self.exits
        merged["started"] = bool(answered) and all(snap["started"] for snap in answered)
        return merged

    def spawned(self, pid: int) -> None:
        """A new worker has `pid` (the kernel may reuse a dead worker's)."""
        with self.lock:
            self.retired.discard(pid)

    def retire(self, pid: int, unasked: bool = True) -> None:
        """Worker `pid` has exited: its last counters become part of the base."""
        with self.lock:
            self.exits += unasked
            self.retired.add(pid)
            last = self.last.pop(pid, None)
            if last is not None:
                self.base = snapshot.fold(self.base, snapshot.counters_only(last))

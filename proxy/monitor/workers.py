"""Snapshots of forked workers, for the process that serves HTTP.

With `--workers N` each worker counts in its own memory. Each one listens on a unix socket
`worker-PID.sock` in a private directory (mode 0700) the parent made before forking, from a
daemon thread blocked in accept(): nothing runs in the worker until a scrape connects, and its
event loop never sees a timer or a task for it. At scrape time the serving process connects
to every socket in the directory, each worker answers one JSON snapshot (`snapshot.build`)
and closes, and the serving process merges them. A worker that does not answer within the
timeout is left out of that scrape (`redis_guard_workers` says how many answered); the socket
of a worker that has exited is removed.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import socket
import tempfile
import threading

log = logging.getLogger("redis_guard.monitor")


def make_directory() -> str:
    return tempfile.mkdtemp(prefix="redis-guard-workers-")  # mode 0700


def remove_directory(path: str) -> None:
    shutil.rmtree(path, ignore_errors=True)


def serve(directory: str, build) -> threading.Thread | None:
    """In a worker: answer each connection with json(build()). A socket that cannot be bound
    leaves this worker out of the scrapes (logged with its path); it still serves clients."""
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
                    conn.sendall(json.dumps(build()).encode())
                except Exception:  # a scrape must never take the worker down
                    log.exception("worker snapshot failed")

    thread = threading.Thread(target=answer, name="monitor-snapshots", daemon=True)
    thread.start()
    return thread


def collect(directory: str, timeout: float = 2.0) -> list[dict]:
    """In the serving process: every worker's snapshot."""
    snapshots = []
    try:
        names = sorted(name for name in os.listdir(directory) if name.endswith(".sock"))
    except OSError:
        return snapshots
    for name in names:
        path = os.path.join(directory, name)
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
                conn.settimeout(timeout)
                conn.connect(path)
                chunks = []
                while chunk := conn.recv(1 << 16):
                    chunks.append(chunk)
            snapshots.append(json.loads(b"".join(chunks)))
        except (ConnectionRefusedError, FileNotFoundError):
            try:
                os.unlink(path)  # its worker has exited
            except OSError:
                pass
        except (OSError, ValueError) as exc:
            log.warning("worker snapshot %s: %s", name, exc)
    return snapshots

"""Liveness: proof that an event loop turns, asked of the loop itself when /healthz is asked.

A thread that serves HTTP (or a worker's count socket) stays responsive while the event loop is
stuck in a callback, so answering from it proves nothing about the loop. `turns` schedules a
no-op on the loop with `call_soon_threadsafe` (one write to the loop's wake-up pipe) and waits
for it to run, at most `timeout` seconds. Nothing is scheduled on the loop until someone asks:
a heartbeat timer would be pending on every epoll wait of the hot loop (see policy/watcher.py).
"""

from __future__ import annotations

import threading

_attached = {"loop": None}


def attach(loop) -> None:
    """The event loop of this process, once it serves."""
    _attached["loop"] = loop


def turns(loop, timeout: float) -> bool:
    """True when `loop` runs a callback scheduled from this thread within `timeout` seconds."""
    done = threading.Event()
    try:
        loop.call_soon_threadsafe(done.set)
    except RuntimeError:  # the loop is closed
        return False
    return done.wait(timeout)


def check(timeout: float) -> tuple[bool, str]:
    """(alive, the reason) for this process's loop; alive while none is attached yet (starting)."""
    loop = _attached["loop"]
    if loop is None:
        return True, "ok"
    if turns(loop, timeout):
        return True, "ok"
    if loop.is_closed():
        return False, "event loop closed: shutting down"
    return False, f"event loop stuck: it has not run a callback within {timeout:g}s"

"""CLIENT PAUSE as the proxy sees it: while Redis holds back writes, writes take a connection
of their client's own.

Theory of operation: Redis pauses clients, not connections. A write held back by `CLIENT PAUSE
WRITE` blocks the connection it came on, and on a shared connection every reader behind it
would wait too, although Redis would have answered them. A client's CLIENT PAUSE / UNPAUSE goes
over the control connection (`behaviour.py`: CONTROL); `PauseWatch` reads its reply, and while
a pause the proxy knows of is on, sessions dispatch with a table in which the commands Redis
holds back (flag `write`, and the `may_replicate` ones) are LEASE: each waits on a connection
lent to its client, and the client's later commands queue behind it there, exactly as on its
own Redis connection. The pause ends with UNPAUSE, or when its timeout passes (a timer that
exists only while a pause is on). A pause issued to Redis by someone else than a client of the
proxy is not known here: writes then wait on their shared connection, readers behind them too.
"""

from __future__ import annotations

import time

from ..pending import Receiver
from .behaviour import LEASE, PASS, both_cases

WRITE, ALL = "write", "all"


def paused_table(behaviour, column: int) -> dict[bytes, int]:
    """The shared lane's table while Redis holds back writes."""
    return both_cases({name: LEASE if action == PASS and name in behaviour.pause_writes else action
                       for name, action in behaviour.actions[column].items()})


class Pauses:
    """The pause of the upstream the proxy knows of, and when it ends."""

    __slots__ = ("loop", "on_change", "mode", "until", "timer")

    def __init__(self, loop, on_change):
        self.loop = loop
        self.on_change = on_change  # () -> None: sessions take their tables again
        self.mode = None  # WRITE or ALL while a pause is on
        self.until = 0.0
        self.timer = None

    @property
    def writes_held(self) -> bool:
        return self.mode is not None

    def paused(self, mode: str, seconds: float) -> None:
        until = time.monotonic() + seconds
        if self.mode is not None and until < self.until:
            until = self.until  # Redis keeps the longer of two pauses
        self.mode = ALL if ALL in (mode, self.mode) else WRITE
        self.until = until
        if self.timer is not None:
            self.timer.cancel()
        self.timer = self.loop.call_later(max(0.0, until - time.monotonic()), self.unpaused)
        self.on_change()

    def unpaused(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.mode is not None:
            self.mode = None
            self.on_change()


class PauseWatch(Receiver):
    """Receives the reply to a client's CLIENT PAUSE / UNPAUSE: on +OK the proxy knows."""

    __slots__ = ("session", "args")

    def __init__(self, session, args):
        self.session = session
        self.args = args

    def deliver(self, pending, data: bytes, done: int) -> None:
        if data.startswith(b"+OK"):
            took_effect(self.session.backend.pauses, self.args)
        self.session.deliver(pending, data, done)

    def pending_failed(self, pending, error: bytes, partial: bool) -> None:
        self.session.pending_failed(pending, error, partial)


def took_effect(pauses: Pauses, args) -> None:
    """A CLIENT PAUSE or UNPAUSE Redis accepted."""
    if args[1].lower() == b"unpause":
        pauses.unpaused()
        return
    try:
        seconds = int(args[2]) / 1000
    except (IndexError, ValueError):
        seconds = 0.0
    pauses.paused(WRITE if len(args) > 3 and args[3].lower() == b"write" else ALL, seconds)


def watches(args) -> bool:
    """CLIENT PAUSE or CLIENT UNPAUSE."""
    return len(args) > 1 and args[0].lower() == b"client" and args[1].lower() in (b"pause", b"unpause")

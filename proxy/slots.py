"""What a client awaits: slots in its reply queue, and the sinks that stand in for a session.

A `Slot` is one run of a client's requests waiting for replies from one upstream connection; the
upstream connection hands reply bytes to `slot.session.deliver`. Usually that is the client's
session itself; a sink in between changes what reaches it (the policy's EXECABORT for an aborted
transaction) or observes it (refusals sent back by the policy's server-side scripts).
"""

from __future__ import annotations

import logging
import time
from time import perf_counter as clock

from . import errors, metrics

log = logging.getLogger("redis_guard.policy")


class Slot:
    """Replies a client awaits from one upstream connection for one run of its requests.
    remaining < 0 marks a stream: everything after belongs to this client, unpaired."""

    __slots__ = ("session", "remaining", "buffered", "buffered_size", "conn", "started", "sent", "count")

    def __init__(self, session, remaining: int, conn=None):
        self.session = session
        self.remaining = remaining
        self.conn = conn
        self.buffered = None
        self.buffered_size = 0
        self.started, self.sent, self.count = clock(), None, remaining  # monitor: timing, names, weight

    def fail(self, error: bytes, partial: bool) -> None:
        self.session.slot_failed(self, error, partial)  # the session, or a ReplacingSink


def keep(slot, data: bytes) -> int:
    """Hold reply bytes that came before the client can have them (replies before them are
    still awaited); the slot's bytes held so far."""
    if slot.buffered is None:
        slot.buffered = [data]
    else:
        slot.buffered.append(data)
    slot.buffered_size += len(data)
    return slot.buffered_size


class ReplacingSink:
    """Stands between an upstream connection and a session to swap one reply for another
    (EXEC of a transaction the policy aborted: the DISCARD's +OK becomes EXECABORT)."""

    __slots__ = ("session", "reply")

    def __init__(self, session, reply: bytes):
        self.session = session
        self.reply = reply

    def deliver(self, slot, data: bytes, done: int) -> None:
        if done:
            self.session.deliver(slot, self.reply, done)

    def slot_failed(self, slot, error: bytes, partial: bool) -> None:
        self.session.slot_failed(slot, error, False)


class ScriptVerdictSink:
    """For a command the policy sent as a server-side script (atomic caps, size checks): a
    refusal comes back as the script's NOPERM error, and is counted and logged like the
    proxy's own."""

    __slots__ = ("session", "args")

    def __init__(self, session, args):
        self.session = session
        self.args = args

    def deliver(self, slot, data: bytes, done: int) -> None:
        if data.startswith(b"-NOPERM "):
            finding = errors.parse_violation(data)
            if finding is not None:
                session = self.session
                metrics.record(finding, "rejected", self.args, session.peer, session.engine.policy.name,
                               app=session.app)
        self.session.deliver(slot, data, done)

    def slot_failed(self, slot, error: bytes, partial: bool) -> None:
        self.session.slot_failed(slot, error, partial)


class UnseenReplies:
    """Receives the replies to commands the proxy adds on a client's behalf (the policy's
    hidden EXPIRE after a write) when they are routed like the client's own: nobody sees them.
    One that fails leaves a key without what the policy meant it to have: it is counted, and
    logged at most every `LOG_EVERY` seconds (a server that refuses them all would flood the log)."""

    __slots__ = ("logged_at", "unlogged")

    LOG_EVERY = 10.0

    def __init__(self):
        self.logged_at = float("-inf")
        self.unlogged = 0

    def deliver(self, slot, data: bytes, done: int) -> None:
        slot.remaining -= done
        if data[:1] == b"-":
            self.failed(slot, data)

    def slot_failed(self, slot, error: bytes, partial: bool) -> None:
        slot.remaining = 0
        self.failed(slot, error)

    def failed(self, slot, error: bytes) -> None:
        metrics.HIDDEN_FAILED.inc()
        self.unlogged += 1
        now = time.monotonic()
        if now - self.logged_at >= self.LOG_EVERY:
            log.warning("%d command(s) the policy added failed; the latest, %r, got %r",
                        self.unlogged, slot.request()[:200], error.strip()[:200])
            self.logged_at = now
            self.unlogged = 0


UNSEEN = UnseenReplies()


class HiddenCommand(Slot):
    """One command the policy adds, on the client's connection, its reply for `UNSEEN`."""

    __slots__ = ("data",)

    def __init__(self, data: bytes, conn):
        super().__init__(UNSEEN, 1, conn)
        self.data = data

    def request(self) -> bytes:
        return self.data


class LaterCommands:
    """The commands after one in the same pipeline, without copying them."""

    __slots__ = ("commands", "start")

    def __init__(self, commands, start: int):
        self.commands = commands
        self.start = start

    def __iter__(self):
        commands = self.commands
        for index in range(self.start, len(commands)):
            yield commands[index]

    def __len__(self) -> int:
        return len(self.commands) - self.start

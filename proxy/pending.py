"""What a client awaits: the entries of its reply queue, and the receivers that stand in for it.

A `Pending` is one run of requests waiting for replies from one upstream connection, in a
client's reply queue and in that connection's `pending` deque at once. The connection hands the
reply bytes to `pending.receiver.deliver(pending, data, done)` and, when it fails, calls
`pending.fail`. The receiver is usually the client's session; a sink in between changes what
reaches it (the policy's EXECABORT for an aborted transaction), observes it (refusals sent back
by the policy's server-side scripts) or hides it (commands the proxy adds on a client's behalf).
Every receiver subclasses `Receiver` (compiled, the connection calls it in C).
"""

from __future__ import annotations

import collections
import logging
import time

import hiredis

from . import compiled, errors, metrics

log = logging.getLogger("redis_guard.policy")

# Reply queues are deques (a session's, a connection's `pending`). On the hot path their methods
# are called unbound: compiled, that skips looking the method up on the queue on every call
# (benchmarks/README.md, "Figures behind the code").
queue_append = collections.deque.append
queue_popleft = collections.deque.popleft


def queue_head(queue):
    """The first entry of a reply queue, None when it is empty (entries are never None)."""
    return queue[0] if queue else None


class Receiver:
    """Who gets a Pending's replies: every receiver subclasses it, so that the compiled upstream
    connection hands replies to a compiled receiver (the session, a stretch's Scatter) by a C
    call. A Pending is one too: it may stand in for runs of its own (a Scatter for its parts)."""

    __slots__ = compiled.declared_fields(__file__, "Receiver")

    def deliver(self, pending: Pending, data: bytes, done: int) -> None:
        """`data`: reply bytes, in order; `done`: how many replies they complete."""
        raise NotImplementedError

    def pending_failed(self, pending: Pending, error: bytes, partial: bool) -> None:
        """The connection failed with replies still owed; `partial`: part of one was delivered."""
        raise NotImplementedError


class Pending(Receiver):
    """Replies a client awaits from one upstream connection for one run of its requests.
    remaining < 0 marks a stream: everything after belongs to this client, unpaired. For the
    monitor (`monitor/live.py`): `sent`, the run's request bytes (the names of its commands; None
    for what is not a client's run), `count`, its commands."""

    __slots__ = compiled.declared_fields(__file__, "Pending")

    def __init__(self, receiver, remaining: int, conn=None, sent=None):
        self._fill_pending(receiver, remaining, conn, sent)

    def _fill_pending(self, receiver, remaining: int, conn, sent) -> None:
        """Pending's own fields. Compiled, a C method: the hot paths make their entries with
        `__new__` and this, without a constructor's argument parsing or `super().__init__`."""
        self.receiver = receiver
        self.remaining = remaining
        self.conn = conn
        self.buffered = None
        self.buffered_size = 0
        self.sent = sent
        self.count = remaining

    def fail(self, error: bytes, partial: bool) -> None:
        self.receiver.pending_failed(self, error, partial)


def keep(pending, data: bytes) -> int:
    """Hold reply bytes that came before the client can have them (replies before them are
    still awaited); the bytes held for this entry so far."""
    if pending.buffered is None:
        pending.buffered = [data]
    else:
        pending.buffered.append(data)
    pending.buffered_size += len(data)
    return pending.buffered_size


class Hidden(Receiver):
    """Receives replies nobody may see: state the proxy restores or adds on a client's behalf
    (a re-authentication after RESET, the write that WAIT waits for). Failures change nothing:
    the connection's own failure reaches the client through its own entries."""

    __slots__ = ()

    def deliver(self, pending, data: bytes, done: int) -> None:
        pending.remaining -= done

    def pending_failed(self, pending, error: bytes, partial: bool) -> None:
        pending.remaining = 0


HIDDEN = Hidden()


def hidden(count: int) -> Pending:
    return Pending(HIDDEN, count)


class ReplacingSink(Receiver):
    """Stands between an upstream connection and a session to swap one reply for another
    (EXEC of a transaction the policy aborted: the DISCARD's +OK becomes EXECABORT)."""

    __slots__ = ("session", "reply")

    def __init__(self, session, reply: bytes):
        self.session = session
        self.reply = reply

    def deliver(self, pending, data: bytes, done: int) -> None:
        if done:
            self.session.deliver(pending, self.reply, done)

    def pending_failed(self, pending, error: bytes, partial: bool) -> None:
        self.session.pending_failed(pending, error, False)


class ScriptVerdictSink(Receiver):
    """For a command the policy sent as a server-side script (atomic caps, size checks): a
    refusal comes back as the script's NOPERM error, and is counted and logged like the
    proxy's own."""

    __slots__ = ("session", "args")

    def __init__(self, session, args):
        self.session = session
        self.args = args

    def deliver(self, pending, data: bytes, done: int) -> None:
        if data.startswith(b"-NOPERM "):
            self._record(data)
        self.session.deliver(pending, data, done)

    def observe(self, shown: bytes) -> None:
        """On a stream (session/streamorder.py `watched`): what the client was shown between the
        barriers around the script, whole replies and pushes; its one reply is among them."""
        reader = hiredis.Reader()
        reader.feed(shown)
        try:
            while (value := reader.gets()) is not False:
                if type(value) is hiredis.ReplyError and str(value).startswith("NOPERM "):
                    self._record(b"-%s\r\n" % str(value).encode())
                    return
        except hiredis.ProtocolError:
            return  # not RESP as the server writes it: nothing to count

    def _record(self, reply: bytes) -> None:
        finding = errors.parse_violation(reply)
        if finding is not None:
            session = self.session
            metrics.record(finding, "rejected", self.args, session.peer, session.engine.policy.name, app=session.app)

    def pending_failed(self, pending, error: bytes, partial: bool) -> None:
        self.session.pending_failed(pending, error, partial)


class UnseenReplies(Receiver):
    """Receives the replies to commands the proxy adds on a client's behalf (the policy's
    hidden EXPIRE after a write) when they are routed like the client's own: nobody sees them.
    One that fails leaves a key without what the policy meant it to have: it is counted, and
    logged at most every `LOG_EVERY` seconds (a server that refuses them all would flood the log)."""

    __slots__ = ("logged_at", "unlogged")

    LOG_EVERY = 10.0

    def __init__(self):
        self.logged_at = float("-inf")
        self.unlogged = 0

    def deliver(self, pending, data: bytes, done: int) -> None:
        pending.remaining -= done
        if data[:1] == b"-":
            self.failed(pending, data)

    def pending_failed(self, pending, error: bytes, partial: bool) -> None:
        pending.remaining = 0
        self.failed(pending, error)

    def failed(self, pending, error: bytes) -> None:
        metrics.HIDDEN_FAILED.inc()
        self.unlogged += 1
        now = time.monotonic()
        if now - self.logged_at >= self.LOG_EVERY:
            log.warning("%d command(s) the policy added failed; the latest, %r, got %r",
                        self.unlogged, pending.request()[:200], error.strip()[:200])
            self.logged_at = now
            self.unlogged = 0


UNSEEN = UnseenReplies()


class HiddenCommand(Pending):
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

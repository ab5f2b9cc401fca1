"""Replies the proxy makes itself, in order on a client's raw stream.

Once a client's connection streams (pub/sub, MONITOR, CLIENT REPLY, a cluster's tracking), every
byte of its own upstream connection is passed on as it comes: the proxy cannot tell where the
replies to the commands already sent end. A reply the proxy makes (a refusal, QUIT's +OK, a
protocol error) must still come after them, and Redis would not have written it at all under
CLIENT REPLY OFF or SKIP. So the proxy sends a barrier on the stream, a command no server has
(`redis-guard-barrier-<token>-<n>`, the token random per stream), and puts its own reply where
the server's "unknown command" error for it appears. The server decides the order, and whether a
reply is written: a barrier it does not answer (replies off) was overtaken when a later one is
answered, and its reply is dropped, as the refused command's would have been.

A client's QUIT or protocol error ends the stream: the server must answer what came before and
then close, or not, as it would for the client itself (under CLIENT REPLY OFF or SKIP it writes
nothing, and closes only if it had other replies to write). So the server is asked to do it:
QUIT goes to it as it is; for a protocol error it gets a request that fails the same way
(`MALFORMED`), and the proxy puts its own error, which names what was wrong with the client's
bytes, in place of the server's. The client's connection closes when the server's does.

A command whose reply the proxy must see (the policy's server-side check, whose refusal is
counted like the proxy's own) goes between two barriers: what the client is shown between their
answers is handed to the command's receiver (`watched`). Only while the server certainly answers
every command: under CLIENT REPLY SKIP the first barrier would take the skip in the command's
place (`turns_replies_off`).

Where the proxy must change what the server says before the client sees it (in front of a
cluster, a shard channel's count over every master: cluster/sides.py), a barrier's mark may be a
`Rewrite`: the barrier's reply, or the stretch a `REWRITE` barrier opened before it (a command sent
between the two), is shown as the mark's `rewrite` makes it, when its place comes.

Where what the server says must be changed reply by reply while the client waits for each (in
front of a cluster, a command queued inside MULTI on a stream answered -MOVED/-ASK: no barrier may
go inside the transaction, an unknown command would abort its EXEC), a barrier's mark may be a
`Filter`: from its answer on, what the client is shown passes through the filter's `feed` as it
comes, until the answer of a barrier marked `FILTER_END` (sent after the transaction's end).

`StreamBarriers` is the sans-IO part (bytes in, bytes out); `StreamOrder` stands in for the
session as the stream's receiver while barriers are out, and gives the stream back after.
"""

from __future__ import annotations

import collections
import secrets

from ..pending import Pending, Receiver

__all__ = ["StreamBarriers", "StreamOrder", "BarrierEntry", "Rewrite", "Resolve", "Filter", "FILTER_END",
           "turns_replies_off"]

CRLF = b"\r\n"
MALFORMED = b"*1\r\n$x\r\n"  # fails as every protocol error does, and Redis answers it with:
MALFORMED_REPLY = b"-ERR Protocol error: invalid bulk length\r\n"
QUIT = b"*1\r\n$4\r\nQUIT\r\n"
ENDING = -1  # the number of the entry for the server's answer to MALFORMED
# What a barrier's answer starts (besides its reply): a stretch the client does not see, its
# end, a stretch the proxy watches (ended by a barrier whose mark is the watcher: `watched`).
HIDE, SHOW, WATCH, REWRITE = "hide", "show", "watch", "rewrite"
FILTER_END = "filter-end"  # what the client is shown no longer passes through a `Filter`


class Rewrite:
    """A barrier's mark whose reply (or the stretch a REWRITE barrier opened) is shown rewritten."""

    __slots__ = ()

    def rewrite(self, shown: bytes) -> bytes:
        return shown


class Resolve(Rewrite):
    """A `Rewrite` closing a stretch whose reply is known only once the server has answered the
    stretch's command (`StreamBarriers.resolve`): `answered` gets what the stretch holds then,
    once, and the reply is filled later (never from inside `answered`: `BarrierEntry`), or
    given at once from inside it (`known`)."""

    __slots__ = ("asked",)

    def __init__(self):
        self.asked = False

    def answered(self, stretch: bytes) -> None:
        pass

    @staticmethod
    def known(entry: BarrierEntry, reply: bytes) -> None:
        """From inside `answered`: the reply is `reply`, now (not filled later)."""
        entry.barrier[1] = reply
        entry.remaining = 0


class Filter:
    """A barrier's mark from whose answer on what the client is shown passes through `feed`, as
    it comes (whole replies or not), until the answer of a barrier marked `FILTER_END`."""

    __slots__ = ()

    def feed(self, shown: bytes) -> bytes:
        return shown


def turns_replies_off(args) -> bool:
    """CLIENT REPLY OFF or SKIP: from then on the server may leave commands unanswered."""
    return (len(args) > 2 and args[0].lower() == b"client" and args[1].lower() == b"reply"
            and args[2].lower() != b"on")


class StreamBarriers:
    """Barriers in the order they were sent, and the stream's bytes not yet passed on.

    An answer is a line of its own: it starts after a CRLF and its text has none up to the
    token. While a barrier is out, the bytes after the stream's last CRLF are held (they may be
    the start of its answer), and from an answer whose reply is not known yet (`add(None)`,
    then `fill`) everything is held."""

    __slots__ = ("prefix", "next_number", "waiting", "held", "owed", "hiding", "watching", "watched", "rewriting",
                 "filtering")

    def __init__(self, token: bytes | None = None):
        self.prefix = b"redis-guard-barrier-" + (token or secrets.token_hex(8).encode()) + b"-"
        self.next_number = 0
        self.waiting = collections.deque()  # [number, reply (None: not known yet), mark]
        self.held = b""
        self.owed = 0  # the bytes of the replies waiting
        self.hiding = False  # in a stretch of replies to the proxy's own commands (`hidden`)
        self.watching = None  # what the client was shown of a watched stretch so far
        self.watched = []  # (watcher, the bytes shown) of the stretches ended: for the caller
        self.rewriting = None  # what a stretch to rewrite holds so far (`rewrite`)
        self.filtering = None  # the `Filter` what is shown passes through now, if any

    def add(self, reply: bytes | None, mark=None) -> tuple[bytes, list]:
        """A barrier for `reply` (None: known later, `fill`): (the request to send, the barrier).
        `mark`: what its answer starts (HIDE, SHOW, WATCH, or a watcher: the end of a watch)."""
        number = self.next_number
        self.next_number += 1
        barrier = [number, reply, mark]
        self.waiting.append(barrier)
        self.owed += len(reply) if reply is not None else 0
        name = self.prefix + b"%d" % number
        return b"*1\r\n$%d\r\n%s\r\n" % (len(name), name), barrier

    def hidden(self, commands: bytes) -> bytes:
        """Commands of the proxy's own whose replies the client must not see, between two
        barriers: what to send. Only where the server answers every command (after a RESET:
        replies on, nothing pushed), or the stretch would not close."""
        return self.add(b"", HIDE)[0] + commands + self.add(b"", SHOW)[0]

    def watch(self, command: bytes, watcher) -> bytes:
        """A command whose reply `watcher` must see, between two barriers: what to send. What
        the client is shown between their answers (the reply, and whatever the server pushed
        meanwhile) goes to `watched` with the watcher. Only where the server answers every
        command, or the first barrier might be unanswered in the command's place."""
        return self.add(b"", WATCH)[0] + command + self.add(b"", watcher)[0]

    def rewrite(self, command: bytes, rewriter: Rewrite) -> bytes:
        """A command whose replies (and whatever the server wrote meanwhile) are shown as
        `rewriter.rewrite` makes them, between two barriers: what to send. Only where the server
        answers every command."""
        return self.add(b"", REWRITE)[0] + command + self.add(b"", rewriter)[0]

    def resolve(self, command: bytes, resolver: Resolve) -> tuple[bytes, list]:
        """`rewrite`, the closing barrier's reply left to `resolver` (`Resolve`): what to send,
        and that barrier (for a `BarrierEntry`)."""
        opening = self.add(b"", REWRITE)[0]
        closing, barrier = self.add(None, resolver)
        return opening + command + closing, barrier

    def end(self, reply: bytes) -> bytes:
        """The stream ends with a protocol error: the request to send, whose answer is `reply`'s place."""
        self.waiting.append([ENDING, reply, None])
        self.owed += len(reply)
        return MALFORMED

    def fill(self, barrier: list, reply: bytes) -> None:
        barrier[1] = reply
        if barrier in self.waiting:
            self.owed += len(reply)

    def _drop(self) -> None:
        reply = self.waiting.popleft()[1]
        self.owed -= len(reply) if reply is not None else 0

    def _unanswered(self, out: list) -> None:
        if self.waiting[0][2] is FILTER_END:
            self.filtering = None
        self._drop()
        self.watching = None  # the server leaves commands unanswered: a watch would not end
        if self.rewriting is not None:  # nor a stretch to rewrite: shown as it is
            rewriting, self.rewriting = self.rewriting, None
            self._show(out, b"".join(rewriting))

    @property
    def idle(self) -> bool:
        return not self.waiting and not self.held and self.filtering is None

    def feed(self, data: bytes) -> bytes:
        """The stream's next bytes in; what may go to the client now out."""
        if self.held:
            data = self.held + data
            self.held = b""
        waiting = self.waiting
        out = []
        pos = 0
        prefix = self.prefix
        while waiting:
            at = data.find(prefix, pos)
            if waiting[-1][0] == ENDING:
                end = _line_at(data, MALFORMED_REPLY, pos)
                if end >= 0 and (at < 0 or end < at):
                    # The server answered the request that ends the stream, so not the barriers
                    # still out before it (replies off): only the proxy's error takes its place.
                    if self.rewriting is not None:
                        rewriting, self.rewriting = self.rewriting, None
                        self._show(out, b"".join(rewriting))
                    self._show(out, data[pos:end])
                    out.append(waiting[-1][1])
                    waiting.clear()
                    self.owed = 0
                    self.hiding = False
                    self.watching = None
                    pos = end + len(MALFORMED_REPLY)
                    break
            if at < 0:
                break
            line_end = data.find(CRLF, at)
            start = data.rfind(CRLF, pos, at)
            start = pos if start < 0 else start + 2
            if line_end < 0:  # its answer's line is not whole yet
                return self._hold(out, data, pos, start)
            digits = at + len(prefix)
            end = digits
            while end < line_end and 48 <= data[end] <= 57:
                end += 1
            number = int(data[digits:end]) if end > digits else -1
            while waiting and waiting[0][0] < number:
                self._unanswered(out)  # not answered (CLIENT REPLY OFF or SKIP): nor is its reply
            if not waiting or waiting[0][0] != number:
                self._show(out, data[pos:line_end + 2])  # not one of ours: pass it on
                pos = line_end + 2
                continue
            _, reply, mark = waiting[0]
            if reply is None:  # answered, but the proxy's reply is not known yet
                if isinstance(mark, Resolve) and not mark.asked and self.rewriting is not None:
                    if self.watched:  # (a watch ended before it: its watcher first, then `feed` again)
                        return self._hold(out, data, pos, start)
                    # (the stretch is whole: what the server said decides the reply, `Resolve`)
                    self._show(out, data[pos:start])
                    pos = start
                    mark.asked = True
                    mark.answered(b"".join(self.rewriting))
                    if waiting[0][1] is not None:  # known at once (`Resolve.answered`): its place now
                        continue
                return self._hold(out, data, pos, start)
            self._drop()
            self._show(out, data[pos:start])
            if isinstance(mark, Rewrite):
                rewriting, self.rewriting = self.rewriting, None
                self._show(out, mark.rewrite(reply if rewriting is None else b"".join(rewriting) + reply))
                mark = None
            else:
                self._show(out, reply)
            if mark is not None:
                self._mark(mark)
            pos = line_end + 2
        cut = len(data)
        if waiting:
            last = data.rfind(CRLF, pos)
            cut = pos if last < 0 else last + 2
            self.held = data[cut:]
        self._show(out, data[pos:cut])
        return b"".join(out)

    def _hold(self, out: list, data: bytes, pos: int, start: int) -> bytes:
        """What goes before `start` out, the rest held for the next feed."""
        self._show(out, data[pos:start])
        self.held = data[start:]
        return b"".join(out)

    def _show(self, out: list, piece: bytes) -> None:
        if piece and self.rewriting is not None:
            self.rewriting.append(piece)
        elif piece and not self.hiding:
            if self.filtering is not None:
                piece = self.filtering.feed(piece)
            out.append(piece)
            if self.watching is not None:
                self.watching.append(piece)

    def _mark(self, mark) -> None:
        if mark is HIDE or mark is SHOW:
            self.hiding = mark is HIDE
        elif mark is WATCH:
            self.watching = []
        elif mark is REWRITE:
            self.rewriting = []
        elif mark is FILTER_END:
            self.filtering = None
        elif isinstance(mark, Filter):
            self.filtering = mark
        elif self.watching is not None:  # the end of a watch whose start was answered
            self.watched.append((mark, b"".join(self.watching)))
            self.watching = None


def _line_at(data: bytes, line: bytes, pos: int) -> int:
    """Where `line` stands as a line of its own in data[pos:] (pos is a line's start), or -1."""
    at = data.find(line, pos)
    while at > pos and data[at - 2:at] != CRLF:
        at = data.find(line, at + 1)
    return at


class BarrierEntry(Pending):
    """A reply the proxy makes later (`Session.reply_later`) for a streaming client: filled
    through the stream's `StreamOrder`, never in the reply queue."""

    __slots__ = ("barrier",)

    def __init__(self, order: StreamOrder, barrier: list):
        super().__init__(order, 1)
        self.barrier = barrier


class StreamOrder(Receiver):
    """The stream's receiver while barriers are out: the session gets the stream's bytes with
    the proxy's replies in place of the barriers' answers."""

    __slots__ = ("session", "stream", "barriers", "ending", "counted")

    def __init__(self, session, stream: Pending):
        self.session = session
        self.stream = stream
        self.barriers = StreamBarriers()
        self.ending = False  # the server was asked to close the stream's connection
        self.counted = 0  # what the order holds, counted in the session's held bytes

    def _count(self) -> None:
        """What waits here counts against the client's output limit like replies it has not
        read: replies off, a client refused over and over would otherwise grow it for good."""
        barriers = self.barriers
        holding = barriers.owed + len(barriers.held)
        session = self.session
        session.held_bytes += holding - self.counted
        self.counted = holding
        if session.held_bytes > session.output_limit:
            session.overflow()

    @classmethod
    def of(cls, session, stream: Pending) -> StreamOrder:
        order = stream.receiver
        if type(order) is not cls:
            order = stream.receiver = cls(session, stream)
        return order

    def send(self, reply: bytes | None, mark=None):
        """A barrier on the stream's connection for `reply` (`mark`: a `Rewrite` of it); the barrier."""
        request, barrier = self.barriers.add(reply, mark)
        self._send(request)
        return barrier

    def hidden(self, commands: bytes) -> None:
        """Commands of the proxy's own on the stream, their replies unseen (`StreamBarriers.hidden`)."""
        self._send(self.barriers.hidden(commands))

    def watched(self, command: bytes, watcher, first: bool = False) -> None:
        """The client's command on the stream, and what the client is shown of its reply for
        `watcher.observe` too (`StreamBarriers.watch`); `first`: the command starts the stream."""
        self._send(self.barriers.watch(command, watcher), first)

    def _send(self, request: bytes, first: bool = False) -> None:
        self.stream.conn.send(request, self.stream if first else None)
        self._count()

    def rewritten(self, command: bytes, rewriter: Rewrite, first: bool = False) -> None:
        """The client's command on the stream, what it makes the server write shown as
        `rewriter` makes it (`StreamBarriers.rewrite`); `first`: the command starts the stream."""
        self._send(self.barriers.rewrite(command, rewriter), first)

    def resolved(self, command: bytes, resolver: Resolve) -> BarrierEntry:
        """The client's command on the stream, its reply decided once the server has answered it
        (`StreamBarriers.resolve`): the entry to fill with it."""
        request, barrier = self.barriers.resolve(command, resolver)
        self._send(request)
        return BarrierEntry(self, barrier)

    def end(self, error: bytes | None) -> None:
        """The client's QUIT (`error` None) or protocol error: the server answers what came
        before, then closes the connection, as it would the client's."""
        conn = self.stream.conn
        conn.close_asked = True
        conn.send(QUIT if error is None else self.barriers.end(error), None)
        self.ending = True
        self._count()

    def owes(self) -> bool:
        """Is something still to come from the server before the client's connection may close
        (a reply of the proxy's behind a barrier, or the server's own close)?"""
        return (self.ending or bool(self.barriers.waiting)) and not self.stream.conn.closed

    def deliver(self, pending: Pending, data: bytes, done: int) -> None:
        if pending is self.stream:
            out = self.barriers.feed(data)
        else:  # a reply made later (BarrierEntry)
            self.barriers.fill(pending.barrier, data)
            pending.remaining = 0
            out = self.barriers.feed(b"")
        barriers = self.barriers
        session = self.session
        while True:
            if barriers.idle and not self.ending and self.stream.receiver is self:
                self.stream.receiver = session
            self._count()
            if out:
                session.deliver(self.stream, out, 0)
            if not barriers.watched:
                break
            while barriers.watched:
                watcher, shown = barriers.watched.pop(0)
                watcher.observe(shown)
            # A resolver's answer after a watch's end waits for the watcher (the tracking options
            # it saw accepted apply to what the resolver then sends elsewhere): the rest now.
            out = barriers.feed(b"") if barriers.held else b""
        session.stream_caught_up()

    def pending_failed(self, pending: Pending, error: bytes, partial: bool) -> None:
        if pending is self.stream:
            held, self.barriers.held = self.barriers.held, b""
            self.session.held_bytes -= self.counted
            self.counted = 0
            if held:  # what the server wrote last, whole as far as it goes
                self.session.deliver(pending, held, 0)
            self.session.pending_failed(pending, error, partial)

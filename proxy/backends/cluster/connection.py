"""Connections to cluster nodes: redirections are caught before any client sees them.

A `ClusterConnection` is an upstream connection whose routed entries (`RoutedPending`: a run of
a client's consecutive commands that the router sent by hash slot; several of them may share one
request, see `send_all`) may be answered `-MOVED`, `-ASK`, `-TRYAGAIN` or `-CLUSTERDOWN`.
Such a reply must not reach the client: the router sends that one command again where it
belongs, and its reply takes the redirected one's place. Replies are forwarded as bytes exactly
as on a standalone connection; only a chunk in which a top-level error reply may start (its
first byte is `-`, or it holds `\\n-`) is walked one reply at a time, and an error reply cut
across reads is held until it is whole (errors are one short line). A connection that never
connected (the node is down) hands its routed requests back to the router to wait for the
failover rather than failing them: they were never sent.
"""

from __future__ import annotations

from ... import compiled
from ...pending import Pending, queue_popleft
from ...resp.replies import ReplySplitter, ReplyStreamError, error_among, line_dash
from ...upstream.connection import CLOSED, UpstreamConnection
from ...upstream.pools import Opener, SharedPool
from .routing.redirect import ClusterError, classify_error

NOSCRIPT = b"-NOSCRIPT"  # (scripts.NOSCRIPT, scripts.NO_FUNCTION: the router loads it and sends again)
NO_FUNCTION = b"-ERR Function not found"
RETRIED = (ClusterError.MOVED, ClusterError.ASK, ClusterError.TRYAGAIN, ClusterError.CLUSTERDOWN)
KEYLESS = -1  # a RoutedPending's `slot` when its commands have no key (any master answers them)
READONLY = (("READONLY",),)


class RoutedPending(Pending):
    """Replies a client awaits for `count` commands it sent by hash slot, which can each be sent
    again: `source` is the client's batch (commands `first`...) or one packed request. `owner`
    keeps the entry's place among others (`split_run`): the client's `ClusterClient`, or the
    Scatter of a stretch. `hash_slot` is the slot its commands go by, None for keyless ones:
    kept as a C number (`slot`, KEYLESS for None), so that a run costs no int object."""

    # A Pending (every entry of a connection's queue is one): only the fields it adds.
    __slots__ = compiled.declared_fields(__file__, "RoutedPending")

    def __init__(self, receiver, count: int, conn, source, first: int, hash_slot: int | None, owner=None):
        self._fill(receiver, count, conn, source, first, KEYLESS if hash_slot is None else hash_slot, owner, None)

    @staticmethod
    def of_run(session, count: int, conn, batch, first: int, slot: int) -> RoutedPending:
        """A session's run of `count` commands of `batch` from `first`, all of `slot` (KEYLESS:
        none), with its request bytes as `sent` (what the route sends; a whole read is its raw
        bytes, without span's copy): the monitor reads the first command's name there as on
        one server, without a call to find it in `batch`. The route's hot path (compiled, C
        calls, without the constructor's argument parsing)."""
        entry = RoutedPending.__new__(RoutedPending)
        sent = batch.raw if count == len(batch.commands) else batch.span(first, first + count)
        entry._fill(session, count, conn, batch, first, slot, session.extra, sent)
        return entry

    def _fill(self, receiver, count: int, conn, source, first: int, slot: int, owner, sent) -> None:
        self._fill_pending(receiver, count, conn, sent)  # (None: the monitor takes the names from `source`)
        self.owner = owner
        self.source = source
        self.first = first
        self.slot = slot
        self.attempts = 0
        self.asking = False
        self.down_since = None  # when the cluster first answered CLUSTERDOWN for it
        self.down_tries = 0

    @property
    def hash_slot(self) -> int | None:
        slot = self.slot
        return None if slot == KEYLESS else slot

    @hash_slot.setter
    def hash_slot(self, value: int | None) -> None:
        self.slot = KEYLESS if value is None else value

    def request(self, k: int = 0) -> bytes:
        """The bytes of the k-th command of this run."""
        source = self.source
        if isinstance(source, bytes):
            return source
        at = self.first + k
        return source.span(at, at + 1)

    def requests(self) -> bytes:
        """The bytes of every command of this run, to send (again)."""
        if self.count == 1:
            return self.request(0)
        return self.source.span(self.first, self.first + self.count)


class Part(Pending):
    """The commands of one stretch bound for one connection, sent as one request and awaited as
    one entry in that connection's queue: of the client's batch, the commands from `first` whose
    `order` byte is the part's `number`, in order; `sent`, that request's bytes. Its replies are
    only kept (`chunks`: None, then the bytes of one read, then a list when more reads bring
    some) until all are in; its receiver, the stretch's Scatter, deals them back into client
    order. What runs' entries do besides (a redirection, a failure, parking) the Scatter leaves
    to them: it turns its parts into run entries first (`Scatter.explode`), `entries` once it
    has, whose commands it reads again from `sent`. A part holds no reference to the client's
    batch: its parsed commands are freed with the read that brought them, while still in the
    processor's cache. (Held until the replies came, their frees and the next reads'
    allocations missed it: under perf at -P 16, tuples' and lists' allocations and frees took
    twice the standalone proxy's time; benchmarks/README.md.)"""

    __slots__ = compiled.declared_fields(__file__, "Part")

    def __init__(self, scatter, count: int, conn, sent: bytes, first: int, order, number: int):
        self._fill_part(scatter, count, conn, first, order, number, sent)

    @staticmethod
    def of_stretch(scatter, count: int, conn, first: int, order, number: int, sent: bytes) -> Part:
        """The route's hot path (compiled, a C call without the constructor's argument parsing)."""
        part = Part.__new__(Part)
        part._fill_part(scatter, count, conn, first, order, number, sent)
        return part

    def _fill_part(self, scatter, count: int, conn, first: int, order, number: int, sent) -> None:
        self._fill_pending(scatter, count, conn, sent)  # (compiled: a C call, not super().__init__'s Python one)
        self.first = first
        self.order = order
        self.number = number
        self.chunks = None  # (no list for the usual part, whose replies come in one read)
        self.size = 0
        self.entries = None

    def replies(self) -> bytes:
        """The reply bytes it kept, in one piece; the part lets go of them."""
        chunks, self.chunks = self.chunks, None
        if chunks is None:
            return b""
        return chunks if type(chunks) is bytes else b"".join(chunks)

    def take_replies(self, counts: list) -> list:
        """The reply bytes it kept, cut in pieces of `counts` replies, for the pieces they reach
        (the last may end inside a reply). The part lets go of them."""
        data = self.replies()
        if not data:
            return []
        if len(counts) == 1:
            return [data]
        scan = ReplySplitter().scan
        size = len(data)
        pieces = []
        pos = 0
        for count in counts:
            end = scan(data, pos, count)[0]
            pieces.append(data[pos:end])
            if end == size:
                break
            pos = end
        return pieces


def cut_run(conn, entry: RoutedPending) -> tuple[RoutedPending, list]:
    """`conn` answered the next command of the run `entry` with a redirection: cut the run
    there, as the router will send that one command again elsewhere. Returns the entry that now
    awaits its reply and the new entries to queue right after `entry` in its owner's order (the
    retry, and the rest of the run, which stays first in line on `conn`). When the run had
    answers before it, `entry` keeps just those and is complete."""
    done = entry.count - entry.remaining
    rest = entry.remaining - 1
    tail = RoutedPending(entry.receiver, rest, conn, entry.source, entry.first + done + 1, entry.hash_slot,
                         entry.owner) if rest else None
    if tail is not None:
        conn.pending[0] = tail
    else:
        conn.pending.popleft()
    conn.restamp(entry, tail)
    if done == 0:
        entry.count = entry.remaining = 1
        return entry, [tail] if tail else []
    retry = RoutedPending(entry.receiver, 1, None, entry.source, entry.first + done, entry.hash_slot, entry.owner)
    retry.attempts = entry.attempts
    entry.count = done
    entry.remaining = 0
    return retry, [retry, tail] if tail else [retry]


class ClusterConnection(UpstreamConnection):
    __slots__ = compiled.declared_fields(__file__, "ClusterConnection")

    def __init__(self, loop, address, startup, on_close=None, router=None, place=(2, 0)):
        super().__init__(loop, address, startup, on_close)
        self.router = router
        self.protocol, self.index = place  # its pool's protocol and its index there: where a retry goes
        self.error_partial = None  # the first bytes of an error reply cut across reads
        self.dash = -1  # in a read that may hold an error reply, where one may start next (-1: none)

    def _deliver(self, data: bytes, catching: bool = False) -> None:
        # Where an error reply may start (a line feed, then '-'), found again once passed (`_catch`).
        dash = line_dash(data, 0)
        if dash < 0 and data[0] != 45 and self.error_partial is None:
            # No reply in this read is an error (every reply after the first starts after a
            # line feed): nothing to catch, each entry's replies are cut as a server's are.
            UpstreamConnection._deliver(self, data)
            return
        self.dash = dash
        UpstreamConnection._deliver(self, data, True)  # the server's loop, each entry offered to _catch

    def _catch(self, entry, data: bytes, pos: int) -> int:
        """A read that may hold an error reply, at `entry`'s replies from data[pos:]: a part of a
        stretch is turned into its runs where an error may be among its replies; a run's reply
        that is an error is taken alone, and a redirection (or a script the node lacks) goes back
        to the router instead of to the client; an error cut across reads is held until whole.
        -1: `entry`'s replies go to it as a server's do (none of them an error)."""
        splitter = self.splitter
        pending = self.pending
        dash = self.dash
        if 0 <= dash < pos:
            dash = self.dash = line_dash(data, pos)
        # A reply of a part's runs may be a redirection: one entry a run, where an error reply
        # starts among its replies here (not a value's line that starts with '-', a PEM block's
        # or a YAML list's), or where that is not told apart here.
        if type(entry) is Part and (splitter.in_reply or data[pos] == 45 or self.error_partial is not None
                                    or (dash >= 0 and error_among(data, pos, entry.remaining))):
            entry.receiver.explode()
            if pending and pending[0] is entry:  # never left in place: a loop would not end
                raise ReplyStreamError("a stretch's part was not replaced by its runs")
            return pos
        if type(entry) is not RoutedPending or (self.error_partial is None and data[pos] != 45 and dash < 0):
            return -1
        starts_error = self.error_partial is not None or (data[pos] == 45 and not splitter.in_reply)
        replies, end, done = splitter.cut(data, pos, 1)
        if not starts_error:
            entry.receiver.deliver(entry, replies, done)
        else:
            error = (self.error_partial or b"") + replies
            if not done:
                self.error_partial = error
                return len(data)
            self.error_partial = None
            if classify_error(error) in RETRIED:
                self.router.redirected(self, entry, error)
                return end
            if (error.startswith(NOSCRIPT) or error.startswith(NO_FUNCTION)) and self.router.reload(
                    self, entry, error):
                return end
            entry.receiver.deliver(entry, error, 1)
        if self.state is CLOSED:
            return len(data)
        if entry.remaining == 0 and pending and pending[0] is entry:
            queue_popleft(pending)
        return end

    def fail(self, reason: str, connecting: bool = False, refused: bool = False, reply: bytes | None = None) -> None:
        if self.state is CLOSED:
            return
        for entry in [entry for entry in self.pending if type(entry) is Part]:
            entry.receiver.explode()  # run entries fail, or wait for a new owner, each in its place
        if connecting and self.router is not None:
            # Never connected: nothing was sent, so the routed requests wait for a new owner.
            kept = [entry for entry in self.pending if type(entry) is RoutedPending]
            self.pending = type(self.pending)(entry for entry in self.pending if type(entry) is not RoutedPending)
            super().fail(reason, connecting, refused, reply)
            for entry in kept:
                self.router.park(entry)
            return
        super().fail(reason, connecting, refused, reply)


class NodePool(SharedPool):
    """Shared connections to one cluster node; a failure makes the router look again."""

    __slots__ = ("readonly", "protocol")

    def __init__(self, loop, upstream, protocol: int, size: int, timeout: float, router, readonly=False):
        super().__init__(Opener(loop, upstream, 0, protocol, timeout, cls=ClusterConnection, retry_interval=0.25,
                                on_failure=lambda conn: router.node_failed(upstream.address, conn.close_reason),
                                router=router), size)
        self.readonly = readonly  # connections to a replica, for reads: READONLY first
        self.protocol = protocol

    @property
    def upstream(self):
        return self.opener.upstream

    def _extra(self, index: int) -> dict:
        return {"place": (self.protocol, index), "also": READONLY if self.readonly else ()}

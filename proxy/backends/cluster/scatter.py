"""One entry in a client's reply queue for a stretch of a pipeline that goes to several masters.

Theory of operation: a stretch of consecutive ordinary commands whose keys live on several
masters is sent as one request per connection, holding that connection's commands in pipeline
order, and the client's reply queue gets one `Scatter` for the whole stretch. Inside, the
stretch is its `order`: for each command, the number of its connection's `Part`. In the usual
case each connection awaits its commands as that one Part: its replies are kept until every
part's are in, then they are dealt back into client order (`replies.interleave`, in C when
compiled: a reply cut and copied once) and passed on in one piece. Anything else turns the
parts into run entries (`explode`: a read in which a reply may be a redirection, a connection
that fails, a part past 64 KiB): one `RoutedPending` for each run (consecutive commands for one
connection, in client order), queued on their connections in the parts' places, with the
replies already received, so that the connection's reply scan cuts each run's replies exactly
and MOVED/ASK/TRYAGAIN, failures and parking work on them as on a session's runs. The Scatter is
their receiver: it keeps them in order, as the session keeps its reply queue, and passes the
replies on to the client in that order: in one piece once the stretch is complete, or whenever
64 KiB are ready, so that a big reply streams through the session's usual flow control. Replies
received ahead of the one awaited are buffered and counted against the client's output limit
(a part's, all of them); the shared connections that carry them are never paused for one
client. Once complete it lets go of its parts and runs (they point back at it). When a run
fails, the client gets the replies before it, then the session's own failure handling (its
connection closes); one that fails half-way through a reply the client has started to receive
closes the client at once.
"""

from __future__ import annotations

import logging

from ... import compiled
from ...pending import Pending, keep, queue_append
from ...resp.order import runs as stretch_runs
from ...resp.reader import requests_again
from ...resp.replies import ReplySplitter, interleave
from ...session.states import CLOSED
from .connection import Part, RoutedPending, cut_run

FLUSH_BYTES = 65536  # ready reply bytes passed on before the stretch is complete
log = logging.getLogger("redis_guard.cluster")


class Scatter(Pending):
    """The client's entry for a stretch, and the receiver (and owner) of the stretch's runs."""

    __slots__ = compiled.declared_fields(__file__, "Scatter")

    def __init__(self, session):
        self._fill_scatter(session)

    @staticmethod
    def of_session(session) -> Scatter:
        """The route's hot path (compiled, a C call without the constructor's argument parsing)."""
        scatter = Scatter.__new__(Scatter)
        scatter._fill_scatter(session)
        return scatter

    def _fill_scatter(self, session) -> None:
        self._fill_pending(session, 1, None, None)  # (compiled: a C call, not super().__init__'s Python one)
        self.session = session
        self.parts = None  # one Part a connection (numbered by their place), while the stretch is awaited as parts
        self.left = 0  # parts not complete
        self.runs = None  # RoutedPendings, in the client's order, once the parts exploded
        self.at = 0
        self.front = None  # the run whose replies the client gets next
        self.ready = None  # reply bytes in client order, not passed on yet (a list, once the parts exploded)
        self.ready_size = 0
        self.failed = None  # (run, error) of the first run that failed, when not the front

    def _gone(self) -> bool:
        """The client is gone, or the stretch already ended in a failure."""
        return self.session.state.life is CLOSED or self.remaining == 0

    # -- what the connections hand over (the Scatter stands where a session would) ----------

    def deliver(self, entry, data: bytes, done: int) -> None:
        if done:
            entry.remaining -= done
        session = self.session
        if self.remaining == 0 or session.state.life is CLOSED:  # _gone(), once per run: inline
            return
        if self.parts is not None:  # a Part's replies: kept whole, cut when every part's are in
            part = entry
            chunks = part.chunks
            if chunks is None:
                part.chunks = data
            elif type(chunks) is bytes:
                part.chunks = [chunks, data]
            else:
                chunks.append(data)
            size = part.size = part.size + len(data)
            held = session.held_bytes = session.held_bytes + len(data)
            if held > session.output_limit:
                session.overflow()
            elif size >= FLUSH_BYTES:
                self.explode()  # a big reply: per run, the front's streams
            elif part.remaining == 0:
                self.left -= 1
                if self.left == 0:
                    self._assemble()
            return
        if entry is self.front:
            self.ready.append(data)
            self.ready_size += len(data)
            self.conn = entry.conn
            if entry.remaining == 0:
                self._advance()
            elif self.ready_size >= FLUSH_BYTES:
                self._pass_on(0)
            return
        # Replies far ahead of the one awaited: buffered, against the client's output limit.
        keep(entry, data)
        session.held_bytes += len(data)
        if session.held_bytes > session.output_limit:
            session.overflow()

    def pending_failed(self, entry, error: bytes, partial: bool) -> None:
        if type(entry) is Part:  # (its connection explodes its parts before it fails them)
            self.explode()
            for run in entry.entries or ():
                if run.remaining:
                    self.pending_failed(run, error, partial)
                    partial = False
            return
        count = entry.remaining
        if count == 0:
            return
        entry.remaining = 0
        if self._gone():
            return
        if entry is self.front:
            self._pass_on(0)
            self.session.pending_failed(self, error, partial)
            return
        if partial and entry.buffered is not None:
            # Keep the complete replies; drop the start of the one cut by the failure.
            data = b"".join(entry.buffered)
            end, _done, _pushes = ReplySplitter().scan(data, 0, entry.count - count)
            self.session.held_bytes -= len(data) - end
            entry.buffered = [data[:end]]
            entry.buffered_size = end
        if self.failed is None or self.runs.index(entry, self.at) < self.runs.index(self.failed[0], self.at):
            self.failed = (entry, error)

    # -- parts --------------------------------------------------------------------------------

    def _assemble(self) -> None:
        """Every part's replies are in: deal them back into client order, pass them on."""
        parts, self.parts = self.parts, None
        replies = []
        held = 0
        for part in parts:
            held += part.size
            replies.append(part.replies())
        session = self.session
        session.held_bytes -= held
        self.conn = part.conn  # (the last part's)
        part = parts[0]
        try:
            reply = interleave(replies, part.order)
        except ValueError as exc:  # a part's replies do not add up (its connection counted them): a bug
            log.error("a pipeline's replies could not be put back in order: %s", exc)
            session.pending_failed(self, b"", False)  # the replies before it, then the client is closed
            return
        session.deliver(self, reply, 1)  # (what _pass_on(1) does with `ready` as [reply], without the lists)

    def explode(self) -> None:
        """Go on with a run entry for every run of every part: each in its part's place in its
        connection's queue (the runs not answered yet), with the replies received so far."""
        parts, self.parts = self.parts, None
        if parts is None:
            return
        self.ready = []
        session = self.session
        runs = stretch_runs(parts[0].order, parts[0].first)
        # A run is sent again by its first command's slot (a retry, a wait for a failover), as
        # a session's runs are: found again as the route found it. Its commands are its part's,
        # read again from the part's request (a part holds no reference to the client's batch).
        backend = session.backend
        decide = backend.routes.decide
        master_for_slot = backend.router_of(session).slotmap.master_for_slot
        sources = [requests_again(part.sent) for part in parts]
        taken = [0] * len(parts)  # each part's commands given to its runs so far
        made = [[] for _ in parts]
        for number, start, stop in runs:
            source = sources[number]
            first = taken[number]
            taken[number] = first + stop - start
            routed = decide(source.commands[first], master_for_slot)
            made[number].append(RoutedPending(self, stop - start, parts[number].conn, source, first,
                                              routed if type(routed) is int else None, self))
        for part, entries in zip(parts, made):
            part.entries = entries
            # What each run was answered goes by the connection's count: a gone client's replies
            # are counted, not kept, and the runs must owe the connection only the rest.
            answered = part.count - part.remaining
            for entry in entries:
                done = min(answered, entry.count)
                entry.remaining -= done
                answered -= done
            for entry, piece in zip(entries, part.take_replies([entry.count for entry in entries])):
                entry.buffered = [piece]
                entry.buffered_size = len(piece)
            waiting = [entry for entry in entries if entry.remaining]
            queue = part.conn.pending
            if waiting and part in queue:  # (not when its connection failed and let go of it)
                at = queue.index(part)
                del queue[at]
                for offset, entry in enumerate(waiting):
                    queue.insert(at + offset, entry)
                part.conn.restamp(part, waiting[-1])
        each = [iter(entries) for entries in made]
        runs = self.runs = [next(each[number]) for number, _start, _stop in runs]
        front = self.front = runs[0]
        if front.buffered is not None:  # the front's replies are ready, not held
            self.ready = front.buffered
            self.ready_size = front.buffered_size
            session.held_bytes -= front.buffered_size
            front.buffered = None
            front.buffered_size = 0
            self.conn = front.conn
        if front.remaining == 0:
            self._advance()
        elif self.ready_size >= FLUSH_BYTES:
            self._pass_on(0)

    # -- runs -----------------------------------------------------------------------------------

    def split_run(self, conn, entry: RoutedPending) -> RoutedPending:
        """The router sends the next command of `entry` again elsewhere (see `cut_run`)."""
        retry, added = cut_run(conn, entry)
        runs = self.runs
        at = runs.index(entry, self.at)
        runs[at + 1:at + 1] = added
        if retry is not entry and entry is self.front:
            self._advance()
        return retry

    # -- replies to the client, in its order ----------------------------------------------

    def _advance(self) -> None:
        """The front run is complete: take the replies of the runs after it, up to the next
        one still awaited."""
        runs = self.runs
        count = len(runs)
        at = self.at + 1
        ready = self.ready
        session = self.session
        failed = self.failed
        while at < count:
            entry = runs[at]
            chunks = entry.buffered
            if chunks is not None:
                ready += chunks
                self.ready_size += entry.buffered_size
                session.held_bytes -= entry.buffered_size
                entry.buffered = None
                entry.buffered_size = 0
                self.conn = entry.conn
            if failed is not None and entry is failed[0]:
                self.runs = self.front = None
                self._pass_on(0)
                session.pending_failed(self, failed[1], False)
                return
            if entry.remaining:
                break
            at += 1
        self.at = at
        if at == count:
            # The runs point at their Scatter: let go of them, so reference counting frees
            # both (a cycle per stretch would wait for the garbage collector).
            self.runs = self.front = None
            self._pass_on(1)
            return
        self.front = runs[at]
        if self.ready_size >= FLUSH_BYTES:
            self._pass_on(0)

    def _pass_on(self, done: int) -> None:
        ready = self.ready
        if not ready and not done:
            return
        self.ready = []
        self.ready_size = 0
        self.session.deliver(self, ready[0] if len(ready) == 1 else b"".join(ready), done)


def scatter_stretch(session, batch, first: int, order, conns: list, counts: list | None = None) -> Scatter:
    """The Scatter for the stretch of `batch` from command `first` whose command first + i goes
    to `conns[order[i]]`; each connection is sent its commands, in order, as one request.
    (`counts`: each part's number of commands, when the caller has counted them.)"""
    scatter = Scatter.of_session(session)
    if counts is None:
        counts = [0] * len(conns)
        for number in order:
            counts[number] += 1
    requests = batch.requests_by_part(first, order, len(conns))
    parts = []
    for number in range(len(conns)):
        parts.append(Part.of_stretch(scatter, counts[number], conns[number], first, order, number, requests[number]))
    scatter.parts = parts
    scatter.left = len(parts)
    queue_append(session.queue, scatter)
    session.inflight += 1
    for number in range(len(conns)):
        conn = conns[number]
        conn.send(requests[number], parts[number])
        if conn.write_paused:
            session.wait_for_upstream(conn)
    return scatter

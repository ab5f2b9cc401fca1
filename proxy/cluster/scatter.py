"""One entry in a client's reply queue for a stretch of a pipeline that goes to several masters.

Theory of operation: a stretch of consecutive ordinary commands whose keys live on several
masters is sent as one request per connection, holding that connection's commands in pipeline
order, and the client's reply queue gets one `Scatter` for the whole stretch. Inside, the
stretch is a list of runs (`RoutedPending`s of consecutive commands for one connection, in
client order) queued on their connections like any routed entry, so the connection's one reply
scan cuts each run's replies exactly and MOVED/ASK/TRYAGAIN, failures and parking work on them
as on a session's runs. The Scatter is their receiver: it keeps them in order, as the session
keeps its reply queue, and passes the replies on to the client in that order: in one piece once
the stretch is complete, or whenever 64 KiB are ready, so that a big reply streams through the
session's usual flow control. Replies of runs far ahead of the one awaited are buffered and
counted against the client's output limit; the shared connections that carry them are never
paused for one client. Once complete it lets go of its runs (they point back at it). When a run
fails, the client gets the replies before it, then the session's own failure handling (its
connection closes); one that fails half-way through a reply the client has started to receive
closes the client at once.
"""

from __future__ import annotations

from ..pending import Pending, keep
from ..resp.replies import ReplySplitter
from .connection import RoutedPending, cut_run

FLUSH_BYTES = 65536  # ready reply bytes passed on before the stretch is complete


class Scatter(Pending):
    """The client's entry for a stretch, and the receiver (and owner) of the stretch's runs."""

    __slots__ = ("runs", "front", "at", "ready", "ready_size", "failed", "session")

    def __init__(self, session, runs: list):
        super().__init__(session, 1)
        self.session = session
        self.runs = runs  # RoutedPendings, in the client's order
        self.at = 0
        self.front = None  # the run whose replies the client gets next
        self.ready = []  # reply bytes in client order, not passed on yet
        self.ready_size = 0
        self.failed = None  # (run, error) of the first run that failed, when not the front

    @classmethod
    def of_runs(cls, session, batch, runs: list) -> tuple[Scatter, list]:
        """The Scatter for `runs` [(connection, start, stop, hash slot)] of `batch`, and what
        to send: [(connection, its runs, one request with their commands)]."""
        entries = []
        scatter = cls(session, entries)
        by_conn = {}
        raw = batch.raw
        ends = batch.ends
        for conn, start, stop, hash_slot in runs:
            entry = RoutedPending(scatter, stop - start, conn, batch, start, hash_slot, scatter)
            entries.append(entry)
            span = raw[ends[start - 1] if start else 0:ends[stop - 1]]
            there = by_conn.get(conn)
            if there is None:
                by_conn[conn] = ([entry], [span])
            else:
                there[0].append(entry)
                there[1].append(span)
        scatter.front = entries[0]
        return scatter, [(conn, there, spans[0] if len(spans) == 1 else b"".join(spans))
                         for conn, (there, spans) in by_conn.items()]

    def _gone(self) -> bool:
        """The client is gone, or the stretch already ended in a failure."""
        return self.session.state.life == "closed" or self.remaining == 0

    # -- what the connections hand over (the Scatter stands where a session would) ----------

    def deliver(self, entry: RoutedPending, data: bytes, done: int) -> None:
        if done:
            entry.remaining -= done
        session = self.session
        if self.remaining == 0 or session.state.life == "closed":  # _gone(), once per run: inline
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

    def pending_failed(self, entry: RoutedPending, error: bytes, partial: bool) -> None:
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

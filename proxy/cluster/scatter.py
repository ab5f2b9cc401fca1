"""One client slot for a stretch of a pipeline that goes to several masters.

Theory of operation: a stretch of consecutive ordinary commands whose keys live on several
masters is sent as one request per connection, holding that connection's commands in pipeline
order, and the client's reply queue gets one `Scatter` for the whole stretch. Inside, the
stretch is a list of runs (`RoutedSlot`s of consecutive commands for one connection, in client
order) queued on their connections like any routed slot, so the connection's one reply scan
cuts each run's replies exactly and MOVED/ASK/TRYAGAIN, failures and parking work on them as
on a session's runs. The Scatter is their session: it keeps them in order, as the session keeps
its slots, and passes the replies on to the client's slot in that order: in one piece once the
stretch is complete, or whenever 64 KiB are ready, so that a big reply streams through the
session's usual flow control. Once complete it lets go of its runs (they point back at it). A run that fails gets the error reply for each of its commands not answered yet;
one that fails half-way through a reply the client has already started to receive closes the
client, as in standalone mode.
"""

from __future__ import annotations

from ..monitor import live
from ..resp.replies import ReplySplitter
from ..slots import Slot, keep
from .connection import RoutedSlot, cut_run

FLUSH_BYTES = 65536  # ready reply bytes passed on before the stretch is complete


class Scatter(Slot):
    """The client's slot for a stretch, and the session of the stretch's runs."""

    __slots__ = ("runs", "front", "at", "ready", "ready_size", "held")

    def __init__(self, session, runs: list):
        super().__init__(session, 1)
        self.runs = runs  # RoutedSlots, in the client's order
        self.at = 0
        self.front = None  # the run whose replies the client gets next
        self.ready = []  # reply bytes in client order, not passed on yet
        self.ready_size = 0
        self.held = None  # connections paused because their run got too far ahead

    @classmethod
    def of_runs(cls, session, batch, runs: list) -> tuple[Scatter, list]:
        """The Scatter for `runs` [(connection, start, stop, hash slot)] of `batch`, and what
        to send: [(connection, its runs, one request with their commands)]."""
        slots = []
        scatter = cls(session, slots)
        by_conn = {}
        raw = batch.raw
        ends = batch.ends
        for conn, start, stop, hash_slot in runs:
            slot = RoutedSlot(scatter, stop - start, conn, batch, start, hash_slot)
            slots.append(slot)
            span = raw[ends[start - 1] if start else 0:ends[stop - 1]]
            there = by_conn.get(conn)
            if there is None:
                by_conn[conn] = ([slot], [span])
            else:
                there[0].append(slot)
                there[1].append(span)
        scatter.front = slots[0]
        return scatter, [(conn, there, spans[0] if len(spans) == 1 else b"".join(spans))
                         for conn, (there, spans) in by_conn.items()]

    # -- what the connections hand over (the Scatter stands where a session would) ----------

    def deliver(self, slot: RoutedSlot, data: bytes, done: int) -> None:
        if done:
            slot.remaining -= done
            if not slot.remaining:
                live.slot_done(slot)  # the stretch's runs are timed one by one
        session = self.session
        if session.closed or self.remaining == 0:  # gone, or failed for a reply cut half-way
            return
        if slot is self.front:
            self.ready.append(data)
            self.ready_size += len(data)
            self.conn = slot.conn
            if slot.remaining == 0:
                self._advance()
            elif self.ready_size >= FLUSH_BYTES:
                self._pass_on(0)
            return
        if keep(slot, data) > session.buffer_limit and slot.conn is not None:
            # Replies far ahead of the one awaited: stop reading them until it has come.
            if self.held is None:
                self.held = set()
            self.held.add(slot.conn)
            session._hold_upstream(slot)

    def slot_failed(self, slot: RoutedSlot, error: bytes, partial: bool) -> None:
        count = slot.remaining
        if count == 0:
            return
        slot.remaining = 0
        if self.session.closed or self.remaining == 0:
            return
        if slot is self.front:
            if partial:  # the start of a reply that will never end is on its way to the client
                self._pass_on(0)
                self.session.slot_failed(self, error, True)
                return
            self.ready.append(error * count)
            self._advance()
            return
        if partial and slot.buffered is not None:
            # Keep the complete replies; drop the start of the one cut by the failure.
            data = b"".join(slot.buffered)
            end, _done, _pushes = ReplySplitter().scan(data, 0, slot.count - count)
            slot.buffered = [data[:end]]
        slot.buffered = (slot.buffered or []) + [error * count]

    def split_run(self, conn, slot: RoutedSlot) -> RoutedSlot:
        """The router sends the next command of `slot` again elsewhere (see `cut_run`)."""
        retry, added = cut_run(conn, slot, self)
        runs = self.runs
        at = runs.index(slot, self.at)
        runs[at + 1:at + 1] = added
        if retry is not slot and slot is self.front:
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
        while at < count:
            slot = runs[at]
            chunks = slot.buffered
            if chunks is not None:
                ready += chunks
                self.ready_size += slot.buffered_size
                slot.buffered = None
                slot.buffered_size = 0
                self.conn = slot.conn
            if slot.remaining:
                break
            at += 1
        self.at = at
        if at == count:
            # The runs point at their Scatter: let go of them, so reference counting frees
            # both (a cycle per stretch would wait for the garbage collector).
            self.runs = self.front = None
            self._pass_on(1)
            return
        front = self.front = runs[at]
        if self.ready_size >= FLUSH_BYTES:
            self._pass_on(0)
        held = self.held
        if held and front.conn in held:
            # The run awaited now is behind replies we stopped reading: read on.
            conn = front.conn
            held.discard(conn)
            session = self.session
            if conn in session.waiting_upstreams and not session.write_paused:
                session.waiting_upstreams.discard(conn)
                conn.resume_for(session)

    def _pass_on(self, done: int) -> None:
        ready = self.ready
        if not ready and not done:
            return
        self.ready = []
        self.ready_size = 0
        self.session.deliver(self, ready[0] if len(ready) == 1 else b"".join(ready), done)

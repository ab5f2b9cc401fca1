"""A client session's connection state, in three small dimensions, and every transition allowed.

Theory of operation (h11's `_state.py` is the model): the state is three values, each changed
only by `ConnState.to(event)`, which looks the event up in that dimension's table and raises
`StateError` for a transition the table does not list. A session never sets them by hand, so
this file is the whole story of what a client's connection can be:

* **lane**: where the client's ordinary commands go.
  `SHARED`: the backend's shared connections (the client has no connection state upstream).
  `LEASED`: a connection of the client's own, lent from the backend's warm spares for work that
  must not hold a shared connection (blocking commands, scripts, WAIT, a transaction) and given
  back once it has answered everything and holds no state. `PINNED`: a connection of the
  client's own for good, because the client set state that lives on it (CLIENT SETNAME, AUTH,
  SELECT inside a lease...). `STREAMING`: pinned, and replies are no longer paired with requests
  (pub/sub, MONITOR, CLIENT REPLY OFF, SYNC, the Lua debugger). A stream ends when nothing more
  can arrive unasked (no subscription left, or RESET: `streamend.py`): `unstream` pairs its
  replies again on the same connection; `drop` gives the connection up, where the backend keeps
  no connection of the client's own for good (a cluster's).
* **txn**: the transaction on the client's own connection. `NONE`, `WATCHING` (keys watched,
  no MULTI yet), `QUEUEING` (MULTI open), `DOOMED` (MULTI open and a queued command was refused:
  EXEC aborts, as Redis does after a command it refused to queue).
* **life**: `OPEN` (requests are read and dispatched), `WAITING` (dispatch is suspended at one
  request until something it needs has happened: the client's replies in flight before a switch
  of connection, a password check), `CLOSING` (no more requests: the replies owed are written,
  then the connection closes), `CLOSED`.
"""

from __future__ import annotations

from .. import compiled

HELD = -1  # what a handler returns when dispatch waits (`Session.wait`), instead of an index
REPLIES, PASSWORD, STREAM_END = "replies", "password", "stream end"  # what a waiting session waits for
WINDOW = "window"  # a waiting session's unread replies are over its window (Session._budget)


class StateError(RuntimeError):
    """A transition the tables do not allow: a bug in the session, never a client's doing."""


class State(str):
    """A state's name; states are compared by identity (`lane is SHARED`)."""

    __slots__ = ()


SHARED, LEASED, PINNED, STREAMING = State("shared"), State("leased"), State("pinned"), State("streaming")
NONE, WATCHING, QUEUEING, DOOMED = State("none"), State("watching"), State("queueing"), State("doomed")
OPEN, WAITING, CLOSING, CLOSED = State("open"), State("waiting"), State("closing"), State("closed")

LANES = {
    SHARED: {"lease": LEASED, "pin": PINNED, "stream": STREAMING},
    LEASED: {"release": SHARED, "pin": PINNED, "stream": STREAMING},
    PINNED: {"stream": STREAMING},
    STREAMING: {"unstream": PINNED, "drop": SHARED},
}

# "end" is EXEC, DISCARD or RESET; "refuse" a command Redis (or the policy) would not queue.
TRANSACTIONS = {
    NONE: {"watch": WATCHING, "multi": QUEUEING, "unwatch": NONE, "end": NONE},
    WATCHING: {"watch": WATCHING, "multi": QUEUEING, "unwatch": NONE, "end": NONE},
    QUEUEING: {"refuse": DOOMED, "end": NONE},
    DOOMED: {"refuse": DOOMED, "end": NONE},
}

LIVES = {
    OPEN: {"wait": WAITING, "close": CLOSING, "lost": CLOSED},
    WAITING: {"resume": OPEN, "close": CLOSING, "lost": CLOSED},
    CLOSING: {"close": CLOSING, "lost": CLOSED},
    CLOSED: {"close": CLOSED, "lost": CLOSED},
}

DIMENSIONS = {"lane": LANES, "txn": TRANSACTIONS, "life": LIVES}
EVENTS = {event: dimension for dimension, table in DIMENSIONS.items()
          for transitions in table.values() for event in transitions}


class ConnState:
    """The three values; `to(event)` is the only way to change one."""

    __slots__ = compiled.declared_fields(__file__, "ConnState")

    def __init__(self):
        self.lane = SHARED
        self.txn = NONE
        self.life = OPEN

    def to(self, event: str) -> State:
        dimension = EVENTS[event]
        current = getattr(self, dimension)
        new = DIMENSIONS[dimension][current].get(event)
        if new is None:
            raise StateError(f"no '{event}' from {dimension} {current}")
        setattr(self, dimension, new)
        return new

    def can(self, event: str) -> bool:
        dimension = EVENTS[event]
        return event in DIMENSIONS[dimension][getattr(self, dimension)]

    @property
    def own(self) -> bool:
        """The client's commands go to a connection of its own."""
        return self.lane is not SHARED

    @property
    def in_transaction(self) -> bool:
        return self.txn is QUEUEING or self.txn is DOOMED

    def __repr__(self) -> str:
        return f"<ConnState lane={self.lane} txn={self.txn} life={self.life}>"

"""When a client's pub/sub stream ends: the client has unsubscribed from everything.

A subscription makes a stream of the client's own connection (replies no longer paired with
requests). A client often uses the connection for ordinary commands afterwards: Jedis hands a
connection back to its pool once `subscribe` returns, and the next borrower runs HSET on it. Left
a stream, that connection would stay tied to its one master in front of a cluster (-MOVED for
the keys of the others), and refuse every write the policy completes with a command of its own
(T1's EXPIRE). So the proxy watches the last (P)UNSUBSCRIBE of such a stream between two
barriers (`StreamOrder.watched`), the client's next commands waiting, and reads the number of
subscriptions left from its confirmations, which the server writes in every (P)UNSUBSCRIBE
reply. At zero the connection is back in Redis's ordinary context and nothing more arrives
unasked: its replies are paired again (`Backend.stream_ended`).

Only a stream of subscriptions and nothing else ends (`Session.stream_ends`): it started with
(P)SUBSCRIBE or (P)UNSUBSCRIBE, outside a transaction, with replies on, and every command after
it was one of those or one that holds no connection state (`stream_neutral`: what may go on a
shared connection). Shard channels (SSUBSCRIBE) are counted apart by the server, so they keep
the stream; so do MONITOR, CLIENT REPLY, CLIENT TRACKING, MULTI, WATCH, SELECT and the like.

A lone (P)UNSUBSCRIBE from a RESP2 client that is not streaming changes nothing and has exactly
one reply (one per channel named, or one for none; an error is one too): it goes as any command.
So does CLIENT REPLY ON from a client that never turned its replies off (`goes_alone`). In RESP3
its reply is a push, which a connection's replies are not counted by: it starts a stream, whose
first command is watched as any (P)UNSUBSCRIBE there (`start`).
"""

from __future__ import annotations

import hiredis

from .behaviour import LEASE, PASS
from .states import NONE, SUBSCRIPTIONS
from .streamorder import StreamOrder

__all__ = ["lone_unsubscribe", "subscriptions_left", "stream_neutral", "SubscriptionWatch",
           "ends_with_subscriptions", "goes_alone", "start", "on_stream"]

SUBSCRIBING = frozenset((b"subscribe", b"psubscribe"))  # (names in lower case, as compared)
UNSUBSCRIBING = frozenset((b"unsubscribe", b"punsubscribe"))
CONFIRMATIONS = SUBSCRIBING | UNSUBSCRIBING  # the first element of the server's confirmations


def lone_unsubscribe(args) -> bool:
    """(P)UNSUBSCRIBE naming one channel or none: one reply whatever the server answers."""
    return len(args) <= 2 and args[0].lower() in UNSUBSCRIBING


def subscriptions_left(shown: bytes) -> int | None:
    """The count of channels and patterns the last confirmation in `shown` gives (RESP2 arrays
    or RESP3 pushes, messages among them), or None when there is none."""
    reader = hiredis.Reader()
    reader.feed(shown)
    left = None
    try:
        while (value := reader.gets()) is not False:
            # (isinstance: a RESP3 push is hiredis's subclass of list)
            if (isinstance(value, list) and len(value) == 3 and type(value[0]) is bytes
                    and value[0].lower() in CONFIRMATIONS and type(value[2]) is int):
                left = value[2]
    except hiredis.ProtocolError:
        return None  # not RESP as the server writes it: nothing is known
    return left


def stream_neutral(actions: dict) -> frozenset:
    """The names (lower-case bytes) that keep a stream of subscriptions able to end: what the
    backend would send on a shared connection (`actions`: a backend column's name -> action)."""
    return frozenset(name.encode() for name, action in actions.items()
                     if (action == PASS or action == LEASE) and name != "select") | SUBSCRIBING | UNSUBSCRIBING


class SubscriptionWatch:
    """The watcher of a (P)UNSUBSCRIBE on a stream (`StreamOrder.watched`): ends the stream when
    no subscription is left, then lets the client's next command go."""

    __slots__ = ("session",)

    def __init__(self, session):
        self.session = session

    def observe(self, shown: bytes) -> None:
        session = self.session
        if subscriptions_left(shown) == 0 and session.stream_ends:
            stream = session.stream
            if (stream is not None and stream.receiver is session and len(session.queue) == 1
                    and session.queue[0] is stream and not stream.conn.closed):
                session.end_stream()
        session.loop.call_soon(session._resume)  # (as after replies: not from inside the read)


def ends_with_subscriptions(session, args) -> bool:
    """Does the stream `args` starts now end with its subscriptions (`Session.stream_ends`)?"""
    own = session.own
    return (args[0].lower() in CONFIRMATIONS and not session.replies_unsure and session.state.txn is NONE
            and own is not None and own.pushes_to is None)


def goes_alone(session, args) -> bool:
    """A command of the stream family that makes no stream, from a client that is not streaming:
    one reply, on any route. A lone (P)UNSUBSCRIBE in RESP2 (in RESP3 its reply is a push, which
    a connection's replies are not counted by); CLIENT REPLY ON while replies were never turned
    off (+OK, nothing changes)."""
    if len(args) == 3 and args[0].lower() == b"client":
        return args[1].lower() == b"reply" and args[2].lower() == b"on" and not session.replies_unsure
    own = session.own
    return lone_unsubscribe(args) and session.protocol == 2 and (own is None or own.protocol == 2)


def start(session, batch, index: int) -> int:
    """A stream starts on the client's own connection with commands[index]. One that starts
    with a (P)UNSUBSCRIBE may be over at once (nothing was subscribed): its count is watched."""
    args = batch.commands[index]
    ends = ends_with_subscriptions(session, args)
    if ends and args[0].lower() in UNSUBSCRIBING:
        return session.stream_on_own(batch, index, True, SubscriptionWatch(session))
    return session.stream_on_own(batch, index, ends)


def on_stream(session, batch, index: int) -> int:
    """A command of the stream family from a client that streams already: a (P)UNSUBSCRIBE that
    may end its stream is watched, the client's next commands waiting for the count it leaves;
    anything else goes on the stream (`StreamRoute`, where one that is not neutral keeps it)."""
    if session.stream_ends and not session.replies_unsure and batch.commands[index][0].lower() in UNSUBSCRIBING:
        StreamOrder.of(session, session.stream).watched(batch.span(index, index + 1), SubscriptionWatch(session))
        return session.wait(batch, index + 1, SUBSCRIPTIONS)
    session.route.forward(session, batch, index, index + 1)
    return index + 1

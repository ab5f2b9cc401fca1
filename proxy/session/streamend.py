"""When a client's stream ends: it has unsubscribed from everything, or sent RESET.

A subscription (or MONITOR, CLIENT REPLY...) makes a stream of the client's own connection:
replies no longer paired with requests. A client often uses the connection for ordinary commands
afterwards: Jedis hands a connection back to its pool once `subscribe` returns, and the next
borrower runs HSET on it; a pool may clean a connection with RESET, what Redis added it for.
Left a stream, that connection would stay tied to its one master in front of a cluster (-MOVED
for the keys of the others), and refuse every write the policy completes with a command of its
own (T1's EXPIRE). So the proxy watches what may end the stream between two barriers
(`StreamOrder.watched`), the client's next commands waiting, and pairs the connection's replies
again when nothing more can arrive unasked (`Session.end_stream`, `Backend.stream_ended`):

* the last (P)UNSUBSCRIBE of a stream of subscriptions alone, whose confirmations give the
  number of channels and patterns left: at zero the connection is back in Redis's ordinary
  context. Only a stream that started with (P)SUBSCRIBE or (P)UNSUBSCRIBE, outside a
  transaction, with replies on, where every command since was one of those or one that holds no
  connection state (`stream_neutral`: what may go on a shared connection), ends this way. Shard
  channels (SSUBSCRIBE) are counted apart by the server, so they keep the stream; so do MONITOR,
  CLIENT REPLY, CLIENT TRACKING, MULTI, WATCH, SELECT and the like;
* RESET, once the server has answered +RESET and the proxy's login after it: nothing subscribed,
  monitored or tracked is left. Not on a replica link's stream (SYNC, PSYNC, REPLCONF: the server
  refuses RESET there) nor the debugger's (SCRIPT DEBUG: its session reads commands of its own).

`Session.stream_ends` says which applies: `NEVER`, `AT_RESET` or `UNSUBSCRIBED` (both). Neither
is watched after CLIENT REPLY OFF or SKIP, where the server may leave barriers unanswered.

A lone (P|S)UNSUBSCRIBE from a RESP2 client that is not streaming changes nothing and has exactly
one reply (one per channel named, or one for none; an error is one too): it goes as any command.
So does CLIENT REPLY ON from a client that never turned its replies off (`goes_alone`). A RESP3
client's subscriptions make no stream at all (paired_subscriptions.py) but where they are
streams as in RESP2: in a transaction, after CLIENT REPLY OFF or SKIP, shard channels in front of
a cluster. There a lone (P)UNSUBSCRIBE, whose reply is a push, starts a stream whose first command
is watched as any (P)UNSUBSCRIBE there (`start`).
"""

from __future__ import annotations

import hiredis

from .behaviour import LEASE, PASS
from .states import NONE, STREAM_END, STREAMING
from .streamorder import StreamOrder, turns_replies_off

__all__ = ["NEVER", "AT_RESET", "UNSUBSCRIBED", "lone_unsubscribe", "subscriptions_left", "last_value",
           "stream_neutral", "passes", "goes_alone", "no_new_stream", "start", "on_stream", "reset_on_stream"]

NEVER, AT_RESET, UNSUBSCRIBED = 0, 1, 2  # how a stream may end (`Session.stream_ends`)
SUBSCRIBING = frozenset((b"subscribe", b"psubscribe"))  # (names in lower case, as compared)
UNSUBSCRIBING = frozenset((b"unsubscribe", b"punsubscribe"))
CONFIRMATIONS = SUBSCRIBING | UNSUBSCRIBING  # the first element of the server's confirmations
LONE = UNSUBSCRIBING | {b"sunsubscribe"}  # (a shard channel's count is of shard channels only)
REPLICA_LINK = frozenset((b"sync", b"psync", b"replconf"))


def lone_unsubscribe(args) -> bool:
    """(P|S)UNSUBSCRIBE naming one channel or none: one reply whatever the server answers."""
    return len(args) <= 2 and args[0].lower() in LONE


def subscriptions_left(shown: bytes) -> int | None:
    """The count of channels and patterns the last confirmation in `shown` gives (RESP2 arrays
    or RESP3 pushes, messages among them), or None when there is none."""
    left = None
    for value in _values(shown):
        # (isinstance: a RESP3 push is hiredis's subclass of list)
        if (isinstance(value, list) and len(value) == 3 and type(value[0]) is bytes
                and value[0].lower() in CONFIRMATIONS and type(value[2]) is int):
            left = value[2]
    return left


def last_value(shown: bytes):
    """The last whole reply or push in `shown` as hiredis reads it (None: there is none)."""
    values = _values(shown)
    return values[-1] if values else None


def _values(shown: bytes) -> list:
    reader = hiredis.Reader()
    reader.feed(shown)
    values = []
    try:
        while (value := reader.gets()) is not False:
            values.append(value)
    except hiredis.ProtocolError:
        return []  # not RESP as the server writes it: nothing is known
    return values


def stream_neutral(actions: dict) -> frozenset:
    """The names (lower-case bytes) that keep a stream of subscriptions able to end: what the
    backend would send on a shared connection (`actions`: a backend column's name -> action)."""
    return frozenset(name.encode() for name, action in actions.items()
                     if action in (PASS, LEASE) and name != "select") | SUBSCRIBING | UNSUBSCRIBING


def _ends_for_good(args) -> bool:
    """A replica link's or the debugger's: RESET does not end such a stream."""
    name = args[0].lower()
    return name in REPLICA_LINK or (name == b"script" and len(args) > 1 and args[1].lower() == b"debug")


def passes(session, args, neutral) -> None:
    """A command goes on the stream as it is: what it leaves of `Session.stream_ends`."""
    if session.stream_ends:
        if _ends_for_good(args):
            session.stream_ends = NEVER
        elif args[0].lower() not in neutral:
            session.stream_ends = AT_RESET


def _end(session) -> None:
    """The stream ends if everything on it has been answered and passed on."""
    stream = session.stream
    if (stream is not None and stream.receiver is session and len(session.queue) == 1
            and session.queue[0] is stream and not stream.conn.closed):
        session.end_stream()


class SubscriptionWatch:
    """The watcher of a (P)UNSUBSCRIBE on a stream (`StreamOrder.watched`): ends the stream when
    no subscription is left, then lets the client's next command go."""

    __slots__ = ("session",)

    def __init__(self, session):
        self.session = session

    def observe(self, shown: bytes) -> None:
        session = self.session
        if subscriptions_left(shown) == 0 and session.stream_ends == UNSUBSCRIBED:
            _end(session)
        session.loop.call_soon(session.resume_dispatch)  # (as after replies: not from inside the read)


class ResetWatch:
    """The watcher of RESET on a stream: did the server answer +RESET (not an error)?"""

    __slots__ = ("session", "reset")

    def __init__(self, session):
        self.session = session
        self.reset = False

    def observe(self, shown: bytes) -> None:
        self.reset = last_value(shown) == b"RESET"  # (a simple string: bytes, an error is not)


class AfterReset:
    """The watcher of nothing after the proxy's login that follows RESET: everything before has
    been answered; the stream ends if RESET was. Then the client's next command goes."""

    __slots__ = ("watch",)

    def __init__(self, watch: ResetWatch):
        self.watch = watch

    def observe(self, shown: bytes) -> None:
        session = self.watch.session
        if self.watch.reset and session.stream_ends != NEVER:
            _end(session)
        session.loop.call_soon(session.resume_dispatch)


def ends_with_subscriptions(session, args) -> bool:
    """Does the stream `args` starts now end with its subscriptions?"""
    own = session.own
    return (args[0].lower() in CONFIRMATIONS and not session.replies_unsure and session.state.txn is NONE
            and own is not None and own.pushes_to is None)


def goes_alone(session, args) -> bool:
    """A command of the stream family that makes no stream, from a client that is not streaming:
    one reply, on any route. A lone (P|S)UNSUBSCRIBE in RESP2 (in RESP3 its reply is a push, which
    a connection's replies are not counted by); CLIENT REPLY ON while replies were never turned
    off (+OK, nothing changes)."""
    if len(args) == 3 and args[0].lower() == b"client":
        return args[1].lower() == b"reply" and args[2].lower() == b"on" and not session.replies_unsure
    own = session.own
    return lone_unsubscribe(args) and session.protocol == 2 and (own is None or own.protocol == 2)


def no_new_stream(session, batch, index: int):
    """What every backend's handler does first with a command of the stream family: notes one
    that may turn replies off, and passes on one that starts no stream (queued in a transaction,
    whose replies come with EXEC's; on a stream already, `on_stream`; one that makes none,
    `goes_alone`). Its next index, or None: the command starts a stream (`start`)."""
    args = batch.commands[index]
    if turns_replies_off(args):
        session.replies_unsure = True
    if session.state.in_transaction:
        session.unpaired = True
    elif session.state.lane is STREAMING:
        return on_stream(session, batch, index)
    elif not goes_alone(session, args):
        return None
    session.route.forward(session, batch, index, index + 1)
    return index + 1


def start(session, batch, index: int) -> int:
    """A stream starts on the client's own connection with commands[index]. One that starts
    with a (P)UNSUBSCRIBE may be over at once (nothing was subscribed): its count is watched."""
    args = batch.commands[index]
    if ends_with_subscriptions(session, args):
        if args[0].lower() in UNSUBSCRIBING:
            return session.stream_on_own(batch, index, UNSUBSCRIBED, SubscriptionWatch(session))
        return session.stream_on_own(batch, index, UNSUBSCRIBED)
    return session.stream_on_own(batch, index, NEVER if _ends_for_good(args) else AT_RESET)


def on_stream(session, batch, index: int) -> int:
    """A command of the stream family from a client that streams already: a (P)UNSUBSCRIBE that
    may end its stream is watched, the client's next commands waiting for the count it leaves;
    anything else goes on the stream (`StreamRoute`, `passes`)."""
    if (session.stream_ends == UNSUBSCRIBED and not session.replies_unsure
            and batch.commands[index][0].lower() in UNSUBSCRIBING):
        StreamOrder.of(session, session.stream).watched(batch.span(index, index + 1), SubscriptionWatch(session))
        return session.wait(batch, index + 1, STREAM_END)
    session.route.forward(session, batch, index, index + 1)
    return index + 1


def reset_on_stream(session, batch, index: int) -> int:
    """The client's RESET on its stream: Redis resets the connection, and the proxy logs it in
    again unseen (`restore_after_reset`). Where RESET leaves nothing streaming, it is watched,
    and the stream ends once the login is answered too; the client's next commands wait."""
    if session.stream_ends == NEVER or session.replies_unsure:
        session.route.forward(session, batch, index, index + 1)
        session.backend.restore_after_reset(session, session.own)
        return index + 1
    order = StreamOrder.of(session, session.stream)
    watch = ResetWatch(session)
    order.watched(batch.span(index, index + 1), watch)
    session.backend.restore_after_reset(session, session.own)
    order.watched(b"", AfterReset(watch))
    return session.wait(batch, index + 1, STREAM_END)

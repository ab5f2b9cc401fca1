"""A RESP3 client's subscriptions, with its replies still paired.

In RESP3 a subscribed connection stays in Redis's ordinary context: the confirmations of
(P|S)SUBSCRIBE and (P|S)UNSUBSCRIBE and every message are pushes, and any other command has its
reply as usual. Lettuce, node-redis and redis-py (protocol 3) use one connection for both. So a
RESP3 client's subscription makes no stream: its pushes are cut out wherever a reply could start
and go to the client apart (`UpstreamConnection.take_pushes`, as CLIENT TRACKING's), its
replies stay paired, and the policy's own commands (T1's EXPIRE) and checks still apply.

* In front of one server the subscriptions live on the client's own connection, pinned; its
  pushes go where the server wrote them (`Session.pushed`).
* In front of a cluster, channels and patterns live on a connection of their own on any master
  (the cluster bus carries PUBLISH), lent for the session, and the client's other commands are
  routed by slot as before. A confirmation there goes with its subscription command, which is
  ordered with the client's other commands (cluster/handlers.py `subscribe_aside`); a message
  after the replies the client awaits when it comes (a PUBLISH is not ordered with them, and
  the client's own reaches the connection by the cluster bus, after its reply). Shard channels
  live on a connection of their own on each channel's master (`ShardAside`, `shard_aside`):
  a master counts only its own in its confirmations, so the client is shown its count over
  every master, as one node would show it.

A subscription command's confirmations are pushes, one per channel or pattern it names (one per
subscription of its kind, or one, when it names none), unless it fails: then it has one error
reply and no push. So its entry ends at its last confirmation (`Subscriptions.saw_own`) or at
that error; the counts of each kind come from the confirmations too.

HELLO 2 while anything is subscribed makes, in front of one server, a RESP2 subscriber's stream
of the connection (the server sends RESP2's arrays from then on: `streams_from_hello`); in front
of a cluster it is refused, and so is a command that would start a stream elsewhere, whose
replies could not be ordered with the pushes. Inside a transaction (EXEC's reply holds the
pushes) and after CLIENT REPLY OFF or SKIP, a subscription is a stream as in RESP2
(streamend.py).
"""

from __future__ import annotations

from .. import errors
from ..pending import Receiver
from . import streamend
from .behaviour import strict_int
from .states import CLOSED, OPEN, WAITING

__all__ = ["Subscriptions", "ShardAside", "SubscriptionReplies", "pairs", "send", "send_shard", "check_hello",
           "while_subscribed", "refused_while_subscribed", "refuse", "CLASSIC", "SHARD"]

CLASSIC = frozenset((b"subscribe", b"psubscribe", b"unsubscribe", b"punsubscribe"))
SHARD = frozenset((b"ssubscribe", b"sunsubscribe"))
CHANNELS, PATTERNS = frozenset((b"subscribe", b"unsubscribe")), frozenset((b"psubscribe", b"punsubscribe"))
RESET = b"*1\r\n$5\r\nRESET\r\n"


class Subscriptions:
    """What a RESP3 client has subscribed, from the server's confirmations: `channels`, `patterns`
    (each confirmation gives their sum after it: the difference is its kind's) and shard channels
    (`shard`, counted apart). The connection its pushes come from takes it as their receiver; in
    front of a cluster (`aside`) it is the connection they live on. Counted from the first
    subscription of a connection where none was (a subscribed connection is a stream in RESP2)."""

    __slots__ = ("session", "aside", "channels", "patterns", "shard", "detached", "cluster", "shards")

    def __init__(self, session, aside=None, cluster: bool = False):
        self.session = session
        self.aside = aside
        self.channels = 0
        self.patterns = 0
        self.shard = 0
        self.detached = False  # (a cluster client's RESET: what the connections aside push is dropped)
        self.cluster = cluster or aside is not None  # (in front of a cluster: they live on connections aside)
        self.shards = {}  # in front of a cluster, by master: its connection aside for shard channels (ShardAside)

    @property
    def active(self) -> bool:
        return bool(self.channels or self.patterns or self.shard)

    @property
    def may_be_active(self) -> bool:
        """Active, or a subscription command aside is still to be answered."""
        return self.active or any(conn.pending for conn in self.asides())

    def asides(self) -> list:
        """The connections aside (in front of a cluster): the channels' and patterns', then each
        master's for shard channels."""
        conns = [shard.conn for shard in self.shards.values()]
        return conns if self.aside is None else [self.aside, *conns]

    def shard_count(self, but=None) -> int:
        """The shard channels over every master, but `but`'s (a ShardAside)."""
        return sum(shard.count for shard in self.shards.values() if shard is not but)

    def count(self, kind: bytes) -> int:
        return self.channels if kind in CHANNELS else self.patterns if kind in PATTERNS else self.shard

    def saw(self, push: bytes) -> bytes | None:
        """A confirmation (`>3`, the kind, the channel, the count after it) sets its kind's
        count: its kind, or None for any other push (a message, an invalidation)."""
        kind, left = confirmation(push)
        if kind is None:
            return None
        if kind in SHARD:  # (in front of a cluster, their masters' counts: the one shown may be ahead)
            self.shard = self.shard_count() if self.shards else left
        elif kind in CHANNELS:
            self.channels = left - self.patterns
        else:
            self.patterns = left - self.channels
        return kind

    def saw_own(self, conn, push: bytes) -> bool:
        """Counts `push`; is it a confirmation of the subscription command that heads `conn`'s
        entries? Its entry ends at its last one."""
        pending = conn.pending if conn is not None else None
        head = pending[0] if pending else None
        replies = head.receiver if head is not None else None
        if type(replies) is not SubscriptionReplies:
            self.saw(push)
            return False
        if replies.left < 0:  # (one that names none: as many as there are of its kind, or one)
            before = self.count(replies.kind)
            if self.saw(push) != replies.kind:
                return False
            replies.left = max(before, 1)
        elif self.saw(push) != replies.kind:
            return False
        replies.left -= 1
        return True

    def pushed(self, push: bytes) -> None:
        session = self.session
        conn = self.aside
        if conn is None:  # the client's own connection (the one pushing): where the server wrote it
            own = session.own
            mine = self.saw_own(own, push)
            session.pushed(push)
            if mine:
                _confirmed(session, own)
        else:
            self.pushed_aside(conn, push)

    def pushed_aside(self, conn, push: bytes) -> None:
        """A push from a connection aside: a confirmation with its subscription command's entry,
        anything else after the replies the client awaits."""
        session = self.session
        if not self.detached and (session.state.life is OPEN or session.state.life is WAITING):
            # (none after QUIT's +OK, nor after RESET's: published too late)
            if self.saw_own(conn, push):
                session.deliver(conn.pending[0], push, 0)
                _confirmed(session, conn)
            else:
                session.answer_locally(push)
            session.pushing_behind(conn)
        else:
            self.saw(push)

    def own_closed(self, conn) -> None:
        """A connection the subscriptions live on is gone (a cluster's): so are they."""
        session = self.session
        if conn in self.asides() and session.state.life is not CLOSED:
            session.input_ended = True
            session.close_after_replies()

    def close(self) -> None:
        conns = self.asides()
        self.aside = None
        self.shards = {}
        for conn in conns:
            conn.owner = None
            conn.close()

    def reset(self, session) -> bool:
        """The client's RESET in front of a cluster: each connection aside unsubscribes from
        everything before the client is shown +RESET (True: their replies are awaited first, so
        that no PUBLISH after RESET finds the client subscribed), then closes."""
        self.detached = True
        conns = [conn for conn in self.asides() if not conn.closed]
        if not conns or not self.may_be_active:
            self.close()
            return False
        for conn in conns:
            session.send(conn, RESET, 1, ClosedAfterReset(session, self))
        return True


class ShardAside:
    """In front of a cluster, the pushes of a RESP3 client's connection aside for the shard
    channels of one master. That master counts only its own (`count`), so a confirmation is
    shown with the client's count over every master, as one node would show it: the others'
    now, or for one SUNSUBSCRIBE sent to several masters, those it reaches after this one
    (`SubscriptionReplies.base`: they are shown in that order)."""

    __slots__ = ("subscriptions", "conn", "count")

    def __init__(self, subscriptions, conn):
        self.subscriptions = subscriptions
        self.conn = conn
        self.count = 0

    def pushed(self, push: bytes) -> None:
        kind, count = confirmation(push)
        if kind in SHARD:
            self.count = count
            pending = self.conn.pending
            replies = pending[0].receiver if pending else None
            if type(replies) is SubscriptionReplies and replies.kind == kind and replies.base >= 0:
                count += replies.base
            else:
                count += self.subscriptions.shard_count(self)
            push = recount(push, count)
        self.subscriptions.pushed_aside(self.conn, push)


def confirmation(push: bytes) -> tuple:
    """A subscription command's confirmation (`>3`, the kind, the channel, the count after it):
    its kind and count; (None, 0) for any other push (a message, an invalidation)."""
    if not push.startswith(b">3\r\n$"):
        return None, 0
    at = push.find(b"\r\n", 5)
    kind = push[at + 2:at + 2 + int(push[5:at])]
    if kind not in CLASSIC and kind not in SHARD:
        return None, 0
    count = push.rfind(b"\r\n:", 0, len(push) - 2)
    if count < 0:
        return None, 0
    return kind, int(push[count + 3:-2])


def recount(push: bytes, count: int) -> bytes:
    """A confirmation with `count` for the count after it."""
    return b"%s\r\n:%d\r\n" % (push[:push.rfind(b"\r\n:", 0, len(push) - 2)], count)


def _confirmed(session, conn) -> None:
    """The head entry's confirmation was passed on: the entry ends with its last one."""
    head = conn.pending[0]
    if head.receiver.left == 0:
        session.deliver(head, b"", 1)


class SubscriptionReplies(Receiver):
    """A subscription command's entry: it ends with its last confirmation (a push, `left` more
    to come; -1: not known before the first, for one that names nothing) or its error reply."""

    __slots__ = ("session", "kind", "left", "base", "redirect", "held")

    def __init__(self, session, args):
        self.session = session
        self.kind = args[0].lower()
        self.left = len(args) - 1 if len(args) > 1 else -1
        self.base = -1  # (ShardAside: the other masters' shard channels when shown, -1: as they are then)
        self.redirect = None  # (in front of a cluster: what a shard channel's -MOVED does, True if it took it)
        self.held = b""  # (an error reply cut across reads, until it is whole)

    def deliver(self, pending, data: bytes, done: int) -> None:
        """Its error reply (confirmations are pushes, passed on as they come); in front of a
        cluster, a -MOVED for a shard channel goes to `redirect` once whole."""
        redirect = self.redirect
        if redirect is not None and (self.held or data[:1] == b"-"):
            data = self.held = self.held + data
            if not done:
                return
            self.held = b""
            if data.startswith(b"-MOVED ") and redirect(pending, data):
                return
        self.session.deliver(pending, data, done)

    def pending_failed(self, pending, error: bytes, partial: bool) -> None:
        self.session.pending_failed(pending, error, partial)


class ClosedAfterReset(Receiver):
    """The reply to RESET on a connection aside: not shown (the client's +RESET is the
    proxy's); the connection closes once it has come."""

    __slots__ = ("session", "subscriptions")

    def __init__(self, session, subscriptions):
        self.session = session
        self.subscriptions = subscriptions

    def deliver(self, pending, data: bytes, done: int) -> None:
        self.session.deliver(pending, b"", done)
        if pending.remaining == 0 and pending.conn is not None:
            pending.conn.owner = None
            pending.conn.close()

    def pending_failed(self, pending, error: bytes, partial: bool) -> None:
        self.session.pending_failed(pending, error, partial)


def pairs(session, args, names=CLASSIC | SHARD) -> bool:
    """Does this subscription command keep the client's replies paired? A RESP3 client's, with
    its replies on (CLIENT REPLY ON), outside a transaction."""
    return (session.protocol == 3 and args[0].lower() in names and not session.replies_unsure
            and not session.state.in_transaction)


def send(session, conn, subscriptions, batch, index: int) -> int:
    """commands[index] on `conn`, whose pushes `subscriptions` takes."""
    session.pubsub = subscriptions
    if conn.pushes_to is not subscriptions:
        conn.take_pushes(subscriptions)
    session.send(conn, batch.span(index, index + 1), 1, SubscriptionReplies(session, batch.commands[index]))
    return index + 1


def send_shard(session, shard: ShardAside, data: bytes, args, base: int = -1, redirect=None) -> None:
    """A shard channels' subscription command on `shard`'s connection (in front of a cluster).
    One that names none has a confirmation per shard channel of that master, or one."""
    replies = SubscriptionReplies(session, args)
    if replies.left < 0:
        replies.left = max(shard.count, 1)
    replies.base = base
    replies.redirect = redirect
    session.send(shard.conn, data, 1, replies)


def while_subscribed(session, batch, index: int, act):
    """`act(subscriptions)` handles commands[index] if the client has subscriptions, once the
    confirmations of those in flight are in (it waits for its replies); None: it goes on."""
    subscriptions = session.pubsub
    if subscriptions is None:
        return None
    if session.inflight:
        return session.wait(batch, index)
    if not subscriptions.active:
        return None
    return act(subscriptions)


def refused_while_subscribed(session, batch, index: int, reply: bytes):
    """commands[index] is refused with `reply` if the client has subscriptions (`while_subscribed`)."""
    return while_subscribed(session, batch, index, lambda _subscriptions: refuse(session, reply, index))


def refuse(session, reply: bytes, index: int) -> int:
    session.answer_locally(reply)
    session.refused_in_transaction()
    return index + 1


def check_hello(session, batch, index: int):
    """HELLO 2 while subscribed in RESP3 (None: it goes on). In front of one server, a plain
    HELLO 2 makes a subscriber's stream of the client's own connection, as a RESP2 SUBSCRIBE
    does: once the replies in flight are in, the stream starts with it (`streams_from_hello`).
    Refused with options (a refused SETNAME leaves the protocol as it was, and the proxy would
    not know which) and in front of a cluster, whose subscriptions live on connections aside."""
    args = batch.commands[index]
    subscriptions = session.pubsub
    if subscriptions is None or len(args) < 2 or strict_int(args[1]) != 2:
        return None
    if len(args) > 2 or subscriptions.cluster:
        return refused_while_subscribed(session, batch, index, errors.HELLO2_SUBSCRIBED)
    return while_subscribed(session, batch, index,
                            lambda subscribed: streams_from_hello(session, batch, index, subscribed))


def streams_from_hello(session, batch, index: int, subscriptions) -> int:
    """HELLO 2 on the subscribed connection: Redis answers in RESP2 and sends the messages as
    RESP2 replies from then on (its subscribed context allows only the subscription commands,
    PING, QUIT and RESET). The stream ends as a RESP2 subscriber's does: with its last channel
    and pattern, or at RESET while a shard channel is left (their count is apart: streamend.py).
    Pushes the server sent before its reply go with the stream's bytes, in their place."""
    session.pubsub = None
    session.protocol = session.policy_state.protocol = 2
    ends = streamend.AT_RESET if subscriptions.shard else streamend.UNSUBSCRIBED
    return session.stream_on_own(batch, index, ends)

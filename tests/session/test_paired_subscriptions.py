"""A RESP3 client's subscriptions with its replies paired (session/paired_subscriptions.py), with
no sockets: the counts read from the server's confirmations, and a connection's replies and
pushes, whole, byte by byte and cut in three, reaching the client in the server's order, each
subscription command's entry ending with its last confirmation or its error."""

import pytest

from proxy.pending import Pending, Receiver
from proxy.session import paired_subscriptions
from proxy.session.paired_subscriptions import SubscriptionReplies, Subscriptions, pairs
from proxy.session.states import ConnState
from proxy.upstream.connection import READY, UpstreamConnection
from tests.upstream.test_pushes import CUTS, feed

ARITY = b"-ERR wrong number of arguments for 'subscribe' command\r\n"
BUSY = b"-BUSY Redis is busy running a script.\r\n"


def push(*items) -> bytes:
    out = b">%d\r\n" % len(items)
    for item in items:
        out += b":%d\r\n" % item if type(item) is int else b"$%d\r\n%s\r\n" % (len(item), item)
    return out


SUB_A, SUB_B = push(b"subscribe", b"a", 1), push(b"subscribe", b"b", 2)
MESSAGE = push(b"message", b"a", b"hi")
ONE, PONG = b"$1\r\nv\r\n", b"+PONG\r\n"


@pytest.mark.parametrize("pushes, counts", [
    ([SUB_A, SUB_B], (2, 0, 0)),
    ([SUB_A, push(b"psubscribe", b"p*", 2), push(b"psubscribe", b"q*", 3)], (1, 2, 0)),
    ([SUB_A, SUB_A.replace(b"$1\r\na", b"$1\r\na")], (1, 0, 0)),  # the same channel twice: one
    ([SUB_A, b">3\r\n$11\r\nunsubscribe\r\n_\r\n:0\r\n"], (0, 0, 0)),  # (none named: a null)
    ([SUB_A, push(b"psubscribe", b"p*", 2), push(b"unsubscribe", b"a", 1)], (0, 1, 0)),
    ([push(b"ssubscribe", b"s", 1), SUB_A], (1, 0, 1)),
    ([push(b"ssubscribe", b"s", 1), push(b"sunsubscribe", b"s", 0)], (0, 0, 0)),
    ([SUB_A, MESSAGE, push(b"pmessage", b"*", b"a", b"x"), push(b"smessage", b"s", b"x")], (1, 0, 0)),
    ([SUB_A, push(b"message", b"subscribe", b"9")], (1, 0, 0)),  # a message on a channel named so
    ([push(b"subscribe", b"a\r\n:5", 1)], (1, 0, 0)),  # a channel name that looks like a count
    ([b">2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\nk\r\n"], (0, 0, 0)),  # CLIENT TRACKING's
])
def test_the_counts_come_from_the_confirmations(pushes, counts):
    subscriptions = Subscriptions(None)
    for one in pushes:
        subscriptions.saw(one)
    assert (subscriptions.channels, subscriptions.patterns, subscriptions.shard) == counts
    assert subscriptions.active is any(counts)


class Client(Receiver):
    """The session: what it is shown, in order; where each part came in."""

    def __init__(self):
        self.state = ConnState()
        self.out = []
        self.how = []
        self.own = None

    def deliver(self, pending, data, done):
        self.out.append(data)
        self.how.append(("deliver", pending))
        pending.remaining -= done

    def pushed(self, data):
        self.out.append(data)
        self.how.append(("pushed", None))

    def answer_locally(self, data):
        self.out.append(data)
        self.how.append(("local", None))

    def pending_failed(self, pending, error, partial):
        raise AssertionError(error)

    def pushing_behind(self, conn):
        pass  # (the limits: tests/integration/test_paired_subscriptions.py)


def connection(client, aside: bool):
    conn = UpstreamConnection(None, ("127.0.0.1", 1), [])
    conn.state = READY
    subscriptions = Subscriptions(client, conn if aside else None)
    conn.take_pushes(subscriptions)
    return conn, subscriptions


def entry(conn, receiver, count=1):
    pending = Pending(receiver, count, conn)
    conn.pending.append(pending)
    return pending


UNSUB_A, UNSUB_B = push(b"unsubscribe", b"a", 1), push(b"unsubscribe", b"b", 0)
UNSUB_NONE = b">3\r\n$11\r\nunsubscribe\r\n_\r\n:0\r\n"
OWN_CASES = {
    # SUBSCRIBE a b, GET, SUBSCRIBE (its arity error), UNSUBSCRIBE (none named: one per channel), PING
    "pipeline": ([[b"SUBSCRIBE", b"a", b"b"], None, [b"SUBSCRIBE"], [b"UNSUBSCRIBE"], None],
                 SUB_A + SUB_B + ONE + MESSAGE + ARITY + UNSUB_A + MESSAGE + UNSUB_B + PONG),
    # UNSUBSCRIBE (two left), UNSUBSCRIBE a (refused: a script runs), PING: the error is the second's
    "busy": ([[b"SUBSCRIBE", b"a", b"b"], [b"UNSUBSCRIBE"], [b"UNSUBSCRIBE", b"a"], None],
             SUB_A + SUB_B + UNSUB_A + UNSUB_B + BUSY + PONG),
    # nothing subscribed: one confirmation, a null for the channel
    "none": ([[b"unsubscribe"], [b"UNSUBSCRIBE"], None], UNSUB_NONE + UNSUB_NONE + ONE),
    # the same channel twice: a confirmation for each
    "twice": ([[b"SUBSCRIBE", b"a", b"a"], None], SUB_A + SUB_A + PONG),
}


@pytest.mark.parametrize("cuts", CUTS, ids=list(CUTS))
@pytest.mark.parametrize("case", OWN_CASES, ids=list(OWN_CASES))
def test_a_pipeline_on_the_clients_own_connection(case, cuts):
    """The pushes where the server wrote them, each subscription command's entry over with its
    last confirmation or its error, the next entries' replies their own."""
    commands, data = OWN_CASES[case]
    client = Client()
    conn, subscriptions = connection(client, aside=False)
    client.own = conn
    entries = [entry(conn, SubscriptionReplies(client, args) if args else client) for args in commands]
    feed(conn, data, CUTS[cuts](len(data)))
    assert b"".join(client.out) == data
    assert [pending.remaining for pending in entries] == [0] * len(entries) and not conn.pending
    if case == "busy":  # (the error reached the entry of the command refused)
        assert b"".join(data for (_, pending), data in zip(client.how, client.out) if pending is entries[2]) == BUSY


@pytest.mark.parametrize("cuts", CUTS, ids=list(CUTS))
def test_pushes_on_a_connection_aside(cuts):
    """In front of a cluster: a confirmation goes with its subscription command; a message
    after the replies the client awaits (its `answer_locally`)."""
    client = Client()
    conn, subscriptions = connection(client, aside=True)
    first = entry(conn, SubscriptionReplies(client, [b"SUBSCRIBE", b"a"]))
    data = MESSAGE + SUB_A + MESSAGE
    feed(conn, data, CUTS[cuts](len(data)))
    assert b"".join(client.out) == data
    assert client.how == [("local", None), ("deliver", first), ("deliver", first), ("local", None)]
    assert first.remaining == 0 and not conn.pending and subscriptions.channels == 1


def test_nothing_after_quit():
    client = Client()
    conn, _ = connection(client, aside=True)
    client.state.to("close")
    conn._deliver_pushes(MESSAGE)
    assert client.out == []


class Session:
    def __init__(self, protocol, replies_unsure=False, txn=False):
        self.protocol = protocol
        self.replies_unsure = replies_unsure
        self.state = ConnState()
        if txn:
            self.state.to("multi")


@pytest.mark.parametrize("session, args, expected", [
    (Session(3), [b"SUBSCRIBE", b"a"], True),
    (Session(3), [b"punsubscribe"], True),
    (Session(3), [b"SSUBSCRIBE", b"s"], True),
    (Session(2), [b"SUBSCRIBE", b"a"], False),  # RESP2: a stream
    (Session(3, replies_unsure=True), [b"SUBSCRIBE", b"a"], False),  # after CLIENT REPLY OFF or SKIP
    (Session(3, txn=True), [b"SUBSCRIBE", b"a"], False),  # EXEC's reply holds the pushes
    (Session(3), [b"MONITOR"], False),
])
def test_which_commands_keep_the_replies_paired(session, args, expected):
    assert pairs(session, args) is expected


def test_shard_channels_can_be_left_out():
    assert not pairs(Session(3), [b"SSUBSCRIBE", b"s"], paired_subscriptions.CLASSIC)


@pytest.mark.parametrize("confirmation, kind, count", [
    (push(b"ssubscribe", b"s", 3), b"ssubscribe", 3),
    (b">3\r\n$12\r\nsunsubscribe\r\n_\r\n:0\r\n", b"sunsubscribe", 0),
    (push(b"subscribe", b"a\r\n:5", 1), b"subscribe", 1),  # a channel name that looks like a count
    (push(b"smessage", b"s", b"x"), None, 0),
    (b">2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\nk\r\n", None, 0),
])
def test_a_confirmations_kind_and_count(confirmation, kind, count):
    assert paired_subscriptions.confirmation(confirmation) == (kind, count)
    if kind is not None:
        assert paired_subscriptions.confirmation(paired_subscriptions.recount(confirmation, 12)) == (kind, 12)
        assert paired_subscriptions.recount(confirmation, count) == confirmation


def shard_connections(client, masters: int):
    """In front of a cluster: a client's connection aside for shard channels on each master."""
    subscriptions = Subscriptions(client, cluster=True)
    shards = []
    for port in range(masters):
        conn = UpstreamConnection(None, ("127.0.0.1", port + 1), [])
        conn.state = READY
        shard = subscriptions.shards[port] = paired_subscriptions.ShardAside(subscriptions, conn)
        conn.take_pushes(shard)
        shards.append(shard)
    return subscriptions, shards


def shown(client, pending) -> list[int]:
    """The counts of the confirmations the client was shown with `pending`."""
    return [paired_subscriptions.confirmation(data)[1] for (_how, to), data in zip(client.how, client.out)
            if to is pending and data]


@pytest.mark.parametrize("cuts", CUTS, ids=list(CUTS))
def test_shard_channels_on_two_masters_are_counted_over_both(cuts):
    """Each master counts its own shard channels: the client is shown its count over both, with
    each subscription command, and after what it awaits for one that came unasked (a slot that
    moved away unsubscribes its channels)."""
    client = Client()
    subscriptions, (first, second) = shard_connections(client, 2)
    one = entry(first.conn, SubscriptionReplies(client, [b"SSUBSCRIBE", b"a"]))
    feed(first.conn, push(b"ssubscribe", b"a", 1), CUTS[cuts](len(push(b"ssubscribe", b"a", 1))))
    two = entry(second.conn, SubscriptionReplies(client, [b"SSUBSCRIBE", b"b", b"c"]))
    data = push(b"ssubscribe", b"b", 1) + push(b"smessage", b"a", b"x") + push(b"ssubscribe", b"c", 2)
    feed(second.conn, data, CUTS[cuts](len(data)))
    assert shown(client, one) == [1] and shown(client, two) == [2, 3]
    assert (first.count, second.count, subscriptions.shard) == (1, 2, 3)
    assert one.remaining == two.remaining == 0 and not first.conn.pending and not second.conn.pending
    moved = push(b"sunsubscribe", b"a", 0)
    feed(first.conn, moved, CUTS[cuts](len(moved)))
    assert client.how[-1] == ("local", None) and paired_subscriptions.confirmation(client.out[-1])[1] == 2
    assert (first.count, subscriptions.shard, subscriptions.active) == (0, 2, True)


def test_one_sunsubscribe_on_two_masters_counts_down_in_the_clients_order():
    """SUNSUBSCRIBE without a channel, sent to both masters: the client is shown the first's
    confirmations, then the second's, so each counts the channels of the masters after it,
    whichever answers first."""
    client = Client()
    subscriptions, (first, second) = shard_connections(client, 2)
    first.count, second.count = 2, 1
    entries = []
    for shard, later in ((first, 1), (second, 0)):  # (as cluster/handlers.py shard_aside sends it)
        replies = SubscriptionReplies(client, [b"SUNSUBSCRIBE"])
        replies.left, replies.base = shard.count, later
        entries.append(entry(shard.conn, replies))
    second.conn._deliver_pushes(push(b"sunsubscribe", b"z", 0))
    first.conn._deliver_pushes(push(b"sunsubscribe", b"x", 1) + push(b"sunsubscribe", b"y", 0))
    assert shown(client, entries[0]) + shown(client, entries[1]) == [2, 1, 0]
    assert [pending.remaining for pending in entries] == [0, 0] and not subscriptions.active


MOVED = b"-MOVED 3999 127.0.0.1:6381\r\n"


@pytest.mark.parametrize("cuts", CUTS, ids=list(CUTS))
@pytest.mark.parametrize("error, taken", [(MOVED, True), (MOVED, False), (ARITY, True)],
                         ids=["moved", "moved-not-taken", "other-error"])
def test_a_shard_channels_moved_goes_to_its_redirect_whole(cuts, error, taken):
    """In front of a cluster, a -MOVED for a shard channel's subscription command reaches its
    `redirect` whole, however the reads cut it, and the client sees nothing of it when it is
    taken; any other error, or one not taken, is the client's."""
    client = Client()
    _subscriptions, (shard,) = shard_connections(client, 1)
    calls = []

    def redirect(pending, data):
        calls.append(data)
        if taken:  # (as cluster/handlers.py's: the entry ends unseen, the command sent elsewhere)
            client.deliver(pending, b"", 1)
        return taken

    replies = SubscriptionReplies(client, [b"SSUBSCRIBE", b"s"])
    replies.redirect = redirect
    pending = entry(shard.conn, replies)
    feed(shard.conn, error, CUTS[cuts](len(error)))
    assert calls == ([error] if error == MOVED else [])
    assert b"".join(client.out) == (b"" if error == MOVED and taken else error)
    assert not shard.conn.pending and pending.remaining == 0

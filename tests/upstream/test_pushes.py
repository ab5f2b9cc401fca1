"""A connection that takes pushes (CLIENT TRACKING): the pushes go to the client's session apart
from the replies, which reach the entries that asked, whole, byte by byte or cut anywhere."""

import pytest

from proxy.pending import Pending, Receiver
from proxy.upstream.connection import READY, UpstreamConnection

pytestmark = pytest.mark.compiled_twin  # run again with the pure modules (tests/conftest.py)

PUSH = b">2\r\n$10\r\ninvalidate\r\n*1\r\n$3\r\nk:1\r\n"
FLUSHED = b">2\r\n$10\r\ninvalidate\r\n_\r\n"
ONE, TWO, THREE = b"$1\r\nv\r\n", b"*2\r\n:1\r\n>0\r\n", b"+OK\r\n"  # TWO: a '>' inside a reply is no push


class Recorder(Receiver):
    """An entry's receiver, and the session the pushes go to."""

    def __init__(self):
        self.got = []
        self.done = 0
        self.pushes = []

    def deliver(self, pending, data, done):
        self.got.append(data)
        self.done += done
        pending.remaining -= done

    def pending_failed(self, pending, error, partial):
        raise AssertionError(error)

    def pushed(self, push):
        self.pushes.append(push)


def tracking_connection():
    conn = UpstreamConnection(None, ("127.0.0.1", 1), [])
    conn.state = READY
    session = Recorder()
    conn.take_pushes(session)
    return conn, session


def entry(conn, count, receiver=None):
    receiver = receiver or Recorder()
    pending = Pending(receiver, count, conn)
    conn.pending.append(pending)
    return pending, receiver


def feed(conn, data: bytes, cuts) -> None:
    start = 0
    for cut in list(cuts) + [len(data)]:
        if cut > start:
            conn._deliver_pushes(data[start:cut])
        start = cut


CUTS = {"whole": lambda size: [], "byte by byte": lambda size: range(1, size),
        "in three": lambda size: [size // 3, 2 * size // 3]}


@pytest.mark.parametrize("cuts", CUTS, ids=list(CUTS))
def test_pushes_between_and_around_replies(cuts):
    conn, session = tracking_connection()
    first, client = entry(conn, 2)
    hidden, unseen = entry(conn, 1)  # the policy's own command (T1's EXPIRE): its receiver sees its reply only
    data = PUSH + ONE + FLUSHED + TWO + PUSH + THREE + PUSH
    feed(conn, data, CUTS[cuts](len(data)))
    assert (b"".join(client.got), client.done) == (ONE + TWO, 2)
    assert (b"".join(unseen.got), unseen.done) == (THREE, 1)
    assert session.pushes == [PUSH, FLUSHED, PUSH, PUSH] and not conn.pending and not conn.pushes.in_push


def test_a_stream_takes_the_pushes_with_its_bytes():
    conn, session = tracking_connection()
    _, client = entry(conn, 1)
    _, stream = entry(conn, -1)  # SUBSCRIBE after CLIENT TRACKING: every byte is the stream's
    conn._deliver_pushes(ONE + PUSH + b">3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n")
    assert client.got == [ONE] and stream.got == [PUSH + b">3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n"]
    assert session.pushes == []


class Failing(UpstreamConnection):
    def fail(self, reason, **_):
        self.failed.append(reason)


def test_a_reply_with_nobody_waiting_still_fails_the_connection():
    conn = Failing(None, ("127.0.0.1", 1), [])
    conn.failed, conn.state, session = [], READY, Recorder()
    conn.take_pushes(session)
    conn._deliver_pushes(PUSH + ONE)
    assert session.pushes == [PUSH] and conn.failed == ["unreadable reply stream: reply with no request waiting for it"]


@pytest.mark.parametrize("cuts", CUTS, ids=list(CUTS))
def test_a_pipelines_replies_go_in_one_piece_when_no_push_is_among_them(cuts):
    conn, session = tracking_connection()
    _, client = entry(conn, 3)
    _, later = entry(conn, 2)
    data = ONE + TWO + THREE + PUSH + ONE + FLUSHED + ONE
    feed(conn, data, CUTS[cuts](len(data)))
    assert (b"".join(client.got), client.done, b"".join(later.got), later.done) == (ONE + TWO + THREE, 3, ONE + ONE, 2)
    assert session.pushes == [PUSH, FLUSHED] and not conn.pending
    if cuts == "whole":
        assert client.got == [ONE + TWO + THREE]  # one delivery: one write to the client

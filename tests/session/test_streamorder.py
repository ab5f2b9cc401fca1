"""StreamBarriers, sans-IO: the proxy's replies take the place of the barriers' answers on a raw
stream, in the server's order; fed whole, byte by byte and cut at random, the output is the same."""

import random
import re

import pytest

from proxy.pending import Pending, Receiver
from proxy.session.streamorder import (
    MALFORMED,
    MALFORMED_REPLY,
    BarrierEntry,
    Resolve,
    StreamBarriers,
    StreamOrder,
)

TOKEN = b"t0k"
SUB = b"*3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n"
PONG = b"*2\r\n$4\r\npong\r\n$0\r\n\r\n"
MESSAGE = b"*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$12\r\nhello\r\nworld\r\n"  # a CRLF inside the payload
OK = b"+OK\r\n"
REFUSED = b"-NOPERM command KEYS breaks rule C2\r\n"


def answer(number: int, quote: bytes = b"'") -> bytes:
    """Redis 7's reply to barrier `number` (Redis 6 quotes the name with backticks)."""
    name = b"redis-guard-barrier-" + TOKEN + b"-%d" % number
    return b"-ERR unknown command " + quote + name + quote + b", with args beginning with: \r\n"


def barriers(*replies):
    scanner = StreamBarriers(TOKEN)
    made = [scanner.add(reply) for reply in replies]
    return scanner, made


def feed_in_pieces(scanner, data: bytes, cuts) -> bytes:
    out, start = [], 0
    for cut in list(cuts) + [len(data)]:
        out.append(scanner.feed(data[start:cut]))
        start = cut
    return b"".join(out)


# (name, the proxy's replies (None: unanswered by the server), stream bytes, expected output)
CASES = [
    ("one refusal after a confirmation", [REFUSED], SUB + answer(0) + PONG, SUB + REFUSED + PONG),
    ("at the very start", [OK], answer(0), OK),
    ("two, a message between", [REFUSED, OK], SUB + answer(0) + MESSAGE + answer(1), SUB + REFUSED + MESSAGE + OK),
    ("redis 6 quoting", [OK], SUB + answer(0, b"`"), SUB + OK),
    ("first unanswered (replies off)", [REFUSED, OK], SUB + answer(1), SUB + OK),
    ("none answered yet", [OK], SUB + MESSAGE, SUB + MESSAGE),
    ("another stream's barrier passes", [OK],
     b"-ERR unknown command 'redis-guard-barrier-other-0', with args beginning with: \r\n" + answer(0),
     b"-ERR unknown command 'redis-guard-barrier-other-0', with args beginning with: \r\n" + OK),
    ("bytes after the last barrier pass", [OK], answer(0) + MESSAGE + b"*3\r\n$7\r\nmess",
     OK + MESSAGE + b"*3\r\n$7\r\nmess"),
]


@pytest.mark.parametrize("name,replies,stream,expected", CASES, ids=[case[0] for case in CASES])
def test_whole(name, replies, stream, expected):
    scanner, _ = barriers(*replies)
    assert scanner.feed(stream) == expected


@pytest.mark.parametrize("name,replies,stream,expected", CASES, ids=[case[0] for case in CASES])
def test_byte_by_byte(name, replies, stream, expected):
    scanner, _ = barriers(*replies)
    out = feed_in_pieces(scanner, stream, range(1, len(stream)))
    if scanner.waiting:  # a barrier still out holds only what may be its answer: after the last CRLF
        assert expected.startswith(out) and out.endswith(b"\r\n")
    else:
        assert out == expected and scanner.idle


@pytest.mark.parametrize("seed", range(200))
def test_cut_at_random(seed):
    rng = random.Random(seed)
    name, replies, stream, expected = CASES[seed % len(CASES)]
    scanner, _ = barriers(*replies)
    cuts = sorted(rng.sample(range(1, len(stream)), min(len(stream) - 1, rng.randint(1, 6))))
    out = feed_in_pieces(scanner, stream, cuts)
    assert expected.startswith(out)
    if not scanner.waiting:
        assert out == expected and scanner.idle


def test_holds_a_partial_line_while_a_barrier_is_out():
    scanner, _ = barriers(OK)
    assert scanner.feed(SUB + b"-ERR unknown com") == SUB
    assert scanner.held == b"-ERR unknown com"
    assert scanner.feed(answer(0)[16:]) == OK
    assert scanner.idle


def test_a_reply_known_later_holds_everything_after_its_answer():
    scanner, made = barriers(REFUSED, None, OK)
    assert scanner.feed(SUB + answer(0) + answer(1) + MESSAGE) == SUB + REFUSED
    assert scanner.feed(answer(2)) == b""
    scanner.fill(made[1][1], b":0\r\n")
    assert scanner.feed(b"") == b":0\r\n" + MESSAGE + OK
    assert scanner.idle


def test_the_request_is_an_unknown_command_named_by_the_token():
    scanner, made = barriers(OK, OK)
    assert made[0][0] == b"*1\r\n$25\r\nredis-guard-barrier-t0k-0\r\n"
    assert made[1][0].endswith(b"redis-guard-barrier-t0k-1\r\n")
    assert StreamBarriers().prefix != StreamBarriers().prefix  # random per stream


def test_nothing_held_once_no_barrier_is_out():
    scanner, _ = barriers(OK)
    assert scanner.feed(answer(0) + b"$5\r\nhel") == OK + b"$5\r\nhel"
    assert scanner.idle


class FakeConn:
    def __init__(self):
        self.sent, self.closed, self.close_asked = [], False, False

    def send(self, data, pending):
        assert pending is None  # nothing is paired on a stream
        self.sent.append(data)


class FakeSession(Receiver):
    def __init__(self, output_limit: int = 1 << 30):
        self.written, self.failed, self.caught_up = [], [], 0
        self.held_bytes, self.output_limit, self.overflows = 0, output_limit, 0

    def overflow(self):
        self.overflows += 1

    def deliver(self, pending, data, done):
        self.written.append(data)

    def pending_failed(self, pending, error, partial):
        self.failed.append(error)

    def stream_caught_up(self):
        self.caught_up += 1


def stream_order(output_limit: int = 1 << 30):
    session, conn = FakeSession(output_limit), FakeConn()
    stream = Pending(session, -1, conn)
    return session, conn, stream, StreamOrder.of(session, stream)


def barrier_answer(order, sent: bytes) -> bytes:
    name = sent.split(b"\r\n")[2]
    return b"-ERR unknown command '" + name + b"', with args beginning with: \r\n"


def test_the_order_stands_in_for_the_session_while_barriers_are_out():
    session, conn, stream, order = stream_order()
    assert stream.receiver is order and StreamOrder.of(session, stream) is order
    order.send(REFUSED)
    later = BarrierEntry(order, order.send(None))
    assert order.owes()
    stream.receiver.deliver(stream, SUB + barrier_answer(order, conn.sent[0]) + barrier_answer(order, conn.sent[1]), 0)
    assert b"".join(session.written) == SUB + REFUSED and stream.receiver is order
    later.receiver.deliver(later, b":0\r\n", 1)  # Session.fill
    assert b"".join(session.written) == SUB + REFUSED + b":0\r\n" and later.remaining == 0
    assert stream.receiver is session and not order.owes()  # nothing out: the stream is the session's again


def test_an_ending_waits_for_the_server_to_close():
    session, conn, stream, order = stream_order()
    order.end(None)
    assert conn.sent == [b"*1\r\n$4\r\nQUIT\r\n"] and conn.close_asked and order.owes()
    order.deliver(stream, SUB + OK, 0)
    assert b"".join(session.written) == SUB + OK and order.owes() and stream.receiver is order
    conn.closed = True
    assert not order.owes()


def test_a_protocol_error_takes_the_place_of_the_servers():
    session, conn, stream, order = stream_order()
    error = b"-ERR Protocol error: expected '$', got 'x'\r\n"
    order.send(REFUSED)
    order.end(error)
    assert conn.sent[1] == MALFORMED
    order.deliver(stream, SUB + barrier_answer(order, conn.sent[0]) + MALFORMED_REPLY[:9], 0)
    order.deliver(stream, MALFORMED_REPLY[9:], 0)
    assert b"".join(session.written) == SUB + REFUSED + error


def test_replies_off_drop_the_barriers_before_the_protocol_error():
    session, conn, stream, order = stream_order()
    error = b"-ERR Protocol error: invalid multibulk length\r\n"
    order.send(REFUSED)  # not answered: CLIENT REPLY OFF, then ON before the malformed request
    order.end(error)
    order.deliver(stream, OK + MALFORMED_REPLY, 0)
    assert b"".join(session.written) == OK + error and not order.barriers.waiting


def test_what_is_held_goes_out_before_the_failure():
    session, conn, stream, order = stream_order()
    order.send(REFUSED)
    order.deliver(stream, SUB + b"*3\r\n$7\r\nmess", 0)
    assert b"".join(session.written) == SUB + b"*3\r\n$7\r\n"  # "mess" may start an answer
    order.pending_failed(stream, b"-ERR lost\r\n", False)
    assert b"".join(session.written) == SUB + b"*3\r\n$7\r\nmess" and session.failed == [b"-ERR lost\r\n"]


def test_what_waits_counts_against_the_output_limit():
    """Under CLIENT REPLY OFF no barrier is answered: a client refused over and over is
    disconnected at its output limit, as one that does not read its replies."""
    session, conn, stream, order = stream_order(output_limit=10 * len(REFUSED))
    for _ in range(10):
        order.send(REFUSED)
    assert session.held_bytes == 10 * len(REFUSED) and session.overflows == 0
    order.deliver(stream, SUB + b"-ERR unkn", 0)
    assert session.held_bytes == 10 * len(REFUSED) + len(b"-ERR unkn") and session.overflows == 1
    order.deliver(stream, barrier_answer(order, conn.sent[9])[9:], 0)  # the last one answered: all resolved
    assert session.held_bytes == 0 and not order.barriers.waiting
    assert b"".join(session.written) == SUB + REFUSED


def test_a_reply_known_later_counts_once_known():
    session, conn, stream, order = stream_order()
    later = BarrierEntry(order, order.send(None))
    assert session.held_bytes == 0
    later.receiver.deliver(later, b":0\r\n", 1)
    assert session.held_bytes == 4
    order.deliver(stream, barrier_answer(order, conn.sent[0]), 0)
    assert session.held_bytes == 0 and b"".join(session.written) == b":0\r\n"


def test_hidden_commands_replies_are_not_seen():
    scanner = StreamBarriers(TOKEN)
    request = scanner.hidden(b"*2\r\n$4\r\nAUTH\r\n$2\r\npw\r\n")
    assert request.count(b"redis-guard-barrier-t0k-") == 2 and b"AUTH" in request
    stream = b"+RESET\r\n" + answer(0) + b"+OK\r\n" + answer(1) + b"+PONG\r\n"
    for cut in range(1, len(stream)):  # cut anywhere, and the same whole
        scanner = StreamBarriers(TOKEN)
        scanner.hidden(b"")
        out = scanner.feed(stream[:cut]) + scanner.feed(stream[cut:])
        assert out == b"+RESET\r\n+PONG\r\n" and scanner.idle and not scanner.hiding


class Watcher:
    def __init__(self):
        self.seen = []

    def observe(self, shown: bytes) -> None:
        self.seen.append(shown)


INVALIDATE = b">2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\nk\r\n"
SCRIPT_REFUSED = b"-NOPERM key 'd:1' breaks rule V1 (string size): keep it small\r\n"
# (name, the stream's bytes with A and B for the watch's two barriers, what the client sees, what
# the watcher sees (None: nothing))
WATCH_CASES = [
    ("the reply alone", OK + b"A" + SCRIPT_REFUSED + b"B" + PONG, OK + SCRIPT_REFUSED + PONG, SCRIPT_REFUSED),
    ("pushes around it", b"A" + INVALIDATE + SCRIPT_REFUSED + INVALIDATE + b"B",
     INVALIDATE + SCRIPT_REFUSED + INVALIDATE, INVALIDATE + SCRIPT_REFUSED + INVALIDATE),
    ("its start unanswered", SCRIPT_REFUSED + b"B" + PONG, SCRIPT_REFUSED + PONG, None),
    ("its end unanswered, then another barrier", b"A" + SCRIPT_REFUSED + b"C" + PONG, SCRIPT_REFUSED + PONG, None),
]


@pytest.mark.parametrize("name,stream,shown,seen", WATCH_CASES, ids=[case[0] for case in WATCH_CASES])
def test_a_watched_reply_is_shown_and_seen(name, stream, shown, seen):
    """A command between two barriers (the policy's script, whose refusal is counted): the
    client sees what it would see anyway, the watcher what came between the two answers. A
    barrier the server did not answer watches nothing, and nothing is kept for it."""
    stream = stream.replace(b"A", answer(0)).replace(b"B", answer(1)).replace(b"C", answer(2))
    for cuts in ([], range(1, len(stream)), [len(stream) // 3, len(stream) // 2]):
        scanner, watcher = StreamBarriers(TOKEN), Watcher()
        request = scanner.watch(b"*1\r\n$4\r\nEVAL\r\n", watcher)
        assert request.count(b"redis-guard-barrier-t0k-") == 2 and request.index(b"EVAL") > request.index(b"-0\r\n")
        scanner.add(b"")  # a later barrier: its answer (C) drops the two
        out = feed_in_pieces(scanner, stream, cuts)
        assert out == shown
        assert [stretch for _watcher, stretch in scanner.watched] == ([] if seen is None else [seen])
        assert scanner.watching is None or b"C" not in stream


def test_a_watched_refusal_reaches_the_watcher_through_the_order():
    session, conn, stream, order = stream_order()
    watcher = Watcher()
    order.watched(b"*1\r\n$4\r\nEVAL\r\n", watcher)
    opening, closing = (b"-ERR unknown command '" + name + b"', with args beginning with: \r\n"
                        for name in re.findall(rb"redis-guard-barrier-[0-9a-f]+-[0-9]+", conn.sent[0]))
    order.deliver(stream, opening + SCRIPT_REFUSED + closing, 0)
    assert watcher.seen == [SCRIPT_REFUSED] and b"".join(session.written) == SCRIPT_REFUSED
    assert stream.receiver is session  # nothing more out: the stream is the session's again



class AfterWatch(Resolve):
    """A Resolve that notes what the watcher had seen when the stretch was answered."""

    def __init__(self, watcher):
        super().__init__()
        self.watcher, self.saw, self.entry = watcher, None, None

    def answered(self, stretch: bytes) -> None:
        self.saw = list(self.watcher.seen)
        Resolve.known(self.entry, b"")

    def rewrite(self, shown: bytes) -> bytes:
        return b"+ELSEWHERE\r\n" if b"-MOVED" in shown else shown


@pytest.mark.parametrize("whole", [True, False], ids=["one-read", "two-reads"])
def test_a_resolver_after_a_watch_is_answered_once_the_watcher_saw_it(whole):
    """CLIENT TRACKING (watched) then a key of another master (resolved: sent to a connection
    that must already track) answered in one read: the watcher sees its stretch before the
    resolver is asked, whatever the cut (Redis 7.0 writes both in one)."""
    session, conn, stream, order = stream_order()
    watcher = Watcher()
    order.watched(b"*1\r\n$4\r\nEVAL\r\n", watcher)
    resolver = AfterWatch(watcher)
    resolver.entry = order.resolved(b"*1\r\n$3\r\nGET\r\n", resolver)
    names = re.findall(rb"redis-guard-barrier-[0-9a-f]+-[0-9]+", b"".join(conn.sent))
    answers = [b"-ERR unknown command '" + name + b"', with args beginning with: \r\n" for name in names]
    data = answers[0] + OK + answers[1] + answers[2] + b"-MOVED 1 h:1\r\n" + answers[3] + b"+PONG\r\n"
    pieces = [data] if whole else [data[:len(data) // 2], data[len(data) // 2:]]
    for piece in pieces:
        order.deliver(stream, piece, 0)
    assert watcher.seen == [OK] and resolver.saw == [OK]
    assert b"".join(session.written) == OK + b"+ELSEWHERE\r\n+PONG\r\n"
    assert stream.receiver is session and not order.owes()

class Upper:
    """A Rewrite that shows what it gets in upper case, and keeps what it got."""

    def __init__(self):
        self.got = []

    def rewrite(self, shown: bytes) -> bytes:
        self.got.append(shown)
        return shown.upper()


def test_a_rewritten_stretch_is_shown_as_rewritten_in_its_place():
    """A command between a REWRITE barrier and its rewriter's: what came between the two
    answers (the reply, a message meanwhile) is shown rewritten, in place, whole, however cut."""
    from proxy.session.streamorder import Rewrite

    class Up(Upper, Rewrite):
        pass

    stream = MESSAGE + answer(0) + SUB + MESSAGE + answer(1) + PONG
    for cuts in ([], range(1, len(stream)), [len(stream) // 3, len(stream) // 2]):
        scanner, rewriter = StreamBarriers(TOKEN), Up()
        request = scanner.rewrite(b"*1\r\n$10\r\nSSUBSCRIBE\r\n", rewriter)
        assert request.count(b"redis-guard-barrier-t0k-") == 2
        assert feed_in_pieces(scanner, stream, cuts) == MESSAGE + (SUB + MESSAGE).upper() + PONG
        assert rewriter.got == [SUB + MESSAGE] and scanner.rewriting is None and scanner.idle


def test_a_barriers_reply_rewritten_when_its_place_comes():
    """A reply known before its place (a connection aside's) is rewritten only when shown: what
    was shown before it is taken into account first."""
    from proxy.session.streamorder import Rewrite

    class Up(Upper, Rewrite):
        pass

    scanner, rewriter = StreamBarriers(TOKEN), Up()
    scanner.add(b"+aside\r\n", rewriter)
    assert rewriter.got == []
    assert scanner.feed(SUB + answer(0) + PONG) == SUB + b"+ASIDE\r\n" + PONG
    assert rewriter.got == [b"+aside\r\n"]


def test_a_rewritten_stretch_the_server_left_unanswered_is_shown_as_it_is():
    from proxy.session.streamorder import Rewrite

    class Up(Upper, Rewrite):
        pass

    scanner, rewriter = StreamBarriers(TOKEN), Up()
    scanner.rewrite(b"*1\r\n$4\r\nPING\r\n", rewriter)  # barriers 0 and 1
    scanner.add(OK)  # 2
    # 0 answered, then replies off: 1 never is; 2 is, after CLIENT REPLY ON
    assert scanner.feed(answer(0) + SUB + answer(2)) == SUB + OK
    assert rewriter.got == [] and scanner.rewriting is None and scanner.idle


class Recorder:
    """A `Filter` that upper-cases what passes through it and keeps it."""

    def __init__(self):
        self.got = []

    def feed(self, shown: bytes) -> bytes:
        self.got.append(shown)
        return shown.upper()


def test_a_filter_sees_what_is_shown_between_its_barrier_and_the_end():
    """What the client is shown from a Filter barrier's answer up to a FILTER_END barrier's
    passes through the filter as it comes (however cut); nothing before or after; the stream is
    not idle while a filter is on (the StreamOrder keeps it)."""
    from proxy.session.streamorder import FILTER_END, Filter

    class Upper(Recorder, Filter):
        pass

    stream = MESSAGE + answer(0) + OK + SUB + answer(1) + PONG
    for cuts in ([], range(1, len(stream)), [len(stream) // 3, len(stream) // 2]):
        scanner, watcher = StreamBarriers(TOKEN), Upper()
        scanner.add(b"", watcher)
        scanner.add(b"", FILTER_END)
        assert feed_in_pieces(scanner, stream, cuts) == MESSAGE + (OK + SUB).upper() + PONG
        assert b"".join(watcher.got) == OK + SUB and scanner.filtering is None and scanner.idle
    scanner, watcher = StreamBarriers(TOKEN), Upper()
    scanner.add(b"", watcher)
    assert scanner.feed(answer(0) + OK) == OK.upper() and not scanner.idle  # (on until its end)


def test_a_filter_end_left_unanswered_ends_the_filter():
    from proxy.session.streamorder import FILTER_END, Filter

    class Upper(Recorder, Filter):
        pass

    scanner, watcher = StreamBarriers(TOKEN), Upper()
    scanner.add(b"", watcher)  # 0
    scanner.add(b"", FILTER_END)  # 1, never answered (replies off)
    scanner.add(OK)  # 2
    # (what came before 2's answer came once replies were on again: after the filter's end)
    assert scanner.feed(answer(0) + MESSAGE) == MESSAGE.upper()
    assert scanner.feed(SUB + answer(2) + PONG) == SUB + OK + PONG
    assert scanner.idle and watcher.got == [MESSAGE]

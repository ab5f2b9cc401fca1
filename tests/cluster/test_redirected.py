"""`TxnReplies` without a server: a whole -MOVED/-ASK reply on a transaction's connection becomes
a TRYAGAIN error naming no node, cut exactly across reads; a `-MOVED` inside a value is none."""

from types import SimpleNamespace

from proxy.backends.cluster.redirected import TxnReplies
from proxy.config import Address
from proxy.session.states import NONE


class FakeSession:
    def __init__(self):
        self.shown = []
        self.done = 0
        self.state = SimpleNamespace(txn=NONE)

    def deliver(self, entry, data, done):
        self.shown.append(data)
        self.done += done
        entry.remaining -= done


class FakeRouter:
    def __init__(self):
        self.moves = []

    def moved(self, slot, node):
        self.moves.append((slot, node))


def _entry(count):
    return SimpleNamespace(count=count, remaining=count, conn=SimpleNamespace(address=Address("127.0.0.1", 7000)))


def _run(chunks, commands, queued=True):
    session, router = FakeSession(), FakeRouter()
    replies = TxnReplies(session, router, commands, queued)
    entry = _entry(len(commands))
    for chunk in chunks:
        replies.deliver(entry, chunk, 0)
    return b"".join(session.shown), session.done, router.moves


def test_a_redirection_cut_across_reads_is_replaced_and_the_map_learns_a_moved():
    data = b"+QUEUED\r\n-MOVED 3999 127.0.0.1:7001\r\n-ASK 12 :7002\r\n+QUEUED\r\n"
    for cut in range(1, len(data)):
        shown, done, moves = _run([data[:cut], data[cut:]], [[b"SET", b"a", b"1"], [b"SET", b"b", b"1"],
                                                            [b"get", b"c"], [b"SET", b"d", b"1"]])
        assert done == 4
        replies = shown.split(b"\r\n")[:-1]
        assert replies[0] == b"+QUEUED" and replies[3] == b"+QUEUED"
        assert replies[1].startswith(b"-TRYAGAIN SET: its key's slot is moving") and b"EXECABORT" in replies[1]
        assert replies[2].startswith(b"-TRYAGAIN GET: ")
        assert b"7001" not in shown and b"MOVED" not in shown and b"ASK " not in shown
        assert moves == [(3999, Address("127.0.0.1", 7001))]


def test_a_value_that_holds_a_redirection_is_passed_as_it_came():
    value = b"\r\n-MOVED 1 127.0.0.1:7001\r\nxx"
    data = b"*2\r\n$%d\r\n%s\r\n-MOVED 2 127.0.0.1:7001\r\n$1\r\nv\r\n" % (len(value), value)  # (an element)
    for cut in range(1, len(data)):
        shown, done, moves = _run([data[:cut], data[cut:]], [[b"EXEC"], [b"GET", b"k"]], queued=False)
        assert shown == data and done == 2 and moves == []


def test_exec_and_watch_say_what_to_do():
    shown, _done, _moves = _run([b"-MOVED 5 127.0.0.1:7001\r\n"], [[b"EXEC"]], queued=False)
    assert shown.startswith(b"-TRYAGAIN EXEC: ") and b"discarded" in shown
    shown, _done, _moves = _run([b"-ASK 5 127.0.0.1:7001\r\n"], [[b"WATCH", b"k"]], queued=False)
    assert shown.startswith(b"-TRYAGAIN WATCH: ") and b"Nothing is watched" in shown

"""`sides.Queued`, sans-IO: the replies of a transaction on a cluster client's stream pass as
they come, however cut; only a top-level -MOVED/-ASK is replaced (the TRYAGAIN error naming no
node, worded for its command by place), never the same bytes inside a value or a push."""

import pytest

from proxy.backends.cluster import sides
from proxy.backends.cluster.sides import Queued


class Node:
    address = "127.0.0.1:7000"


class Router:
    def __init__(self):
        self.learnt = []

    def moved(self, slot, node):
        self.learnt.append((slot, str(node)))


class Backend:
    def __init__(self):
        self.router = Router()
        self.sides = {}

    def router_of(self, _session):
        return self.router


class Stream:
    conn = Node()


class Session:
    def __init__(self):
        self.backend = Backend()
        self.stream = Stream()


BODY = b"x\r\n-MOVED 1 h:1\r\nyy"
VALUE = b"$%d\r\n%s\r\n" % (len(BODY), BODY)  # (a value holding a redirection's bytes)
PUSH = b">2\r\n$10\r\ninvalidate\r\n*1\r\n$12\r\n-ASK 1 h:1\r\n\r\n"
STREAM = (b"+OK\r\n" + PUSH + b"-ASK 3999 127.0.0.1:7002\r\n" + VALUE
          + b"-MOVED 12 127.0.0.1:7003\r\n" + PUSH + b"-EXECABORT Transaction discarded because of previous errors.\r\n")
COMMANDS = [[b"MULTI"], [b"SET", b"{a}k", b"v"], [b"GET", b"{b}k"], [b"GET", b"{c}k"], [b"EXEC"]]


def _feed(cuts):
    session = Session()
    queued = Queued(session)
    queued.commands.extend(COMMANDS)
    out, start = [], 0
    for cut in list(cuts) + [len(STREAM)]:
        out.append(queued.feed(STREAM[start:cut]))
        start = cut
    return b"".join(out), session, queued


@pytest.mark.parametrize("cuts", [[], range(1, len(STREAM)), [7, 40, 41, 90]], ids=["whole", "bytewise", "some"])
def test_only_top_level_redirections_are_replaced(cuts):
    shown, session, queued = _feed(cuts)
    assert b"127.0.0.1" not in shown and queued.held == b"" and queued.replies == 5
    first, second = (sides.errors.slot_moving(args, sides.errors.SLOT_MOVING_QUEUED) for args in COMMANDS[1:4:2])
    assert shown == (b"+OK\r\n" + PUSH + first + VALUE + second + PUSH
                     + b"-EXECABORT Transaction discarded because of previous errors.\r\n")
    assert first.startswith(b"-TRYAGAIN SET: ") and second.startswith(b"-TRYAGAIN GET: ")
    assert session.backend.router.learnt == [(12, "127.0.0.1:7003")]


def test_exec_redirected_is_worded_for_exec():
    session = Session()
    queued = Queued(session)
    queued.commands.extend([[b"MULTI"], [b"SET", b"k", b"v"], [b"EXEC"]])
    shown = queued.feed(b"+OK\r\n+QUEUED\r\n-MOVED 5 127.0.0.1:7009\r\n+PONG\r\n")
    assert shown.startswith(b"+OK\r\n+QUEUED\r\n-TRYAGAIN EXEC: ") and b"was discarded" in shown
    assert shown.endswith(b"+PONG\r\n") and b"7009" not in shown


def test_what_is_not_resp_passes_as_it_is_from_then_on():
    queued = Queued(Session())
    assert queued.feed(b"+OK\r\n$x\r\n-MOVED 1 h:1\r\n") == b"+OK\r\n$x\r\n-MOVED 1 h:1\r\n"
    assert queued.lost and queued.feed(b"-ASK 2 h:2\r\n") == b"-ASK 2 h:2\r\n"

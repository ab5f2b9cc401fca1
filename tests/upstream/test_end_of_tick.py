"""The end of an event-loop tick (`EndOfTick`): requests queued on upstream connections during a
tick leave in one write per connection, all from one callback, in the order the connections
queued their first; a connection with nothing in flight writes at once unless others of its loop
wait (arrival order across connections: another client's PUBLISH must not overtake an earlier
UNSUBSCRIBE). Socket-free: fake transports that log every write in one list, on a loop that is
never run (its ready callbacks are run by hand, as the tick's end would)."""

from __future__ import annotations

import asyncio

import pytest

from proxy import pending
from proxy.pending import Pending
from proxy.upstream import connection
from proxy.upstream.connection import READY, UpstreamConnection
from tests.session.fakes import Transport


class LoggedTransport(Transport):
    def __init__(self, name: str, log: list):
        super().__init__()
        self.name, self.log = name, log

    def write(self, data):
        super().write(data)
        self.log.append((self.name, bytes(data)))


class Receiver(pending.Receiver):
    def deliver(self, entry, data, done):
        pass

    def pending_failed(self, entry, error, partial):
        pass


def fake_connection(loop, name: str, log: list) -> UpstreamConnection:
    conn = UpstreamConnection(loop, ("127.0.0.1", 7000), [])
    conn.transport = LoggedTransport(name, log)
    conn.write = conn.transport.write
    conn.state = READY
    return conn


def end_tick(loop) -> int:
    """Run what the loop would run at the end of this tick; how many callbacks that was."""
    ready = loop._ready
    count = 0
    while ready:
        ready.popleft()._run()
        count += 1
    return count


@pytest.fixture
def loop():
    loop = asyncio.new_event_loop()
    yield loop
    end_tick(loop)  # (nothing left waiting for the next test)
    loop.close()


def request(n: int) -> bytes:
    return b"*1\r\n$4\r\nPING\r\n" * n


def test_an_idle_connection_writes_at_once(loop):
    log = []
    conn = fake_connection(loop, "a", log)
    conn.send(request(1), Pending(Receiver(), 1, conn))
    assert log == [("a", request(1))] and not loop._ready


def test_a_ticks_requests_leave_in_one_write_each_from_one_callback(loop):
    log = []
    a, b, c = (fake_connection(loop, name, log) for name in "abc")
    a.send(request(1), Pending(Receiver(), 1, a))  # idle: at once
    a.send(request(2), Pending(Receiver(), 2, a))  # in flight: waits for the tick's end
    b.send(request(3), Pending(Receiver(), 3, b))  # idle, but a waits: after a's
    a.send(request(4), Pending(Receiver(), 4, a))
    c.send(request(5), Pending(Receiver(), 5, c))
    assert log == [("a", request(1))]
    assert end_tick(loop) == 1
    assert log == [("a", request(1)), ("a", request(2) + request(4)), ("b", request(3)), ("c", request(5))]
    assert not a.tick.waiting and a.tick is b.tick is c.tick is connection.end_of_tick(loop)
    assert not any(conn.flush_scheduled or conn.out for conn in (a, b, c))
    b.send(request(1), Pending(Receiver(), 1, b))  # the next tick: again one callback
    c.send(request(1), Pending(Receiver(), 1, c))
    assert end_tick(loop) == 1 and log[-2:] == [("b", request(1)), ("c", request(1))]


def test_a_connection_that_closed_waits_for_nothing(loop):
    log = []
    a, b = fake_connection(loop, "a", log), fake_connection(loop, "b", log)
    a.send(request(1), Pending(Receiver(), 1, a))
    a.send(request(2), Pending(Receiver(), 2, a))
    b.send(request(3), Pending(Receiver(), 3, b))
    a.state = connection.CLOSED  # (what fail() sets): its requests are not written
    assert end_tick(loop) == 1
    assert log == [("a", request(1)), ("b", request(3))]
    assert not a.tick.waiting and not a.flush_scheduled


def test_each_loop_has_its_own_end_of_tick():
    """A loop's waiting connections hold no other loop's writes back, even one closed before its
    tick ended (a test's)."""
    log = []
    old = asyncio.new_event_loop()
    stale = fake_connection(old, "old", log)
    stale.send(request(1), Pending(Receiver(), 1, stale))
    stale.send(request(2), Pending(Receiver(), 2, stale))  # waits for a tick that never ends
    old.close()
    new = asyncio.new_event_loop()
    try:
        conn = fake_connection(new, "new", log)
        assert conn.tick is not stale.tick and stale.tick.waiting == [stale]
        conn.send(request(3), Pending(Receiver(), 3, conn))  # idle, and nothing of its loop waits
        conn.send(request(1), Pending(Receiver(), 1, conn))
        assert log == [("old", request(1)), ("new", request(3))]
        assert end_tick(new) == 1 and log[-1] == ("new", request(1))
    finally:
        end_tick(new)
        new.close()


def test_a_connection_without_a_loop_has_a_tick_of_its_own():
    one, other = (UpstreamConnection(None, ("127.0.0.1", 1), []) for _ in range(2))
    assert one.tick is not other.tick


class BrokenTransport(LoggedTransport):
    def write(self, data):
        raise RuntimeError("a bug in a write")


def test_a_write_that_raises_holds_no_other_connection_back(loop):
    log, errors = [], []
    loop.set_exception_handler(lambda _loop, context: errors.append(context["exception"]))
    a, b = fake_connection(loop, "a", log), fake_connection(loop, "b", log)
    a.send(request(1), Pending(Receiver(), 1, a))
    a.transport = BrokenTransport("a", log)
    a.write = a.transport.write
    a.send(request(2), Pending(Receiver(), 2, a))
    b.send(request(3), Pending(Receiver(), 3, b))
    assert end_tick(loop) == 2  # a's write raised in the first; b's went in a second
    assert [type(error) for error in errors] == [RuntimeError]
    assert log == [("a", request(1)), ("b", request(3))] and not a.tick.waiting
    b.send(request(4), Pending(Receiver(), 4, b))
    assert end_tick(loop) == 1 and log[-1] == ("b", request(4))

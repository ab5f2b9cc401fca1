"""The compiled direct writer: bytes straight to the socket only while the transport holds
nothing and is not closing; everything else through the transport, in order.

The unit tests give it one end of a socket pair and a fake transport that records what it was
handed; the uvloop tests run it on real uvloop transports, a client's and an upstream
connection's, which is what the proxy does.
"""

import asyncio
import socket

import pytest
import uvloop

from proxy import compiled
from proxy.config import parse_address
from proxy.upstream import connection

writes = compiled.load("proxy.upstream._compiled_write")
built = pytest.mark.skipif(writes is None, reason="the compiled direct writer is not built")


class FakeTransport:
    def __init__(self):
        self.handed = []
        self.kinds = []
        self.held = 0  # what get_write_buffer_size answers
        self.closing = False

    def write(self, data):
        self.handed.append(bytes(data))
        self.kinds.append(type(data))

    def is_closing(self):
        return self.closing

    def get_write_buffer_size(self):
        return self.held


@pytest.fixture
def pair():
    if writes is None:
        pytest.skip("the compiled direct writer is not built")
    ours, peer = socket.socketpair()
    ours.setblocking(False)
    transport = FakeTransport()
    writer = writes.DirectWriter(ours.fileno(), transport.write, transport.is_closing, transport.get_write_buffer_size)
    yield writer, transport, peer, ours
    ours.close()
    peer.close()


def read_all(sock, size):
    sock.settimeout(5)
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            break
        data += chunk
    return data


@built
def test_bytes_go_straight_to_the_socket(pair):
    writer, transport, peer, _ = pair
    for reply in (b"+OK\r\n", b"$3\r\nabc\r\n", b":1\r\n"):
        writer.write(reply)
    assert read_all(peer, 18) == b"+OK\r\n$3\r\nabc\r\n:1\r\n"
    assert transport.handed == [] and (writer.direct, writer.handed) == (3, 0)


@built
@pytest.mark.parametrize("data", [bytearray(b"+OK\r\n"), memoryview(b"+OK\r\n")], ids=["bytearray", "memoryview"])
def test_other_buffers_go_to_the_transport_then_bytes_ask_it_first(pair, data):
    writer, transport, peer, _ = pair
    writer.write(data)
    assert transport.handed == [b"+OK\r\n"]
    transport.held = 5  # the transport kept it: the next reply must queue behind it
    writer.write(b":1\r\n")
    assert transport.handed == [b"+OK\r\n", b":1\r\n"]
    transport.held = 0
    writer.write(b":2\r\n")
    assert read_all(peer, 4) == b":2\r\n"
    assert (writer.direct, writer.handed) == (1, 2)


@built
def test_a_closing_transport_decides(pair):
    writer, transport, peer, _ = pair
    transport.closing = True
    writer.write(b"+late\r\n")
    assert transport.handed == [b"+late\r\n"]
    peer.setblocking(False)
    with pytest.raises(BlockingIOError):
        peer.recv(10)


@built
def test_an_empty_reply_writes_nothing(pair):
    writer, transport, peer, _ = pair
    writer.write(b"")
    assert transport.handed == [] and (writer.direct, writer.handed) == (0, 0)


@built
def test_a_short_write_hands_the_rest_and_keeps_the_order(pair):
    writer, transport, peer, ours = pair
    ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    big = bytes(range(256)) * 8192  # 2 MiB, far beyond the socket buffer: the peer is not reading
    writer.write(big)
    taken = len(big) - sum(map(len, transport.handed))
    assert 0 < taken < len(big) and transport.handed == [big[taken:]]
    assert transport.kinds == [memoryview]  # the tail handed over as a view, not copied
    transport.held = len(big) - taken
    assert read_all(peer, taken) == big[:taken]  # the socket has room again, the transport has not written
    writer.write(b"+after\r\n")  # so it must not overtake the bytes the transport holds
    assert transport.handed[-1] == b"+after\r\n"
    assert b"".join(transport.handed) == big[taken:] + b"+after\r\n"
    transport.held = 0
    writer.write(b"+again\r\n")
    assert read_all(peer, 8) == b"+again\r\n"


@built
def test_a_peer_that_went_away_is_left_to_the_transport(pair):
    writer, transport, peer, _ = pair
    peer.close()
    writer.write(b"+OK\r\n")  # EPIPE, not SIGPIPE: the transport meets the error and reports it
    assert transport.handed == [b"+OK\r\n"]


def test_no_writer_for_other_transports():
    transport = FakeTransport()
    assert connection.writers(transport) == (None, transport.write)


def test_a_uvloop_transport_gets_the_writer_when_built():
    async def script(write, transport, read):
        write(b"+OK\r\n")
        transport.close()

    received, writer = uvloop.run(_serve(script))
    assert received == b"+OK\r\n"
    if writes is None:  # the transport's own write
        assert type(writer) in connection.DIRECT_WRITES
    else:
        assert type(writer) is writes.DirectWriter


async def _serve(script):
    """A uvloop server whose protocol writes with `writers`' write as `script(write, transport,
    read)` says: the client reads once `read` is set, until the server closes. Returns what it
    received and the writer."""
    loop = asyncio.get_running_loop()
    made, read = loop.create_future(), asyncio.Event()

    class Writing(asyncio.Protocol):
        def connection_made(self, transport):
            made.set_result(transport)

    server = await loop.create_server(Writing, "127.0.0.1", 0)
    reader, writer_end = await asyncio.open_connection("127.0.0.1", server.sockets[0].getsockname()[1])

    async def receive():
        await read.wait()
        received = b""
        try:
            while chunk := await asyncio.wait_for(reader.read(1 << 20), 5):
                received += chunk
        except ConnectionResetError:
            pass
        return received

    receiving = asyncio.create_task(receive())
    transport = await made
    assert type(transport) in connection.DIRECT_WRITES
    _, write = connection.writers(transport)
    await script(write, transport, read)
    read.set()
    received = await receiving
    writer_end.close()
    server.close()
    await server.wait_closed()
    return received, write.__self__


@built
def test_on_a_uvloop_transport_every_reply_arrives_in_order():
    replies = [b"%d:" % n + bytes([n % 251]) * (n * 997 % 200_000) for n in range(300)]

    async def script(write, transport, read):
        transport.set_write_buffer_limits(high=64 * 1024)
        for reply in replies:  # no await between them: the client reads once all are written
            write(reply)
        assert transport.get_write_buffer_size() > 0
        read.set()
        for _ in range(500):
            await asyncio.sleep(0.01)
            if transport.get_write_buffer_size() == 0:
                break
        write(b"+last\r\n")  # the transport is empty again: straight to the socket
        transport.close()

    received, writer = uvloop.run(_serve(script))
    assert received == b"".join(replies) + b"+last\r\n"
    assert writer.direct > 1 and writer.handed > 0  # both ways, the last one direct


@built
def test_on_a_uvloop_transport_nothing_is_written_after_abort():
    async def script(write, transport, read):
        write(b"+before\r\n")
        read.set()
        await asyncio.sleep(0.05)
        transport.abort()
        write(b"+after\r\n")

    received, writer = uvloop.run(_serve(script))
    assert received == b"+before\r\n"
    assert (writer.direct, writer.handed) == (1, 1)


def test_an_upstream_connection_writes_through_its_writer(redis_server):
    async def run():
        loop = asyncio.get_running_loop()
        conn = connection.UpstreamConnection(loop, parse_address(f"127.0.0.1:{redis_server.port}"), [("PING",)])
        conn.connect(5)
        for _ in range(500):
            if conn.state is connection.READY:
                break
            await asyncio.sleep(0.01)
        replies = await asyncio.wait_for(conn.ask([("SET", "writer:test", "1"), ("GET", "writer:test")]), 5)
        writer = conn.write.__self__
        conn.close()
        return replies, writer

    replies, writer = uvloop.run(run())
    assert replies == [b"OK", b"1"]
    if writes is not None:  # the start-up PING and the two commands, each written at once
        assert (writer.direct, writer.handed) == (2, 0)


@built
def test_the_stamp_clock_is_perf_counter():
    """A write's stamp is taken in C (`stamp_clock`) and compared with the monitor's
    `time.perf_counter` at the next read: the same clock, never behind it, moving forward."""
    import time

    readings = []
    for _ in range(1000):
        before = time.perf_counter()
        stamp = writes.stamp_clock()
        readings.append(stamp)
        assert before <= stamp <= time.perf_counter()
    assert readings == sorted(readings) and readings[-1] > readings[0]

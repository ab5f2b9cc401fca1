"""Stand-ins for sockets, shared by the socket-free rigs (tests/session, tests/cluster/test_scatter.py)
and benchmarks/micro_session.py: a transport that keeps what is written to it, and a backend
whose upstream connections are such transports, READY at once."""

from __future__ import annotations

from proxy.upstream.connection import READY, UpstreamConnection
from proxy.upstream.pools import Opener


class Transport:
    def __init__(self):
        self.out = []
        self.closed = False
        self.reading = True
        self.buffered = 0

    def write(self, data):
        self.out.append(data)

    def is_closing(self):
        return self.closed

    def get_extra_info(self, name):
        return None

    def set_write_buffer_limits(self, high=None):
        pass

    def get_write_buffer_size(self):
        return self.buffered

    def pause_reading(self):
        self.reading = False

    def resume_reading(self):
        self.reading = True

    def close(self):
        self.closed = True

    def abort(self):
        self.closed = True

    def taken(self) -> bytes:
        data, self.out = b"".join(self.out), []
        return data


def open_fakes(backend, loop, address, opened: list) -> None:
    """Make a standalone `backend` open fake connections to `address`, appended to `opened`."""
    real = backend._opener

    class FakeOpener(Opener):
        """Opens fake connections, READY at once."""

        __slots__ = ()

        def open(self, role, on_close=None, **extra):
            conn = UpstreamConnection(loop, address, [], on_close)
            conn.transport = Transport()
            conn.write = conn.transport.write  # what connection_made binds
            conn.state = READY
            conn.role, conn.db, conn.protocol = role, self.db, self.protocol
            conn.upstream = self.upstream
            conn.sockname = b"127.0.0.1:%d" % (50000 + len(opened))
            opened.append(conn)
            return conn

    def opener(identity, db, protocol):
        found = real(identity, db, protocol)
        found.__class__ = FakeOpener
        return found

    backend._opener = opener
    backend.control.opener = opener(backend.default_identity, 0, 2)

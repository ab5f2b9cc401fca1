"""The test helpers' own processes: none is left running when a fixture fails half-way."""

from tests import servers
from tests.servers import RedisServer


def test_a_server_left_running_is_ended_at_exit():
    server = RedisServer()
    try:
        assert server in servers._RUNNING and server.process.poll() is None
        # What the test run's exit does with every one left (atexit); here with this one only,
        # as the session's own servers are still in use.
        servers._stop_leftovers({server})
        assert server.process.poll() is not None and server not in servers._RUNNING
    finally:
        server.close()


def test_a_stopped_server_is_not_stopped_again():
    server = RedisServer()
    server.stop()
    assert server not in servers._RUNNING
    server.start()  # (a restart: followed again)
    try:
        assert server in servers._RUNNING
    finally:
        server.close()

import socket
import subprocess
import time

import pytest

from proxy.commands import CommandTable, snapshot_for
from tests.servers import redis_server_binary, redis_server_version


@pytest.fixture(scope="session")
def table() -> CommandTable:
    return CommandTable.from_snapshot()


@pytest.fixture(scope="session")
def server_table() -> CommandTable:
    """The snapshot of the release of the redis-server the tests start (7.0's, 8.2's...)."""
    version = redis_server_version()
    return CommandTable.from_snapshot(snapshot_for(".".join(map(str, version)) if version else None))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def redis_port():
    """A throwaway redis-server on a free port (never 6379); skipped without one."""
    exe = redis_server_binary()
    if exe is None:
        pytest.skip("no redis-server on PATH (or REDIS_GUARD_TEST_REDIS_SERVER names none)")
    port = _free_port()
    assert port != 6379
    proc = subprocess.Popen(
        [exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.skip("redis-server did not start")
                time.sleep(0.05)
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=10)

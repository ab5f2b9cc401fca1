import shutil
import socket
import subprocess
import time

import pytest

from proxy.commands import CommandTable


@pytest.fixture(scope="session")
def table() -> CommandTable:
    return CommandTable.from_snapshot()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def redis_port():
    """A throwaway redis-server on a free port (never 6379); skipped without one."""
    exe = shutil.which("redis-server")
    if exe is None:
        pytest.skip("no redis-server on PATH")
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

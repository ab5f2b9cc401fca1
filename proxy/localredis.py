"""A local redis-server started for the user when no upstream is configured and none answers.

Only for the quick start: it runs on a free loopback port with persistence off, and stops with
the proxy that started it."""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


class LocalRedis:
    def __init__(self, port: int | None = None, executable: str = "redis-server"):
        path = shutil.which(executable)
        if path is None:
            raise FileNotFoundError(
                "no upstream configured, none answers on 127.0.0.1:6379, and redis-server is not "
                "installed (apt-get install -y redis-server), or pass --upstream redis://HOST:PORT"
            )
        self.port = port or free_port()
        self.dir = tempfile.mkdtemp(prefix="redis-guard-")
        self.process = subprocess.Popen(
            [path, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", self.dir],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"redis-server exited with status {self.process.returncode}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError("redis-server did not start within 10 s")

    @property
    def pid(self) -> int:
        return self.process.pid

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.dir, ignore_errors=True)

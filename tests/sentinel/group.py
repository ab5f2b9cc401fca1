"""A real Sentinel-managed master for tests: one master, one replica and three sentinels
(`redis-server --sentinel`) on free loopback ports, quick to fail over; every process ended by pid."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time

import redis

from tests.servers import STARTED, RedisServer, free_port, redis_server_binary, wait_for, wait_port

MASTER_NAME = "rgmaster"


class Sentinel:
    def __init__(self, master_port: int, directory: str):
        self.port = free_port()
        self.conf = os.path.join(directory, f"sentinel-{self.port}.conf")
        with open(self.conf, "w") as handle:
            handle.write(
                f"port {self.port}\nbind 127.0.0.1\ndir {directory}\n"
                f"sentinel monitor {MASTER_NAME} 127.0.0.1 {master_port} 2\n"
                f"sentinel down-after-milliseconds {MASTER_NAME} 1000\n"
                f"sentinel failover-timeout {MASTER_NAME} 5000\n"
                f"sentinel parallel-syncs {MASTER_NAME} 1\n"
            )
        self.process = subprocess.Popen([redis_server_binary(), self.conf, "--sentinel"],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        STARTED.append("sentinel")
        wait_port(self.port)

    def client(self) -> redis.Redis:
        return redis.Redis(port=self.port, socket_timeout=2)

    def master(self):
        reply = self.client().execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER_NAME)
        return (reply[0].decode(), int(reply[1])) if reply else None

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


class SentinelGroup:
    def __init__(self):
        if redis_server_binary() is None:
            raise RuntimeError("redis-server is not installed (apt-get install -y redis-server)")
        self.dir = tempfile.mkdtemp(prefix="rg-test-sentinel-")
        self.master = RedisServer()
        self.replica = RedisServer(None, "--replicaof", "127.0.0.1", str(self.master.port))
        wait_for(lambda: self.replica_in_sync(self.replica), 20, "the replica to sync")
        self.sentinels = [Sentinel(self.master.port, self.dir) for _ in range(3)]
        wait_for(lambda: all(self._knows_replica(s) for s in self.sentinels), 30,
                 "every sentinel to know the replica", errors=(OSError, redis.RedisError))

    @staticmethod
    def replica_in_sync(server: RedisServer) -> bool:
        info = redis.Redis(port=server.port).info("replication")
        return info.get("role") == "slave" and info.get("master_link_status") == "up"

    @staticmethod
    def _knows_replica(sentinel: Sentinel) -> bool:
        replicas = sentinel.client().execute_command("SENTINEL", "REPLICAS", MASTER_NAME)
        return bool(replicas) and len(sentinel.client().execute_command("SENTINEL", "SENTINELS", MASTER_NAME)) >= 2

    @property
    def spec(self) -> str:
        """MASTER@HOST:PORT,... for --upstream-sentinel."""
        return f"{MASTER_NAME}@" + ",".join(f"127.0.0.1:{s.port}" for s in self.sentinels)

    def kill_master(self) -> RedisServer:
        old = self.master
        old.stop(signal.SIGKILL)
        return old

    def wait_for_failover(self, old_port: int, timeout: float = 30) -> int:
        def promoted():
            address = self.sentinels[0].master()
            if address is None or address[1] == old_port:
                return None
            role = redis.Redis(port=address[1], socket_timeout=1).execute_command("ROLE")
            return address[1] if role[0] == b"master" else None

        port = wait_for(promoted, timeout, "the sentinels to promote the replica", errors=(OSError, redis.RedisError))
        self.master, self.replica = self.replica, self.master
        return port

    def close(self) -> None:
        for sentinel in self.sentinels:
            sentinel.stop()
        self.master.close()
        self.replica.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def wait_until(check, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return False

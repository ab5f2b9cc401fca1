"""A Redis Cluster of 3 TLS-only masters (`--port 0 --tls-port P --tls-cluster yes`) behind the
proxy: `upstream_cluster: rediss://...` reaches every node on the TLS port the cluster reports."""

from __future__ import annotations

import shutil
import subprocess
import time

import pytest
import redis

from tests.cluster.nodes import pick_cluster_ports
from tests.servers import _RUNNING, ProxyProcess, RedisServer, wait_port
from tests.tls.certs import Certs
from tests.tls.test_tls import client, write_config

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl is not installed")


class TLSNode(RedisServer):
    def start(self) -> None:
        cert, key = self.extra
        self.process = subprocess.Popen(
            ["redis-server", "--port", "0", "--tls-port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", self.dir, "--cluster-enabled", "yes", "--cluster-node-timeout", "2000",
             "--tls-cluster", "yes", "--tls-cert-file", cert, "--tls-key-file", key,
             "--tls-ca-cert-file", self.ca, "--tls-auth-clients", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        _RUNNING.add(self)
        wait_port(self.port)


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return Certs(str(tmp_path_factory.mktemp("certs")))


@pytest.fixture(scope="module")
def tls_cluster(certs):
    nodes = []
    try:
        for port in pick_cluster_ports(3):
            TLSNode.ca = certs.ca
            nodes.append(TLSNode(port, *certs.redis))
        conns = [redis.Redis(port=node.port, ssl=True, ssl_ca_certs=certs.ca, socket_timeout=5) for node in nodes]
        per = 16384 // 3
        for index, conn in enumerate(conns):
            last = 16383 if index == 2 else (index + 1) * per - 1
            conn.execute_command("CLUSTER", "ADDSLOTSRANGE", index * per, last)
        for node in nodes[1:]:
            conns[0].execute_command("CLUSTER", "MEET", "127.0.0.1", node.port)
        deadline = time.monotonic() + 30
        while not all(b"cluster_state:ok" in conn.execute_command("CLUSTER", "INFO") for conn in conns):
            assert time.monotonic() < deadline, "the TLS cluster did not form"
            time.sleep(0.2)
        yield nodes
    finally:
        for node in nodes:
            node.close()


def test_a_tls_cluster_through_the_proxy(tmp_path, certs, tls_cluster):
    seeds = ",".join(f"rediss://127.0.0.1:{node.port}" for node in tls_cluster[:1])
    proxy = ProxyProcess(None, write_config(tmp_path, certs, auth_clients="no"), "--upstream-cluster", seeds)
    try:
        conn = client(proxy.port, certs)
        keys = [f"key:{i}" for i in range(60)]  # spread over the three masters
        for key in keys:
            assert conn.set(key, key) is True
        assert [value.decode() for value in conn.mget(keys)] == keys  # split over the nodes and joined
        per_node = [redis.Redis(port=node.port, ssl=True, ssl_ca_certs=certs.ca).dbsize() for node in tls_cluster]
        assert all(count > 0 for count in per_node) and sum(per_node) >= len(keys)
    finally:
        assert proxy.stop() == 0

"""`face: cluster` with ioredis's `Cluster` (Node.js), in front of the real 3-master cluster:
it discovers one node, the proxy, and its commands work unchanged (tests/clients/ioredis/cluster.js).
ioredis is installed by ./dev (`npm ci` in tests/clients/ioredis) where npm is; skipped, with the
reason, where node or that install is missing."""

import json
import os
import shutil
import subprocess

import pytest

from tests.cluster.start import proxy_for
from tests.servers import REPO

FOLDER = os.path.join(REPO, "tests", "clients", "ioredis")

pytestmark = [
    pytest.mark.skipif(shutil.which("node") is None, reason="ioredis tests need node on PATH"),
    pytest.mark.skipif(not os.path.isdir(os.path.join(FOLDER, "node_modules", "ioredis")),
                       reason="ioredis is not installed: npm ci in tests/clients/ioredis (./dev does it where npm is)"),
]


def test_ioredis_cluster_through_the_face(redis_cluster):
    proxy = proxy_for(redis_cluster, "--face", "cluster")
    try:
        done = subprocess.run(["node", "cluster.js", "127.0.0.1", str(proxy.port), "io"], cwd=FOLDER,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        out = json.loads(done.stdout)
        assert "error" not in out, out["error"]
        keys = [f"io:{i}" for i in range(40)]
        assert {redis_cluster.master_for_key(key).port for key in keys} == {m.port for m in redis_cluster.masters()}
        assert out["nodes"] == [f"127.0.0.1:{proxy.port}"]  # the proxy, and no real node
        assert out["slots"][0][:2] == [0, 16383] and out["slots"][0][2][:2] == ["127.0.0.1", proxy.port]
        assert out["get"] == [f"v-{key}" for key in keys]
        assert out["pipeline"] == [1] * len(keys)
        assert out["mget"] == [f"v-{key}" for key in keys]
        assert "cluster_enabled:1" in out["info"]
        assert out["message"] == "io-news:hello"
        assert out["scanned"] == sorted(keys + [f"{key}:n" for key in keys])  # each once
    finally:
        proxy.stop()

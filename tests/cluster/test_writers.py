"""The writers issue 14 found unchecked, through the proxy in front of a Redis Cluster: the
server-side checks (an EVAL declaring every key of the write) go to the keys' owner like the
write itself, and what they refuse is absent on that node."""

import time

import pytest
import redis

from tests.cluster.start import proxy_for
from tests.servers import exchange

POLICY = """
name: writers-cluster
rules:
  K6: {words: {string: string, hash: hash, list: list, set: set, zset: zset}, position: last}
  V1: {max_bytes: 10240}
  V2: {max_elements: 3, per_type: {}}
"""


@pytest.fixture(scope="module")
def writers(redis_cluster, tmp_path_factory):
    policy = tmp_path_factory.mktemp("writers") / "policy.yaml"
    policy.write_text(POLICY)
    process = proxy_for(redis_cluster, "--policy", str(policy))
    client = redis.Redis(port=process.port)
    yield client, process
    client.close()
    process.stop()


def refused(call, rule):
    with pytest.raises(redis.exceptions.NoPermissionError, match=rf"rule {rule}\b"):
        call()


def test_server_checked_writes_on_their_owner(writers, redis_cluster):
    client, _ = writers
    owner = redis_cluster.client(redis_cluster.master_for_key("{w}"))
    owner.delete("{w}:q", "{w}:a:set", "{w}:b:set", "{w}:u:set", "{w}:h:string", "{w}:c:hash", "{w}:ok:list")
    owner.rpush("{w}:q", "a", "b")
    refused(lambda: client.copy("{w}:q", "{w}:c:hash"), "K6")
    assert client.copy("{w}:q", "{w}:ok:list") is True and owner.llen("{w}:ok:list") == 2
    owner.sadd("{w}:a:set", 1, 2)
    owner.sadd("{w}:b:set", 3, 4)
    refused(lambda: client.sunionstore("{w}:u:set", "{w}:a:set", "{w}:b:set"), "V2")
    owner.pfadd("{w}:h:string", "a")
    refused(lambda: client.pfadd("{w}:h:string", *[f"v{i}" for i in range(3000)]), "V1")
    assert owner.exists("{w}:c:hash", "{w}:u:set") == 0 and owner.pfcount("{w}:h:string") == 1
    assert client.sunionstore("{w}:u:set", "{w}:a:set") == 2


def test_a_scripts_refusal_on_a_stream_is_counted(writers, redis_cluster):
    """On a stream in front of a cluster (the first seed's, for a keyless CLIENT REPLY ON), the
    server-side check's refusal is watched between two barriers, counted and logged, as standalone."""
    seed = redis_cluster.seeds.split(",")[0]
    tag = next(f"{{s{i}}}" for i in range(1000) if redis_cluster.master_for_key(f"{{s{i}}}").address == seed)
    owner = redis_cluster.client(redis_cluster.master_for_key(tag))
    owner.rpush(f"{tag}:q", "a", "b", "c", "d")
    _, process = writers
    before = process.log.count('"rule": "V2"')
    reply, closed = exchange(process.port, f"CLIENT REPLY ON\r\nCOPY {tag}:q {tag}:c:list\r\nPING\r\n".encode())
    assert (reply, closed) == (b"+OK\r\n-NOPERM key '" + tag.encode() + b":c:list' breaks rule V2 (collection size): "
                               b"keep lists at most 3 elements (it would hold 4)\r\n+PONG\r\n", False)
    assert owner.exists(f"{tag}:c:list") == 0
    deadline = time.monotonic() + 5
    while process.log.count('"rule": "V2"') == before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert process.log.count('"rule": "V2"') == before + 1

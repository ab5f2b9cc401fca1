"""The writers issue 14 found unchecked, through the proxy in front of a Redis Cluster: the
server-side checks (an EVAL declaring every key of the write) go to the keys' owner like the
write itself, and what they refuse is absent on that node."""

import pytest
import redis

from tests.cluster.start import proxy_for

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
    yield client
    client.close()
    process.stop()


def refused(call, rule):
    with pytest.raises(redis.exceptions.NoPermissionError, match=rf"rule {rule}\b"):
        call()


def test_server_checked_writes_on_their_owner(writers, redis_cluster):
    client = writers
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

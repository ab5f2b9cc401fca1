"""The writers issue 14 found unchecked, through a running proxy (standalone; the cluster's are in
tests/cluster/test_writers.py): each attempt is refused and its effect is absent on the server,
and the same writes within the rules go through."""

from __future__ import annotations

import pytest
import redis

from tests.servers import RedisServer, policy_proxy

POLICY = """
name: writers
rules:
  K6: {words: {string: string, hash: hash, list: list, set: set, zset: zset}, position: last}
  V1: {max_bytes: 10240}
  V2: {max_elements: 3, per_type: {}}
  C2: {allow: [RESTORE]}
"""


@pytest.fixture(scope="module")
def writers(tmp_path_factory):
    server = RedisServer()
    process = policy_proxy(tmp_path_factory.mktemp("writers"), POLICY, server.url)
    admin = redis.Redis(port=server.port)
    client = redis.Redis(port=process.port)
    yield client, admin
    client.close()
    admin.close()
    process.stop()
    server.close()


def refused(call, rule):
    with pytest.raises(redis.exceptions.NoPermissionError, match=rf"rule {rule}\b"):
        call()


def test_copy_rename_and_sort_store_keep_type_words(writers):
    client, admin = writers
    admin.flushall()
    admin.rpush("queue", "a", "b")
    refused(lambda: client.copy("queue", "cart:1:hash"), "K6")
    refused(lambda: client.rename("queue", "cart:1:zset"), "K6")
    refused(lambda: client.sort("queue", alpha=True, store="cart:2:hash"), "K6")
    assert admin.exists("cart:1:hash", "cart:1:zset", "cart:2:hash") == 0 and admin.llen("queue") == 2
    assert client.copy("queue", "cart:1:list") is True and admin.type("cart:1:list") == b"list"


def test_big_strings_through_bitfield_pfadd_and_restore(writers):
    client, admin = writers
    admin.flushall()
    refused(lambda: client.execute_command("BITFIELD", "flags:string", "SET", "u8", "#20000", "1"), "V1")
    assert admin.exists("flags:string") == 0
    admin.pfadd("visits:string", "a", "b")
    refused(lambda: client.pfadd("visits:string", *[f"v{i}" for i in range(3000)]), "V1")
    assert admin.pfcount("visits:string") == 2 and admin.strlen("visits:string") < 1000
    admin.set("big", "x" * 20000)
    payload = admin.dump("big")
    refused(lambda: client.restore("copy:string", 0, payload), "V1")
    assert admin.exists("copy:string") == 0


def test_store_destinations_stay_under_the_cap(writers):
    client, admin = writers
    admin.flushall()
    admin.sadd("a:set", 1, 2)
    admin.sadd("b:set", 3, 4)
    refused(lambda: client.sunionstore("u:set", "a:set", "b:set"), "V2")
    admin.zadd("z:zset", {"x": 1, "y": 2, "w": 3, "v": 4})
    refused(lambda: client.zrangestore("d:zset", "z:zset", 0, -1), "V2")
    admin.sadd("many", 1, 2, 3, 4)
    refused(lambda: client.restore("r:set", 0, admin.dump("many")), "V2")
    assert admin.exists("u:set", "d:zset", "r:set") == 0
    assert client.sunionstore("u:set", "a:set") == 2 and client.restore("r:set", 0, admin.dump("a:set")) == b"OK"
    assert admin.smembers("r:set") == {b"1", b"2"}

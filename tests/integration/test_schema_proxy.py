"""The key schema (K10) on live traffic: the proxy in front of a real redis-server.

What only a real server shows: a command of the wrong type is refused by the proxy before Redis
sees it (the key is not created, an existing value keeps its type, the client gets NOPERM rather
than WRONGTYPE), and the per-pattern TTL rule and limits reach Redis (TTLs set, the V2 script
counting against the pattern's cap).
"""

import pytest
import redis

from tests.servers import ProxyProcess, RedisServer, exchange

POLICY = """
name: schema
rules:
  K10: {strict: true}
  T1: {action: reject}
  T3: {min_ttl: 1, max_ttl: 86400}
  V1: {max_bytes: 1024}
  V2: {max_elements: 100}
schema:
  - key: "book:{id}"
    type: hash
    placeholders: {id: digits}
    ttl: none
    limits: {max_elements: 3}
  - key: "books:genre:{genre}"
    type: set
    placeholders: {genre: slug}
    ttl: none
  - key: "books:sales-rank"
    type: zset
    ttl: none
  - key: "session:{id}"
    type: string
    ttl: {min: 60, max: 3600}
    limits: {max_bytes: 16}
"""


@pytest.fixture(scope="module")
def server():
    process = RedisServer()
    yield process
    process.close()


@pytest.fixture(scope="module")
def proxy(server, tmp_path_factory):
    directory = tmp_path_factory.mktemp("schema")
    (directory / "policy.yaml").write_text(POLICY)
    config = directory / "config.yaml"
    config.write_text("policy: policy.yaml\n")
    process = ProxyProcess(server.url, str(config))
    yield process
    process.stop()


@pytest.fixture
def clients(server, proxy):
    direct = redis.Redis(port=server.port, decode_responses=True)
    direct.flushall()
    client = redis.Redis(port=proxy.port, decode_responses=True)
    yield client, direct
    client.close()
    direct.close()


def test_declared_keys_of_the_declared_type_pass(clients):
    client, direct = clients
    assert client.hset("book:1", mapping={"title": "Foundation", "author": "Asimov"}) == 2
    assert client.sadd("books:genre:sci-fiction", "book:1") == 1
    assert client.zadd("books:sales-rank", {"book:1": 1000}) == 1
    assert client.hget("book:1", "title") == "Foundation"
    assert direct.type("book:1") == "hash" and direct.ttl("book:1") == -1  # ttl: none, T1 exempts it
    assert client.delete("books:genre:sci-fiction") == 1  # generic commands are type-neutral


def test_strict_rejects_undeclared_keys(clients, proxy):
    client, direct = clients
    direct.set("legacy:1", "v")
    for call in (lambda: client.set("cache:1", "v"), lambda: client.get("legacy:1"),
                 lambda: client.delete("legacy:1"), lambda: client.hset("book:one", "f", "v")):
        with pytest.raises(redis.exceptions.NoPermissionError, match="rule K10 .*no pattern of the key schema"):
            call()
    assert direct.exists("cache:1", "book:one") == 0
    assert direct.get("legacy:1") == "v"
    reply, _ = exchange(proxy.port, b"HSET book:one f v\r\n")
    assert reply == (b"-NOPERM key 'book:one' breaks rule K10 (key schema): no pattern of the key schema "
                     b"matches it; the closest is 'book:{id}' (hash), but {id} must be digits, not 'one': "
                     b"name it after a declared pattern, or declare it under 'schema:'\r\n")


def test_wrong_type_is_rejected_before_redis(clients, proxy, server):
    client, direct = clients
    calls_before = direct.info("commandstats").get("cmdstat_set", {}).get("calls", 0)
    # a new key of the wrong type is not created
    with pytest.raises(redis.exceptions.NoPermissionError, match="SET is a string command but the schema "
                                                                  "declares 'book:\\{id\\}' a hash"):
        client.set("book:2", "v")
    assert direct.exists("book:2") == 0
    assert direct.info("commandstats").get("cmdstat_set", {}).get("calls", 0) == calls_before
    # an existing value keeps its type; the client gets NOPERM, not Redis's WRONGTYPE
    direct.hset("book:3", "title", "Dune")
    reply, _ = exchange(proxy.port, b"SADD book:3 x\r\nGET book:3\r\nHGET book:3 title\r\n")
    assert reply.startswith(b"-NOPERM key 'book:3' breaks rule K10 (key schema): SADD is a set command")
    assert reply.endswith(b"$4\r\nDune\r\n") and b"WRONGTYPE" not in reply
    assert reply.count(b"-NOPERM") == 2
    assert direct.type("book:3") == "hash"
    # a rename that would put a hash where a sorted set is documented
    with pytest.raises(redis.exceptions.NoPermissionError, match="rule K10"):
        client.rename("book:3", "books:sales-rank")
    assert direct.type("book:3") == "hash" and direct.exists("books:sales-rank") == 0


def test_wrong_type_inside_multi_aborts_exec(clients, proxy):
    _, direct = clients
    reply, _ = exchange(proxy.port, b"MULTI\r\nHSET book:4 t x\r\nSADD book:4 y\r\nEXEC\r\n")
    assert reply.startswith(b"+OK\r\n+QUEUED\r\n-NOPERM key 'book:4' breaks rule K10")
    assert reply.endswith(b"-EXECABORT Transaction discarded because of previous errors.\r\n")
    assert direct.exists("book:4") == 0


def test_ttl_rule_per_pattern(clients):
    client, direct = clients
    with pytest.raises(redis.exceptions.NoPermissionError, match="rule T1"):
        client.set("session:1", "v")  # the pattern requires a TTL
    with pytest.raises(redis.exceptions.NoPermissionError,
                       match=r"rule T3 .*between 1 min and 1 h \(schema pattern 'session:\{id\}'\) \(got 30 s\)"):
        client.set("session:1", "v", ex=30)
    with pytest.raises(redis.exceptions.NoPermissionError, match="rule T3"):
        client.set("session:1", "v", ex=7200)  # within T3's own bounds, not the pattern's
    assert direct.exists("session:1") == 0
    assert client.set("session:1", "v", ex=600) is True
    assert 590 <= direct.ttl("session:1") <= 600
    with pytest.raises(redis.exceptions.NoPermissionError, match="rule T1"):  # T3 would too
        client.persist("session:1")
    assert direct.ttl("session:1") > 0


def test_limits_per_pattern(clients):
    client, direct = clients
    with pytest.raises(redis.exceptions.NoPermissionError, match=r"rule V1 .*at most 16 bytes \(schema pattern"):
        client.set("session:2", "x" * 17, ex=60)  # V1's own limit is 1024
    assert client.set("session:2", "x" * 16, ex=60) is True
    # APPEND is checked by the server-side script, with the pattern's limit (its EXPIRE for T1)
    pipe = client.pipeline(transaction=False)
    pipe.append("session:2", "y")
    pipe.expire("session:2", 60)
    appended, expired = pipe.execute(raise_on_error=False)
    assert isinstance(appended, redis.exceptions.ResponseError)
    assert "rule V1" in str(appended) and "APPEND would make it 17 bytes" in str(appended)
    assert expired is True
    assert direct.get("session:2") == "x" * 16
    assert client.hset("book:5", mapping={"a": 1, "b": 2, "c": 3}) == 3
    with pytest.raises(redis.exceptions.NoPermissionError, match=r"rule V2 .*at most 3 elements \(schema pattern"):
        client.hset("book:5", "d", 4)  # V2's own cap is 100
    assert client.hset("book:5", "a", 10) == 0  # nothing new: passes
    assert direct.hgetall("book:5") == {"a": "10", "b": "2", "c": "3"}

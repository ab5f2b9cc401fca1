"""Through the proxy with no rules, clients see exactly what Redis would have answered."""

import asyncio
import threading
import time

import pytest
import redis
import redis.asyncio

from tests.servers import exchange


@pytest.mark.parametrize("protocol", [2, 3])
def test_basic_commands_match_direct(redis_server, proxy, protocol):
    direct = redis.Redis(port=redis_server.port, protocol=protocol)
    through = redis.Redis(port=proxy.port, protocol=protocol)
    through.flushall()
    through.set("basic:str", "v")
    through.hset("basic:hash", mapping={"a": "1", "b": "2"})
    through.zadd("basic:zset", {"m": 1.5})
    for call in (
        lambda c: c.get("basic:str"),
        lambda c: c.hgetall("basic:hash"),
        lambda c: c.zrange("basic:zset", 0, -1, withscores=True),
        lambda c: c.exists("basic:str", "basic:none"),
        lambda c: c.type("basic:hash"),
        lambda c: c.ttl("basic:str"),
    ):
        assert call(through) == call(direct)
    with pytest.raises(redis.ResponseError) as through_err:
        through.incr("basic:str")
    with pytest.raises(redis.ResponseError) as direct_err:
        direct.incr("basic:str")
    assert str(through_err.value) == str(direct_err.value)


def test_replies_are_byte_exact(redis_server, proxy):
    """Status vs bulk, RESP3 maps/sets/doubles/booleans/verbatim: hiredis would blur these."""
    payload = (
        b"*4\r\n$3\r\nDEL\r\n$8\r\nexact:h1\r\n$8\r\nexact:z1\r\n$8\r\nexact:k1\r\n"
        b"*3\r\n$3\r\nSET\r\n$8\r\nexact:k1\r\n$2\r\nOK\r\n"
        b"*2\r\n$3\r\nGET\r\n$8\r\nexact:k1\r\n"
        b"*2\r\n$5\r\nHELLO\r\n$1\r\n3\r\n"
        b"*4\r\n$4\r\nHSET\r\n$8\r\nexact:h1\r\n$1\r\nf\r\n$1\r\nv\r\n"
        b"*2\r\n$7\r\nHGETALL\r\n$8\r\nexact:h1\r\n"
        b"*4\r\n$4\r\nZADD\r\n$8\r\nexact:z1\r\n$3\r\n1.5\r\n$1\r\nm\r\n"
        b"*3\r\n$6\r\nZSCORE\r\n$8\r\nexact:z1\r\n$1\r\nm\r\n"
        b"*3\r\n$9\r\nSISMEMBER\r\n$8\r\nexact:s1\r\n$1\r\nm\r\n"
        b"*5\r\n$6\r\nZRANGE\r\n$8\r\nexact:z1\r\n$1\r\n0\r\n$2\r\n-1\r\n$10\r\nWITHSCORES\r\n"
        b"*3\r\n$6\r\nLPUSHX\r\n$8\r\nexact:l1\r\n$1\r\nx\r\n"
        b"*2\r\n$3\r\nDEL\r\n$8\r\nexact:k1\r\n"
    )
    exchange(redis_server.port, payload)  # same starting state for the two runs compared
    through, _ = exchange(proxy.port, payload)
    direct, _ = exchange(redis_server.port, payload)
    # The HELLO reply carries the connection id; everything else must be identical.
    strip = lambda data: data.replace(data[data.index(b"id\r\n"):data.index(b"$4\r\nmode")], b"")
    assert strip(through) == strip(direct)
    assert b"%" in through and b",1.5\r\n" in through


def test_many_clients_pipelines_every_reply_to_its_sender(proxy):
    """Concurrent pipelining clients on shared upstream connections never get another's reply."""
    errors = []

    def worker(n: int):
        client = redis.Redis(port=proxy.port)
        try:
            for round_ in range(20):
                pipe = client.pipeline(transaction=False)
                for i in range(25):
                    pipe.set(f"pipe:{n}:{i}", f"{n}-{round_}-{i}")
                    pipe.get(f"pipe:{n}:{i}")
                    pipe.echo(f"echo-{n}-{round_}-{i}")
                    pipe.incr(f"pipe:counter:{n}")
                results = pipe.execute()
                for i in range(25):
                    ok, value, echo, count = results[4 * i: 4 * i + 4]
                    expected = f"{n}-{round_}-{i}".encode()
                    if not (ok is True and value == expected and echo == f"echo-{n}-{round_}-{i}".encode()
                            and count == round_ * 25 + i + 1):
                        errors.append((n, round_, i, results[4 * i: 4 * i + 4]))
        except Exception as exc:  # pragma: no cover - reported below
            errors.append((n, repr(exc)))
        finally:
            client.close()

    client = redis.Redis(port=proxy.port)
    client.delete(*[f"pipe:counter:{n}" for n in range(16)])
    threads = [threading.Thread(target=worker, args=(n,)) for n in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors, errors[:5]


@pytest.mark.parametrize("protocol", [2, 3])
def test_asyncio_clients(proxy, protocol):
    async def main():
        clients = [redis.asyncio.Redis(port=proxy.port, protocol=protocol) for _ in range(10)]
        try:
            async def one(n, client):
                for i in range(50):
                    await client.set(f"aio:{n}:{i}", i)
                    assert int(await client.get(f"aio:{n}:{i}")) == i
            await asyncio.gather(*(one(n, c) for n, c in enumerate(clients)))
        finally:
            for client in clients:
                await client.aclose()
    asyncio.run(main())


def test_transactions(via_proxy, direct):
    via_proxy.delete("tx:a", "tx:b")
    pipe = via_proxy.pipeline(transaction=True)
    pipe.set("tx:a", 1).incr("tx:a").set("tx:b", "x")
    assert pipe.execute() == [True, 2, True]
    assert direct.get("tx:a") == b"2"
    # WATCH: a write from another client aborts the transaction.
    with via_proxy.pipeline() as pipe:
        pipe.watch("tx:a")
        direct.set("tx:a", 100)
        pipe.multi()
        pipe.incr("tx:a")
        with pytest.raises(redis.WatchError):
            pipe.execute()
    assert direct.get("tx:a") == b"100"
    # An error inside MULTI gives EXECABORT, as from Redis.
    raw = b"MULTI\r\nSET tx:c 1\r\nNOSUCHCMD\r\nEXEC\r\n"
    assert exchange(via_proxy.connection_pool.connection_kwargs["port"], raw)[0] == \
        exchange(direct.connection_pool.connection_kwargs["port"], raw)[0]


def test_pubsub_through_proxy(proxy, via_proxy):
    sub = via_proxy.pubsub()
    sub.subscribe("chan:one")
    sub.psubscribe("pat:*")
    assert sub.get_message(timeout=2)["type"] == "subscribe"
    assert sub.get_message(timeout=2)["type"] == "psubscribe"
    publisher = redis.Redis(port=proxy.port)
    assert publisher.publish("chan:one", "hello") == 1
    assert publisher.publish("pat:x", "world") == 1
    got = [sub.get_message(timeout=2) for _ in range(2)]
    assert [m["data"] for m in got] == [b"hello", b"world"]
    sub.unsubscribe("chan:one")
    assert sub.get_message(timeout=2)["type"] == "unsubscribe"
    sub.close()
    publisher.close()


def test_resp3_push_messages(proxy):
    client = redis.Redis(port=proxy.port, protocol=3)
    sub = client.pubsub()
    sub.subscribe("push:chan")
    assert sub.get_message(timeout=2)["type"] == "subscribe"
    # On RESP3 the subscribed connection still answers ordinary commands.
    sub.ping()
    redis.Redis(port=proxy.port).publish("push:chan", "p1")
    messages = [sub.get_message(timeout=2) for _ in range(2)]
    assert {m["type"] for m in messages if m} >= {"message"}
    sub.close()
    client.close()


def test_blocking_pop_does_not_block_others(proxy, via_proxy):
    via_proxy.delete("block:list")
    result = {}

    def blocked():
        client = redis.Redis(port=proxy.port)
        result["value"] = client.blpop(["block:list"], timeout=5)
        client.close()

    thread = threading.Thread(target=blocked)
    thread.start()
    time.sleep(0.2)
    started = time.monotonic()
    assert via_proxy.ping() is True  # shared connections are not held by the blocked client
    assert time.monotonic() - started < 0.5
    via_proxy.rpush("block:list", "item")
    thread.join(5)
    assert result["value"] == (b"block:list", b"item")


def test_blmove_and_xread_block(proxy, via_proxy):
    via_proxy.delete("bl:src", "bl:dst", "bl:stream")
    out = {}

    def waiters():
        client = redis.Redis(port=proxy.port)
        out["move"] = client.blmove("bl:src", "bl:dst", 5, "LEFT", "RIGHT")
        out["xread"] = client.xread({"bl:stream": "$"}, block=5000)
        client.close()

    thread = threading.Thread(target=waiters)
    thread.start()
    time.sleep(0.2)
    via_proxy.rpush("bl:src", "a")
    time.sleep(0.2)
    via_proxy.xadd("bl:stream", {"f": "v"})
    thread.join(10)
    assert out["move"] == b"a"
    assert out["xread"][0][0] == b"bl:stream"


def test_select_uses_the_right_database(proxy, redis_server):
    client = redis.Redis(port=proxy.port, db=3)
    client.set("db:key", "in-three")
    direct3 = redis.Redis(port=redis_server.port, db=3)
    direct0 = redis.Redis(port=redis_server.port, db=0)
    assert direct3.get("db:key") == b"in-three"
    assert direct0.get("db:key") is None
    with pytest.raises(redis.ResponseError, match="DB index is out of range"):
        client.execute_command("SELECT", 99)
    assert client.get("db:key") == b"in-three"  # a failed SELECT changes nothing
    # Another client in db 0 in the same moment still sees db 0.
    assert redis.Redis(port=proxy.port).get("db:key") is None


def test_connection_state_commands(proxy):
    client = redis.Redis(port=proxy.port)
    client.client_setname("guard-test")
    assert client.client_getname() == "guard-test"
    ident = client.client_id()
    info = client.client_info()
    assert info["name"] == "guard-test" and int(info["id"]) == ident
    hello = client.execute_command("HELLO", "3")
    assert hello[b"proto"] == 3 if isinstance(hello, dict) else True
    assert client.execute_command("RESET") in (b"RESET", "RESET")
    client.close()


def test_wait_and_quit(proxy):
    client = redis.Redis(port=proxy.port)
    client.set("wait:k", 1)
    assert client.execute_command("WAIT", 0, 0) == 0
    data, closed = exchange(proxy.port, b"PING\r\nQUIT\r\nPING\r\n")
    assert data == b"+PONG\r\n+OK\r\n" and closed

"""CONFIG SET requirepass through the proxy in front of one server: refused with its reason (the
proxy's own new connections would get NOAUTH on BLPOP, MULTI...); any other CONFIG SET passes."""

import pytest
import redis

from tests.servers import exchange_batches


def test_config_set_requirepass_is_refused_and_the_proxy_keeps_working(own_redis, own_proxy):
    client = redis.Redis(port=own_proxy.port, socket_timeout=10)
    direct = redis.Redis(port=own_redis.port)
    for args in (("requirepass", "secret"), ("maxmemory-samples", "6", "RequirePass", "secret")):
        with pytest.raises(redis.ResponseError, match="requirepass is refused by Redis Guard"):
            client.execute_command("CONFIG", "SET", *args)
    assert direct.config_get("requirepass")["requirepass"] == ""
    assert direct.config_get("maxmemory-samples")["maxmemory-samples"] == "5"  # all or nothing, as Redis
    assert client.config_set("maxmemory-samples", "7") is True
    assert direct.config_get("maxmemory-samples")["maxmemory-samples"] == "7"
    # In MULTI: refused at once, and EXEC aborts, as after a command Redis refused to queue.
    replies = exchange_batches(own_proxy.port, [b"MULTI\r\n", b"CONFIG SET requirepass x\r\n", b"EXEC\r\n"])
    assert replies[0][0] == b"+OK\r\n"
    assert replies[1][0].startswith(b"-ERR CONFIG SET requirepass is refused by Redis Guard")
    assert replies[2][0].startswith(b"-EXECABORT")
    # The proxy's new connections still log in: a blocking command and a transaction.
    assert client.blpop(["rp:list"], timeout=0.1) is None
    pipe = client.pipeline(transaction=True)
    pipe.set("rp:k", "1").get("rp:k")
    assert pipe.execute() == [True, b"1"]
    client.close()
    direct.close()

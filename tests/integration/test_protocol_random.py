"""Malformed requests at random: the proxy answers what redis-server answers, byte for byte, and
closes the connection when it does. Each case is a few valid requests (RESP and inline) with random
damage: a token put in or swapped in (`*`, `$`, CRLF, lone CR or LF, signs, quotes, NUL, a huge
count), bytes cut out, the tail cut off, a byte changed, a stretch repeated. It goes on a new
connection to the proxy and the same bytes to a second redis-server directly; each case writes only
its own keys, so both servers go through the same states. The table in `test_protocol.py` holds the
cases worth naming; this finds the ones nobody named. Seeded: set RG_PROTOCOL_SEED to replay a
failure (the seed is in every failure message); RG_PROTOCOL_CASES sets the number of cases.
"""

import os
import random
import re
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.servers import PASSTHROUGH, ProxyProcess, RedisServer, exchange

CASES = int(os.environ.get("RG_PROTOCOL_CASES", "300"))
TOKENS = [b"*", b"$", b"\r\n", b"\n", b"\r", b"-1", b"0", b"1", b"2", b"10", b"-", b"+", b":", b" ", b'"', b"'",
          b"\\", b"\x00", b"99999999999", b"*0\r\n", b"$0\r\n\r\n"]
# HELLO (the word "hello" cut loose from an ECHO) answers with the connection's id, which is the
# proxy's own numbering for its clients, not the server's.
HELLO_ID = re.compile(rb"\$2\r\nid\r\n:\d+\r\n|\+id\r\n:\d+\r\n")


def resp(*args) -> bytes:
    out = b"*%d\r\n" % len(args)
    for arg in args:
        arg = arg if isinstance(arg, bytes) else str(arg).encode()
        out += b"$%d\r\n%s\r\n" % (len(arg), arg)
    return out


def requests(rng: random.Random, case: int) -> bytes:
    key, hkey = b"rp:%d:k" % case, b"rp:%d:h" % case
    pieces = [
        resp("PING"), resp("PING", "x"), resp("ECHO", "hello"), resp("ECHO", ""), resp("ECHO", "x" * rng.choice([1, 100, 5000])),
        resp("SET", key, "v1"), resp("SET", key, "v2", "XX"), resp("GET", key), resp("GET", b"rp:none"),
        resp("MGET", key, b"rp:none"), resp("EXISTS", key), resp("STRLEN", key), resp("TYPE", key),
        resp("GETRANGE", key, 0, 1), resp("HSET", hkey, "f", "v"), resp("HGET", hkey, "f"),
        b"PING\r\n", b"ECHO hi\r\n", b"GET " + key + b"\r\n", b'ECHO "a b"\r\n',
    ]
    return b"".join(rng.choice(pieces) for _ in range(rng.randint(1, 6)))


def damage(rng: random.Random, data: bytes) -> bytes:
    data = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        if not data:
            data += rng.choice(TOKENS)
            continue
        at, kind = rng.randrange(len(data)), rng.random()
        if kind < 0.3:
            data[at:at + 1] = rng.choice(TOKENS)
        elif kind < 0.5:
            data[at:at] = rng.choice(TOKENS)
        elif kind < 0.65:
            del data[at:at + rng.randint(1, 8)]
        elif kind < 0.8:
            del data[at:]
        elif kind < 0.9:
            data[at] = rng.randrange(256)
        else:
            data[at:at] = data[at:at + rng.randint(1, 20)]
    return bytes(data)


def payload(seed: int, case: int) -> bytes:
    rng = random.Random(seed * 1_000_003 + case)
    return damage(rng, requests(rng, case))


def test_damage_is_deterministic_and_varied():
    assert payload(7, 3) == payload(7, 3)
    assert len({payload(7, case) for case in range(50)}) == 50


@pytest.fixture(scope="module", params=["compiled", "pure"])
def pair(request):
    """A proxy in front of one server, and a second server for the same bytes directly."""
    behind, reference = RedisServer(), RedisServer()
    proxy = ProxyProcess(behind.url, PASSTHROUGH, env={"REDIS_GUARD_PURE_PYTHON": "1"} if request.param == "pure" else {})
    expected = ("hot path pure Python" if request.param == "pure" else
                "hot path compiled" if os.environ.get("REDIS_GUARD_EXPECT_COMPILED") else "hot path ")
    assert expected in proxy.log, proxy.log
    yield proxy, reference
    proxy.stop()
    behind.close()
    reference.close()


def test_damaged_requests_get_what_redis_gives(pair):
    proxy, reference = pair
    seed = int(os.environ.get("RG_PROTOCOL_SEED") or random.SystemRandom().randrange(1, 10**9))

    def one(case: int):
        data = payload(seed, case)
        direct, through = exchange(reference.port, data), exchange(proxy.port, data)
        return case, data, (HELLO_ID.sub(b"", direct[0]), direct[1]), (HELLO_ID.sub(b"", through[0]), through[1])

    with ThreadPoolExecutor(16) as pool:
        for case, data, direct, through in pool.map(one, range(CASES)):
            assert through == direct, (f"case {case} (seed {seed}: RG_PROTOCOL_SEED={seed} to replay): {data!r}\n"
                                       f"direct {direct!r}\nproxy  {through!r}")
    assert proxy.process.poll() is None

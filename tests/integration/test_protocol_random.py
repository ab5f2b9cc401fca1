"""Malformed requests at random: the proxy answers what redis-server answers, byte for byte, and
closes the connection when it does. Each case is a few valid requests with random damage
(`tests/resp/damage.py`). It goes on a new connection to the proxy and the same bytes to a second
redis-server directly; each case writes only its own keys, so both servers go through the same
states. The table in `test_protocol.py` holds the cases worth naming; this finds the ones nobody
named. Seeded: set RG_PROTOCOL_SEED to replay a failure (the seed is in every failure message);
RG_PROTOCOL_CASES sets the number of cases.
"""

import os
import random
import re
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.resp.damage import payload
from tests.servers import PASSTHROUGH, ProxyProcess, RedisServer, exchange

CASES = int(os.environ.get("RG_PROTOCOL_CASES", "300"))
# HELLO (the word "hello" cut loose from an ECHO) answers with the connection's id, which is the
# proxy's own numbering for its clients, not the server's.
HELLO_ID = re.compile(rb"\$2\r\nid\r\n:\d+\r\n|\+id\r\n:\d+\r\n")


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


def compare_damaged(proxy, reference_port: int, normalize, streams: bool = False) -> None:
    """Every damaged case on a new connection to the proxy and to the reference server, 16 at a time;
    the replies (after `normalize`) and whether the connection was closed must be the same. With
    `streams`, cases also subscribe, unpair replies with CLIENT REPLY and QUIT."""
    seed = int(os.environ.get("RG_PROTOCOL_SEED") or random.SystemRandom().randrange(1, 10**9))

    def one(case: int):
        data = payload(seed, case, streams)
        direct, through = exchange(reference_port, data), exchange(proxy.port, data)
        return case, data, (normalize(direct[0]), direct[1]), (normalize(through[0]), through[1])

    with ThreadPoolExecutor(16) as pool:
        for case, data, direct, through in pool.map(one, range(CASES)):
            assert through == direct, (f"case {case} (seed {seed}: RG_PROTOCOL_SEED={seed} to replay): {data!r}\n"
                                       f"direct {direct!r}\nproxy  {through!r}")
    assert proxy.process.poll() is None


def test_damaged_requests_get_what_redis_gives(pair):
    proxy, reference = pair
    compare_damaged(proxy, reference.port, lambda reply: HELLO_ID.sub(b"", reply), streams=True)

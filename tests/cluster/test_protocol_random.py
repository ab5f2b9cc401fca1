"""Malformed requests at random through the proxy in front of a Redis Cluster (3 masters x 1 replica),
as installed and in pure Python: `tests/integration/test_protocol_random.py`'s damaged requests,
whose commands land on different masters, so that a protocol error or a cut-off request falls
after runs in flight to several of them. The same bytes go to a standalone redis-server directly:
every command of a case is a single-key one or an `MGET` the proxy splits by slot, so a standalone
server's replies are the expected ones, in order, followed by the same error and the same close.
Replay a failure with RG_PROTOCOL_SEED; RG_PROTOCOL_CASES sets the number of cases.
"""

import re

import pytest

from tests.cluster.start import proxy_for
from tests.integration.test_protocol_random import compare_damaged
from tests.servers import RedisServer, exchange, exchange_batches

# HELLO's map says which server and connection answered: the proxy's client id and, here, which
# node; its place among the replies is what is compared.
# (modules: none on 7.0; Redis 8 lists its built-in vectorset, each module's map ending with its args)
MODULES = rb"modules\r\n\*\d+\r\n(?:[*%]\d+\r\n.*?args\r\n\*0\r\n)*"
HELLO = re.compile(rb"%7\r\n.*?\+" + MODULES + rb"|\*14\r\n.*?\$7\r\n" + MODULES, re.S)


@pytest.fixture(scope="module", params=["compiled", "pure"])
def pair(redis_cluster, request):
    for master in redis_cluster.masters():  # each mode from empty masters, as its reference starts
        redis_cluster.command(master, "FLUSHALL")
    proxy = proxy_for(redis_cluster, env={"REDIS_GUARD_PURE_PYTHON": "1"} if request.param == "pure" else {})
    reference = RedisServer()
    yield proxy, reference
    proxy.stop()
    reference.close()


def test_damaged_requests_get_what_redis_gives(pair):
    proxy, reference = pair
    compare_damaged(proxy, reference.port, lambda reply: HELLO.sub(b"HELLO", reply))


@pytest.mark.parametrize("request_bytes", [
    # Found by the test above: a bulk ended by two bytes that are not CRLF, then an inline command
    # (the reader's ends for it counted from the wrong place). The stretch sent nothing for `-1` and
    # waited for a reply, so the next reply on that master's connection went to this client.
    b"*4\r\n$4\r\nHSET\r\n$8\r\nrp:816:h\r\n$1\r\nf\r\n$1\r\nv\r\r-1\nf",
    b"*2\r\n$3\r\nGET\r\n$1\r\na\r\r-1\nGET b\nGET c\n",
], ids=["hset then inline", "get then inline gets"])
def test_a_request_after_a_bulk_ended_by_any_two_bytes_keeps_its_place(pair, request_bytes):
    proxy, reference = pair
    assert exchange(proxy.port, request_bytes) == exchange(reference.port, request_bytes)
    for key in (b"a", b"b", b"c"):  # each on a new connection: a reply owed to nobody would land here
        assert exchange(proxy.port, b"ECHO " + key + b"\r\n") == (b"$1\r\n" + key + b"\r\n", False)


# (name, the client's requests, each sent when the reply before it came). Worth naming:
NAMED = [
    # Once replies are no longer paired with requests, QUIT and a protocol error go to the server,
    # which answers what came before them first (session/streamorder.py).
    ("subscribe then quit", [b"SUBSCRIBE rp:ch\r\nQUIT\r\n"]),
    ("subscribe then malformed", [b"SUBSCRIBE rp:ch\r\nPING\r\n*1\r\n$x\r\n"]),
    ("replies on then quit", [b"CLIENT REPLY ON\r\nPING\r\nQUIT\r\n"]),
    ("reset with an argument", [b"RESET x\r\nPING\r\n"]),
    ("reset on a stream", [b"CLIENT REPLY ON\r\nSUBSCRIBE rp:ch\r\nRESET\r\nPING\r\nQUIT\r\n"]),
    # Until a transaction's first key the proxy queues its commands itself: what Redis refuses
    # instead of queueing (and fails the transaction for) gets Redis's own error.
    ("multi, unknown command", [b"MULTI\r\nNOSUCH a\r\nEXEC\r\n"]),
    ("multi, wrong arity", [b"MULTI\r\nGET\r\nPING\r\nEXEC\r\n"]),
    ("multi, unknown subcommand", [b"MULTI\r\nCLIENT NOSUCH\r\nDISCARD\r\n"]),
    ("multi, keyless then keyed", [b"MULTI\r\nPING\r\nSET rp:{t}:k 1\r\nEXEC\r\n"]),
    ("multi, a command at a time", [b"MULTI\r\n", b"NOSUCH\r\n", b"ECHO\r\n", b"PING\r\n", b"SET rp:{t}:k 1\r\n",
                                    b"EXEC\r\n", b"GET rp:{t}:k\r\n"]),
]


@pytest.mark.parametrize("batches", [case[1] for case in NAMED], ids=[case[0] for case in NAMED])
def test_named_cases_get_what_redis_gives(pair, batches):
    proxy, reference = pair
    assert exchange_batches(proxy.port, batches) == exchange_batches(reference.port, batches)

"""The errors the proxy composes when an upstream fails name no address (issue 52: the upstream's
address is operator configuration, kept for the log), whatever the upstream (one server, a
Sentinel's master, a cluster node) and however the failure's reason printed it; their first words
(`ERR upstream ...`) are kept, and a redirection the proxy cannot follow becomes TRYAGAIN."""

import pytest

from proxy import errors
from proxy.backends.cluster.redirected import command_of, unredirected

REASONS = [
    ("127.0.0.1:7001", "Connect call failed ('127.0.0.1', 7001)"),
    ("[::1]:7001", "Multiple exceptions: [Errno 111] Connect call failed ('::1', 7001, 0, 0), "
                   "[Errno 111] Connect call failed ('127.0.0.1', 7001)"),
    ("redis-a.internal:6379", "Connect call failed ('10.0.0.7', 6379)"),
    ("redis-a.internal:6379", "no connection to redis-a.internal:6379"),
    ("10.0.0.7:6379", "[Errno 104] Connection reset by peer"),
    ("sentinel mymaster", "no master confirmed after 10s"),
]


@pytest.mark.parametrize("address, reason", REASONS)
def test_no_address_in_upstream_errors(address, reason):
    unavailable = errors.upstream_unavailable(address, reason)
    lost = errors.upstream_lost(address, reason)
    assert unavailable.startswith(b"-ERR upstream unavailable: ")
    assert lost.startswith(b"-ERR upstream connection lost before the reply (")
    for reply in (unavailable, lost):
        for named in (address, "7001", "6379", "10.0.0.7", "127.0.0.1", "::1"):
            if named != "sentinel mymaster":
                assert named.encode() not in reply, (named, reply)
        assert reply.endswith(b"\r\n") and reply.count(b"\r\n") == 1


def test_reasons_without_address_are_kept():
    assert errors.upstream_lost("10.0.0.7:6379", "[Errno 104] Connection reset by peer") == (
        b"-ERR upstream connection lost before the reply ([Errno 104] Connection reset by peer); "
        b"the command may or may not have run\r\n")
    assert errors.upstream_unavailable("10.0.0.7:6379", "connect timed out after 2s") == \
        b"-ERR upstream unavailable: connect timed out after 2s\r\n"


def test_a_redirection_not_followed_becomes_tryagain():
    args = command_of(b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n")
    assert args == [b"GET", b"k"]
    for reply in (b"-MOVED 3999 127.0.0.1:7002\r\n", b"-ASK 3999 127.0.0.1:7002\r\n"):
        replaced = unredirected(reply, args)
        assert replaced.startswith(b"-TRYAGAIN GET: its key's slot is moving") and b"7002" not in replaced
    assert unredirected(b"$1\r\nv\r\n", args) == b"$1\r\nv\r\n"
    assert command_of(b"not a request") == []

"""Damaged requests, seeded: a few valid requests (RESP and inline) with random damage: a token
put in or swapped in (`*`, `$`, CRLF, lone CR or LF, signs, quotes, NUL, a huge count), bytes cut
out, the tail cut off, a byte changed, a stretch repeated. Used byte for byte against the request
reader (`tests/resp/test_reader_damage.py`) and against redis-server through the proxy
(`tests/integration/test_protocol_random.py`, `tests/cluster/test_protocol_random.py`). Each case
writes only its own keys (`rp:<case>:...`), so cases may run at once on one server."""

import random

TOKENS = [b"*", b"$", b"\r\n", b"\n", b"\r", b"-1", b"0", b"1", b"2", b"10", b"-", b"+", b":", b" ", b'"', b"'",
          b"\\", b"\x00", b"99999999999", b"*0\r\n", b"$0\r\n\r\n", b"%1\r\n", b"~1\r\n"]


def resp(*args) -> bytes:
    out = b"*%d\r\n" % len(args)
    for arg in args:
        arg = arg if isinstance(arg, bytes) else str(arg).encode()
        out += b"$%d\r\n%s\r\n" % (len(arg), arg)
    return out


def requests(rng: random.Random, case: int, streams: bool = False) -> bytes:
    """A few valid requests; with `streams`, some that unpair replies from requests (pub/sub,
    CLIENT REPLY) and QUIT, whose replies the proxy must keep in order on a raw stream, and
    CLIENT TRACKING, whose pushes it must keep in place among paired replies."""
    key, hkey = b"rp:%d:k" % case, b"rp:%d:h" % case
    pieces = [
        resp("PING"), resp("PING", "x"), resp("ECHO", "hello"), resp("ECHO", ""), resp("ECHO", "x" * rng.choice([1, 100, 5000])),
        resp("SET", key, "v1"), resp("SET", key, "v2", "XX"), resp("GET", key), resp("GET", b"rp:none"),
        resp("MGET", key, b"rp:none"), resp("EXISTS", key), resp("STRLEN", key), resp("TYPE", key),
        resp("GETRANGE", key, 0, 1), resp("HSET", hkey, "f", "v"), resp("HGET", hkey, "f"),
        b"PING\r\n", b"ECHO hi\r\n", b"GET " + key + b"\r\n", b'ECHO "a b"\r\n',
    ]
    if streams:
        # Not CLIENT REPLY OFF or SKIP: whether Redis then closes after a protocol error depends on
        # whether it has other replies to write in the same loop turn, which the proxy changes
        # (the commands before a stream went on another connection).
        # Nor UNSUBSCRIBE from every channel: two servers list the channels in different orders.
        # CLIENT TRACKING in RESP3: the client's own writes of a key it read invalidate it, a push
        # among the replies where the server writes it.
        pieces += [resp("SUBSCRIBE", b"rp:%d:ch" % case), resp("RESET"), b"QUIT\r\n", b"CLIENT REPLY ON\r\n",
                   resp("HELLO", 3) + resp("CLIENT", "TRACKING", "ON")]
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


def payload(seed: int, case: int, streams: bool = False) -> bytes:
    rng = random.Random(seed * 1_000_003 + case)
    return damage(rng, requests(rng, case, streams))

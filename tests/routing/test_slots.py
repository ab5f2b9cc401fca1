"""hash_slot and key_hash_tag: the reference vectors, the hash-tag rule, and Redis's own
CLUSTER KEYSLOT (a real cluster-enabled server when there is one, a table taken from one
when there is not)."""

import random
from binascii import crc_hqx

import pytest

from proxy.backends.cluster.routing.slots import SLOT_COUNT, common_slot, hash_slot, key_hash_tag, pattern_slot

from .raw_client import Conn


def test_crc16_reference_vector() -> None:
    # The check value of CRC-16/XMODEM, the variant Redis uses (cluster spec, crc16.c).
    assert crc_hqx(b"123456789", 0) == 0x31C3
    assert hash_slot(b"123456789") == 0x31C3 % SLOT_COUNT == 12739


# (key, hash tag or None): Redis Cluster spec, "Hash tags", and the edges of the rule.
TAG_CASES = [
    (b"{user1000}.following", b"user1000"),
    (b"{user1000}.followers", b"user1000"),
    (b"foo{}{bar}", None),  # first '{' is followed by '}': the whole key
    (b"foo{{bar}}zap", b"{bar"),
    (b"foo{bar}{zap}", b"bar"),
    (b"foo", None),
    (b"", None),
    (b"{", None),
    (b"}", None),
    (b"}{", None),
    (b"}{a}", b"a"),
    (b"{}", None),
    (b"{}}", None),
    (b"{{}}", b"{"),
    (b"{a}", b"a"),
    (b"a{b", None),
    (b"a{b}", b"b"),
    (b"{ }", b" "),
    (b"x{\x00\xff}y", b"\x00\xff"),
    ("{ключ}:1".encode(), "ключ".encode()),
]


@pytest.mark.parametrize(("key", "tag"), TAG_CASES, ids=[repr(k) for k, _ in TAG_CASES])
def test_hash_tag(key: bytes, tag: bytes | None) -> None:
    assert key_hash_tag(key) == tag
    assert hash_slot(key) == crc_hqx(key if tag is None else tag, 0) % SLOT_COUNT


@pytest.mark.parametrize(("a", "b"), [
    (b"{user1000}.following", b"{user1000}.followers"),
    (b"foo{bar}{zap}", b"bar"),
    (b"foo{{bar}}zap", b"{bar"),
    (b"foo{}{bar}", b"foo{}{bar}"),
    (b"{a}1", b"a"),
])
def test_same_slot(a: bytes, b: bytes) -> None:
    assert hash_slot(a) == hash_slot(b)


def test_hashes_whole_key_without_a_tag() -> None:
    assert hash_slot(b"foo{}{bar}") != hash_slot(b"bar")
    assert hash_slot(b"foo{}{bar}") == crc_hqx(b"foo{}{bar}", 0) % SLOT_COUNT


def test_common_slot() -> None:
    assert common_slot([b"{u}a", b"{u}b", b"u"]) == hash_slot(b"u")
    assert common_slot([b"a", b"b"]) is None
    assert common_slot([]) is None
    assert common_slot([b"a"]) == hash_slot(b"a")


# Keys compared with CLUSTER KEYSLOT: ASCII, hash tags and their edges, binary, UTF-8.
KEYSLOT_KEYS: list[bytes] = [
    b"", b"a", b"foo", b"bar", b"123456789", b"user:1000", b"user:1000:profile",
    b"{user1000}.following", b"{user1000}.followers", b"foo{}{bar}", b"foo{{bar}}zap",
    b"foo{bar}{zap}", b"{", b"}", b"{}", b"}{", b"{}}", b"{{}}", b"{a}", b"a{b", b"a{b}c",
    b"{ }", b"x" * 1000, b"key with spaces", b"tab\there", b"line\r\nbreak", b"\x00",
    b"\x00\x01\x02\xff", b"\xff" * 16, b"{\x00}\xff", bytes(range(256)), b"\x80\x81{\xfe}",
    "é".encode(), "日本語のキー".encode(), "ключ:{пользователь}".encode(), "🔑".encode(),
    "emoji:{🚀}:launch".encode(), "café{crème}".encode(), "Ω≈ç√∫".encode(), "{}日本".encode(),
    b"session:abc123", b"cart:{42}:items", b"cart:{42}:total", b"rate-limit:10.0.0.1",
    b"queue:jobs:pending", b"lock:{order:7}", b"-1", b"0", b"9223372036854775807", b"*",
]

# A sample of KEYSLOT_KEYS with the slot redis-server 7.0.15 gave (test_keyslot_table_offline
# runs without a server; test_keyslot_against_server checks these values too).
KEYSLOT_TABLE: list[tuple[bytes, int]] = [
    (b"", 0),
    (b"123456789", 12739),
    (b"{user1000}.following", 3443),
    (b"{user1000}.followers", 3443),
    (b"foo{}{bar}", 8363),
    (b"foo{{bar}}zap", 4015),
    (b"foo{bar}{zap}", 5061),
    (b"\x00\x01\x02\xff", 4002),
    (b"{\x00}\xff", 0),
    ("日本語のキー".encode(), 6977),
    ("ключ:{пользователь}".encode(), 13798),
    ("emoji:{🚀}:launch".encode(), 11757),
    ("café{crème}".encode(), 13773),
    (b"cart:{42}:items", 8000),
    (b"queue:jobs:pending", 553),
]


@pytest.mark.parametrize(("key", "slot"), KEYSLOT_TABLE, ids=[repr(k) for k, _ in KEYSLOT_TABLE])
def test_keyslot_table_offline(key: bytes, slot: int) -> None:
    assert hash_slot(key) == slot


def _keyslots(conn: Conn, keys: list[bytes]) -> list[int]:
    return [int(reply[1:-2]) for reply in conn.raw(*(("CLUSTER", "KEYSLOT", k) for k in keys))]


def test_keyslot_against_server(lone_node) -> None:
    with Conn(lone_node.port) as conn:
        theirs = _keyslots(conn, KEYSLOT_KEYS)
    assert [hash_slot(k) for k in KEYSLOT_KEYS] == theirs
    assert {k: s for k, s in zip(KEYSLOT_KEYS, theirs)}.items() >= set(KEYSLOT_TABLE)


def test_random_keys_against_server(lone_node) -> None:
    rng = random.Random(20240607)
    alphabet = b"{}ab\x00\xff:"
    keys = [bytes(rng.choice(alphabet) for _ in range(rng.randrange(0, 12))) for _ in range(3000)]
    keys += [rng.randbytes(rng.randrange(0, 64)) for _ in range(1000)]
    with Conn(lone_node.port) as conn:
        theirs = _keyslots(conn, keys)
    mismatches = [(k, hash_slot(k), s) for k, s in zip(keys, theirs) if hash_slot(k) != s]
    assert mismatches == []


# (KEYS pattern, the key whose slot every match shares, or None when matches may span slots).
PATTERN_CASES = [
    (b"{rg02}:?", b"{rg02}"),  # the tag comes before any glob character
    (b"{user1000}*", b"{user1000}"),
    (b"pre{user1000}.f*", b"{user1000}"),
    (b"foo{{bar}}*", b"{{bar}"),  # the tag is `{bar`, as for a key
    (b"user:1", b"user:1"),  # no glob character: one key
    (b"{}foo", b"{}foo"),  # one key, hashed whole
    (b"*", None),
    (b"user:*", None),
    (b"*{user1000}", None),  # a match may have a '{' before this one
    (b"{user?}", None),  # the glob is inside the tag
    (b"[ab]{x}", None),
    (b"\\*{x}", None),  # an escape: not worked out (Redis does not either)
    (b"{}{x}*", None),  # '{}' first: matches are hashed whole
    (b"{x*", None),  # no '}' before the glob
]


@pytest.mark.parametrize("pattern,key", PATTERN_CASES)
def test_pattern_slot(pattern, key) -> None:
    assert pattern_slot(pattern) == (None if key is None else hash_slot(key))


@pytest.mark.parametrize("pattern", [p for p, key in PATTERN_CASES if key is not None and (b"*" in p or b"?" in p)])
def test_every_key_a_pattern_matches_is_in_its_slot(pattern) -> None:
    """Keys made from the pattern (each `*` some bytes, braces among them, each `?` one byte)."""
    chooser = random.Random(17)
    alphabet = b"ab{}:*?"
    for _ in range(200):
        key = b"".join(bytes(chooser.choice(alphabet) for _ in range(chooser.randrange(6))) if byte == 42
                       else bytes([chooser.choice(alphabet)]) if byte == 63 else bytes([byte]) for byte in pattern)
        assert hash_slot(key) == pattern_slot(pattern), key

"""Hash slots: which of Redis Cluster's 16384 slots a key belongs to.

Theory of operation
-------------------
Redis Cluster hashes a key with CRC16-CCITT (XMODEM: polynomial 0x1021, initial value 0)
modulo 16384. That is exactly ``binascii.crc_hqx(data, 0)`` from the standard library,
so there is no CRC code here (redis-py's ``crc.py`` does the same).

What is hashed is the key's *hash tag* when it has one (src/cluster.c, ``keyHashSlot``):
the bytes between the first ``{`` and the first ``}`` after it, provided at least one
byte lies between them. Otherwise the whole key is hashed:

    ``{user1000}.following``  hashes ``user1000``
    ``foo{}{bar}``            hashes the whole key (the first ``{`` is followed by ``}``)
    ``foo{{bar}}zap``         hashes ``{bar``
    ``foo{bar}{zap}``         hashes ``bar``

A KEYS pattern names one slot when every key it can match has the same hash tag
(``pattern_slot``): its first ``{`` and the first ``}`` after it, with something between
them, come before any glob character (``*``, ``?``, ``[``) or escape (``\\``), so every match
starts with those same bytes; or it has no glob character or escape at all, so it matches one
key. Anything else may match keys of any slot.
"""

from __future__ import annotations

from binascii import crc_hqx
from collections.abc import Iterable

__all__ = ["SLOT_COUNT", "common_slot", "hash_slot", "key_hash_tag", "pattern_slot"]

SLOT_COUNT = 16384


def key_hash_tag(key: bytes) -> bytes | None:
    """The hash tag of ``key`` (the non-empty bytes inside its first ``{...}``), or None."""
    start = key.find(b"{")
    if start < 0:
        return None
    end = key.find(b"}", start + 1)
    if end <= start + 1:  # no '}' after the '{' (-1), or '{}' with nothing inside
        return None
    return key[start + 1 : end]


def hash_slot(key: bytes) -> int:
    """The cluster slot of ``key``: CRC16 of its hash tag (or of the whole key) mod 16384."""
    start = key.find(b"{")
    if start >= 0:
        end = key.find(b"}", start + 1)
        if end > start + 1:
            return crc_hqx(key[start + 1 : end], 0) % SLOT_COUNT
    return crc_hqx(key, 0) % SLOT_COUNT


def common_slot(keys: Iterable[bytes]) -> int | None:
    """The slot all ``keys`` share, None when they span several slots (or there are none)."""
    slot = None
    for key in keys:
        this = hash_slot(key)
        if slot is None:
            slot = this
        elif this != slot:
            return None
    return slot


GLOB = frozenset(b"*?[\\")


def pattern_slot(pattern: bytes) -> int | None:
    """The one slot every key matching the glob ``pattern`` hashes to, or None when keys of
    several slots may match it."""
    start = -1  # where the first '{' is; -2 once it is known that matching keys have no tag
    for at, byte in enumerate(pattern):
        if byte in GLOB:
            return None
        if byte == 123 and start == -1:  # the first '{'
            start = at
        elif byte == 125 and start >= 0:  # the first '}' after it
            if at == start + 1:
                start = -2  # '{}': matching keys are hashed whole
            else:
                return crc_hqx(pattern[start + 1 : at], 0) % SLOT_COUNT
    return hash_slot(pattern)  # no glob character: the pattern is the one key it matches

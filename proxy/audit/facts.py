"""A key's facts and the commands that learn them, in two pipelined passes per batch of keys.

Pass one asks every key `TYPE`, `PTTL` and `MEMORY USAGE`; pass two, knowing the type, asks its
size command (`STRLEN`, `HLEN`, `LLEN`, `SCARD`, `ZCARD`, `XLEN`) and, for strings when V4 is
checked, `GETRANGE key 0 n-1` (the value's first n bytes). The size commands per collection
type are V2's (`FAMILIES`); a module type has no size command. Requests are built as one bytes
object per pass and replies are read in the order they were asked; nothing here does I/O.

A key deleted between SCAN and TYPE answers `none` and is dropped (counted as vanished). A key
deleted between the passes keeps the facts of pass one, with length 0.
"""

from __future__ import annotations

from hiredis import ReplyError, pack_command

from ..policy.rules.v2_cardinality import FAMILIES

SIZE_COMMANDS: dict[str, bytes] = {
    "string": b"STRLEN",
    **{kind: command for kind, command, _ in FAMILIES.values()},
    "stream": b"XLEN",
}


class KeyFacts:
    """What the audit knows about one key. `ttl_ms` is PTTL's answer (-1: no TTL); `memory` is
    MEMORY USAGE in bytes (None: not known); `length` is STRLEN for a string, the element count
    of a collection (None: a module type); `sample` the first bytes of a string (or None)."""

    __slots__ = ("key", "type", "ttl_ms", "memory", "length", "sample")

    def __init__(self, key: bytes, type: str, ttl_ms: int = -1, memory: int | None = None,
                 length: int | None = None, sample: bytes | None = None):
        self.key = key
        self.type = type
        self.ttl_ms = ttl_ms
        self.memory = memory
        self.length = length
        self.sample = sample

    def __repr__(self) -> str:
        return (f"KeyFacts({self.key!r}, {self.type!r}, ttl_ms={self.ttl_ms}, memory={self.memory}, "
                f"length={self.length}, sample={self.sample!r})")


class FactsQuery:
    """The two passes for one batch of keys. `first()` is the request of pass one (3 replies per
    key); `read_first(replies)` keeps the keys that still exist; `second()` is the request of
    pass two and `second_count` its number of replies; `read_second(replies)` completes the facts."""

    PER_KEY = 3

    def __init__(self, keys: list[bytes], memory_samples: int = 5, string_sample: int = 0):
        self.keys = keys
        self.samples = str(memory_samples).encode()
        self.sample_end = str(string_sample - 1).encode() if string_sample > 0 else None
        self.facts: list[KeyFacts] = []
        self.vanished = 0
        self.errors: list[str] = []
        self.second_count = 0

    def first(self) -> bytes:
        samples = self.samples
        return b"".join(
            pack_command((b"TYPE", key)) + pack_command((b"PTTL", key))
            + pack_command((b"MEMORY", b"USAGE", key, b"SAMPLES", samples))
            for key in self.keys)

    def read_first(self, replies: list) -> list[KeyFacts]:
        facts = self.facts
        for at, key in enumerate(self.keys):
            kind, ttl, memory = replies[3 * at: 3 * at + 3]
            if isinstance(kind, ReplyError):
                self.errors.append(f"TYPE {key!r}: {kind}")
                continue
            if kind == b"none":
                self.vanished += 1
                continue
            facts.append(KeyFacts(key, kind.decode("ascii", "replace"),
                                  ttl if isinstance(ttl, int) else -1,
                                  memory if isinstance(memory, int) else None))
        return facts

    def second(self) -> bytes:
        parts = []
        count = 0
        sample_end = self.sample_end
        for fact in self.facts:
            command = SIZE_COMMANDS.get(fact.type)
            if command is None:
                continue
            parts.append(pack_command((command, fact.key)))
            count += 1
            if sample_end is not None and command == b"STRLEN":
                parts.append(pack_command((b"GETRANGE", fact.key, b"0", sample_end)))
                count += 1
        self.second_count = count
        return b"".join(parts)

    def read_second(self, replies: list) -> list[KeyFacts]:
        at = 0
        sample_end = self.sample_end
        for fact in self.facts:
            command = SIZE_COMMANDS.get(fact.type)
            if command is None:
                continue
            length = replies[at]
            at += 1
            fact.length = length if isinstance(length, int) else 0
            if sample_end is not None and command == b"STRLEN":
                sample = replies[at]
                at += 1
                fact.sample = sample if isinstance(sample, bytes) else b""
        return self.facts

"""The audit report: counts per rule, per namespace, the biggest keys, the size and TTL
distributions, and recommendations.

`Report.add(facts, findings)` is called once per key; everything it keeps is bounded whatever
the keyspace: per rule a count and its `top` biggest offenders, per namespace (the key's first
segment; keys without the delimiter share one) its keys, memory, counts and `top` biggest
offenders, up to `MAX_NAMESPACES` namespaces (the others are counted together), the `top` biggest
keys, a histogram of MEMORY USAGE in power-of-two buckets per type, keys and memory per TTL group
(`TTL_GROUPS`), and per recommendation (`recommend.GROUPS`) the keys it concerns. A key's size,
for ranking, is its MEMORY USAGE, else its length. `to_dict()` is the report as plain data: what
`--json` writes, what `--compare` reads back, and what the terminal and HTML renderers read.
Counts of a rule are keys, not findings: a key breaks a rule once.
"""

from __future__ import annotations

import bisect
import heapq
import itertools

from ..policy.loader import REGISTRY  # every rule, registered by the loader, in rule order
from .recommend import GROUPS, recommendations

MAX_NAMESPACES = 10000
NO_NAMESPACE = "(no namespace)"
OTHER_NAMESPACES = "(other namespaces)"
HOUR_MS = 3_600_000
TTL_BOUNDS = (HOUR_MS, 24 * HOUR_MS, 7 * 24 * HOUR_MS)  # the upper ends of the TTL groups after "no TTL"
TTL_GROUPS = ("no TTL", "< 1 h", "< 1 day", "< 1 week", "longer")
RULE_ORDER = {rule: at for at, rule in enumerate(["O1", *REGISTRY])}


def decoded(key: bytes) -> str:
    return key.decode("utf-8", "backslashreplace")


class _Top:
    """The `size` largest items by weight; ties keep the first seen."""

    __slots__ = ("size", "heap", "counter", "floor")

    def __init__(self, size: int):
        self.size = size
        self.heap: list = []
        self.counter = itertools.count()
        self.floor = -1  # callers skip `add` for a weight not above it: the common case is cheap

    def add(self, weight: int, item) -> None:
        entry = (weight, -next(self.counter), item)
        if len(self.heap) < self.size:
            heapq.heappush(self.heap, entry)
        elif entry > self.heap[0]:
            heapq.heapreplace(self.heap, entry)
        if len(self.heap) == self.size:
            self.floor = self.heap[0][0]

    def items(self) -> list:
        return [item for _, _, item in sorted(self.heap, reverse=True)]


class _Namespace:
    __slots__ = ("keys", "memory", "with_findings", "rules", "worst")

    def __init__(self, top: int):
        self.keys = 0
        self.memory = 0
        self.with_findings = 0
        self.rules: dict[str, int] = {}
        self.worst = _Top(top)


class Report:
    def __init__(self, top: int = 10, delimiter: bytes = b":", meta: dict | None = None):
        self.top = top
        self.delimiter = delimiter
        self.meta = dict(meta or {})
        self.scanned = 0
        self.vanished = 0
        self.with_findings = 0
        self.memory = 0
        self.types: dict[str, int] = {}
        self.rules: dict[str, int] = {}
        self.titles: dict[str, str] = {}
        self.offenders: dict[str, _Top] = {}
        self.namespaces: dict[bytes, _Namespace] = {}
        self.biggest = _Top(top)
        self.histogram: dict[int, dict[str, int]] = {}
        self.ttls = [[0, 0] for _ in TTL_GROUPS]  # per TTL group: keys, memory
        self.groups = {code: 0 for codes in GROUPS.values() for code in codes}  # recommendation -> keys
        self.errors: list[str] = []

    def namespace_of(self, key: bytes) -> bytes | None:
        head, sep, _ = key.partition(self.delimiter)
        return head if sep else None

    def add(self, facts, findings) -> None:
        self.scanned += 1
        kind = facts.type
        types = self.types
        types[kind] = types.get(kind, 0) + 1
        memory = facts.memory
        size = memory if memory is not None else (facts.length or 0)
        if memory is not None:
            self.memory += memory
            bucket = self.histogram.get(memory.bit_length())
            if bucket is None:
                bucket = self.histogram[memory.bit_length()] = {}
            bucket[kind] = bucket.get(kind, 0) + 1
        ttl = facts.ttl_ms
        group = self.ttls[0 if ttl < 0 else 1 + bisect.bisect_right(TTL_BOUNDS, ttl)]
        group[0] += 1
        group[1] += memory or 0
        key = facts.key
        if size > self.biggest.floor:
            self.biggest.add(size, (key, kind, memory, facts.length, facts.ttl_ms))
        name = self.namespace_of(key)
        space = self.namespaces.get(name)
        if space is None:
            if len(self.namespaces) >= MAX_NAMESPACES:
                name = OTHER_NAMESPACES.encode()
                space = self.namespaces.get(name)
            if space is None:
                space = self.namespaces[name] = _Namespace(self.top)
        space.keys += 1
        if memory is not None:
            space.memory += memory
        if not findings:
            return
        self.with_findings += 1
        space.with_findings += 1
        rules = self.rules
        seen = set()
        for finding in findings:
            rule = finding.rule
            if rule in seen:
                continue
            seen.add(rule)
            rules[rule] = rules.get(rule, 0) + 1
            space.rules[rule] = space.rules.get(rule, 0) + 1
            top = self.offenders.get(rule)
            if top is None:
                top = self.offenders[rule] = _Top(self.top)
                self.titles[rule] = finding.title
            if size > top.floor:
                top.add(size, (key, size, finding))  # its advice is read for the top ones only
        if size > space.worst.floor:
            space.worst.add(size, (key, size, tuple(seen)))
        groups = self.groups
        for code in {code for rule in seen for code in GROUPS.get(rule, ())}:
            groups[code] += 1

    def add_vanished(self, count: int) -> None:
        self.vanished += count

    # -- as data ------------------------------------------------------------------------------

    def to_dict(self) -> dict:
        rules = {}
        for rule in sorted(self.rules, key=lambda r: RULE_ORDER.get(r, len(RULE_ORDER))):
            rules[rule] = {
                "title": self.titles[rule],
                "keys": self.rules[rule],
                "top": [{"key": decoded(key), "size": size, "detail": finding.advice}
                        for key, size, finding in self.offenders[rule].items()],
            }
        spaces = sorted(self.namespaces.items(), key=lambda item: (-item[1].with_findings, -item[1].keys,
                                                                   item[0] or b""))
        namespaces = [{
            "namespace": NO_NAMESPACE if name is None else decoded(name),
            "keys": space.keys,
            "memory": space.memory,
            "keys_with_findings": space.with_findings,
            "rules": dict(sorted(space.rules.items(), key=lambda r: RULE_ORDER.get(r[0], 99))),
            "top": [{"key": decoded(key), "size": size, "rules": sorted(found, key=lambda r: RULE_ORDER.get(r, 99))}
                    for key, size, found in space.worst.items()],
        } for name, space in spaces]
        histogram = [{
            "min_bytes": (1 << (bits - 1)) if bits else 0,
            "max_bytes": (1 << bits) - 1,
            "keys": dict(sorted(counts.items())),
        } for bits, counts in sorted(self.histogram.items())]
        ttls = [{"ttl": name, "keys": keys, "memory": memory} for name, (keys, memory) in zip(TTL_GROUPS, self.ttls)]
        data = {
            **self.meta,
            "keys": {
                "scanned": self.scanned,
                "vanished": self.vanished,
                "with_findings": self.with_findings,
                "memory_bytes": self.memory,
                "by_type": dict(sorted(self.types.items())),
            },
            "rules": rules,
            "namespaces": namespaces,
            "biggest": [{"key": decoded(key), "type": kind, "memory": memory, "length": length,
                         "ttl_ms": ttl} for key, kind, memory, length, ttl in self.biggest.items()],
            "size_histogram": histogram,
            "ttl_distribution": ttls,
            "errors": self.errors[:100],
        }
        data["recommendations"] = recommendations(data, self.groups)
        return data

"""The keyspace as a bounded trie of segments, fed one key at a time (streaming: a key is read
once and forgotten), with what the draft needs to know at each leaf.

A key is split at the delimiter (detected from the first `DETECT` keys, which are held until
then); each segment goes to a child of the current node: the child of its class when it is a
variable part (`segments.Classifier`: digits, UUID, hash...), else the child of its literal text.
A node keeps at most `LITERALS_MAX` literal children: past that, the position is variable (user
names, slugs) and they are merged into one wildcard child (`collapse`), which takes every later
literal there too. The whole trie keeps at most `nodes_max` nodes: past that, the node with the
most literal children is collapsed. So memory is bounded whatever the keyspace, and each key costs
one walk down its segments.

A leaf (`Leaf`) counts, for the keys ending there: their types (with examples of each), TTLs
(with and without, the range, examples of keys without), sizes per type in power-of-two buckets
(count, min, max and examples per bucket, so that a few keys far above the rest can be told from
the bulk), key lengths, the bytes their names use, and which letter cases and word joiners every
one of their names follows (the candidate K2 / K5 rules, tested as the names arrive). No I/O here.
"""

from __future__ import annotations

from ..policy.base import Settings
from ..policy.rules.k2_case import LetterCase
from ..policy.rules.k5_joiner import JOINERS, Joiner
from .segments import Classifier, detect_delimiter, is_slug

DETECT = 2000  # keys held to choose the delimiter
LITERALS_MAX = 32  # literal children of one node before the position is taken as variable
NODES_MAX = 20000
MAX_SEGMENTS = 16  # deeper keys keep the rest as their last segment
EXAMPLES = 3
STYLES = ("lowercase", "camelCase", "PascalCase", "UPPERCASE")
LOWER_STYLES = ("lowercase", "camelCase")


class Bucket:
    __slots__ = ("count", "low", "high", "examples")

    def __init__(self):
        self.count = 0
        self.low = None
        self.high = 0
        self.examples: list[tuple[bytes, int]] = []

    def add(self, size: int, key: bytes) -> None:
        self.count += 1
        if self.low is None or size < self.low:
            self.low = size
        if size > self.high:
            self.high = size
        if len(self.examples) < EXAMPLES:
            self.examples.append((key, size))

    def merge(self, other: Bucket) -> None:
        self.count += other.count
        if other.low is not None and (self.low is None or other.low < self.low):
            self.low = other.low
        self.high = max(self.high, other.high)
        self.examples.extend(other.examples[:EXAMPLES - len(self.examples)])


class Leaf:
    """What is known of the keys whose segments end at one node."""

    __slots__ = ("count", "types", "type_examples", "with_ttl", "ttl_low", "ttl_high", "ttl_examples",
                 "ttl_types", "no_ttl_examples", "sizes", "memory", "length_low", "length_high", "chars", "firsts",
                 "styles", "joiners")

    def __init__(self, checks):
        self.count = 0
        self.types: dict[str, int] = {}
        self.type_examples: dict[str, list[bytes]] = {}
        self.with_ttl = 0
        self.ttl_low = None  # ms
        self.ttl_high = 0
        self.ttl_examples: list[tuple[bytes, int]] = []
        self.ttl_types: dict[str, int] = {}  # keys with a TTL, per type
        self.no_ttl_examples: dict[str, list[bytes]] = {}
        self.sizes: dict[str, dict[int, Bucket]] = {}
        self.memory = 0
        self.length_low = None
        self.length_high = 0
        self.chars = b""
        self.firsts = b""  # the first bytes of the names
        self.styles = list(checks.styles)  # (style, fullmatch) still followed by every name
        self.joiners = list(checks.joiners)

    def add(self, key: bytes, kind: str, ttl_ms: int, length: int | None, memory: int | None) -> None:
        self.count += 1
        types = self.types
        if kind in types:
            types[kind] += 1
            examples = self.type_examples[kind]
            if len(examples) < EXAMPLES:
                examples.append(key)
        else:
            types[kind] = 1
            self.type_examples[kind] = [key]
        if ttl_ms >= 0:
            self.with_ttl += 1
            if self.ttl_low is None or ttl_ms < self.ttl_low:
                self.ttl_low = ttl_ms
            if ttl_ms > self.ttl_high:
                self.ttl_high = ttl_ms
            if len(self.ttl_examples) < EXAMPLES:
                self.ttl_examples.append((key, ttl_ms))
            self.ttl_types[kind] = self.ttl_types.get(kind, 0) + 1
        else:
            examples = self.no_ttl_examples.get(kind)
            if examples is None:
                self.no_ttl_examples[kind] = [key]
            elif len(examples) < EXAMPLES:
                examples.append(key)
        if length is not None:
            buckets = self.sizes.get(kind)
            if buckets is None:
                buckets = self.sizes[kind] = {}
            index = length.bit_length()
            bucket = buckets.get(index)
            if bucket is None:
                bucket = buckets[index] = Bucket()
            bucket.add(length, key)
        if memory:
            self.memory += memory
        size = len(key)
        if self.length_low is None or size < self.length_low:
            self.length_low = size
        if size > self.length_high:
            self.length_high = size
        rest = key.translate(None, self.chars)
        if rest:
            self.chars = bytes(sorted(set(self.chars + rest)))
        if key[:1] not in self.firsts:
            self.firsts += key[:1]
        styles = self.styles
        if styles:
            if key.islower() and b"_" not in key:
                # lower case letters, no '_': lowercase and camelCase hold, PascalCase and UPPERCASE
                # do not (a segment begins with a lower-case letter): no regex needed
                if len(styles) > 2 or styles[-1][0] not in LOWER_STYLES:
                    self.styles = [entry for entry in styles if entry[0] in LOWER_STYLES]
            else:
                self.styles = [entry for entry in styles if entry[1](key) is not None]
        if self.joiners and (b"_" in key or b"-" in key or b"." in key):  # else one word a segment: holds
            self.joiners = [entry for entry in self.joiners if entry[1](key) is not None]

    @property
    def no_ttl(self) -> int:
        return self.count - self.with_ttl

    def major_type(self) -> str:
        return max(self.types, key=lambda kind: (self.types[kind], kind))

    def merge(self, other: Leaf) -> None:
        self.count += other.count
        for kind, count in other.types.items():
            self.types[kind] = self.types.get(kind, 0) + count
            mine = self.type_examples.setdefault(kind, [])
            mine.extend(other.type_examples[kind][:EXAMPLES - len(mine)])
        self.with_ttl += other.with_ttl
        if other.ttl_low is not None and (self.ttl_low is None or other.ttl_low < self.ttl_low):
            self.ttl_low = other.ttl_low
        self.ttl_high = max(self.ttl_high, other.ttl_high)
        self.ttl_examples.extend(other.ttl_examples[:EXAMPLES - len(self.ttl_examples)])
        for kind, count in other.ttl_types.items():
            self.ttl_types[kind] = self.ttl_types.get(kind, 0) + count
        for kind, examples in other.no_ttl_examples.items():
            mine = self.no_ttl_examples.setdefault(kind, [])
            mine.extend(examples[:EXAMPLES - len(mine)])
        for kind, buckets in other.sizes.items():
            mine = self.sizes.setdefault(kind, {})
            for index, bucket in buckets.items():
                if index in mine:
                    mine[index].merge(bucket)
                else:
                    mine[index] = bucket
        self.memory += other.memory
        if other.length_low is not None and (self.length_low is None or other.length_low < self.length_low):
            self.length_low = other.length_low
        self.length_high = max(self.length_high, other.length_high)
        self.chars = bytes(sorted(set(self.chars + other.chars)))
        self.firsts = bytes(sorted(set(self.firsts + other.firsts)))
        names = {style for style, _ in other.styles}
        self.styles = [entry for entry in self.styles if entry[0] in names]
        names = {joiner for joiner, _ in other.joiners}
        self.joiners = [entry for entry in self.joiners if entry[0] in names]


class Values:
    """The literal values a wildcard position took: how many, whether all were slugs, examples."""

    __slots__ = ("count", "slugs", "examples")

    def __init__(self):
        self.count = 0
        self.slugs = True
        self.examples: list[bytes] = []

    def add(self, value: bytes) -> None:
        self.count += 1
        if self.slugs and not is_slug(value):
            self.slugs = False
        if len(self.examples) < EXAMPLES and value not in self.examples:
            self.examples.append(value)

    def merge(self, other: Values) -> None:
        self.count += other.count
        self.slugs = self.slugs and other.slugs
        for value in other.examples:
            if len(self.examples) < EXAMPLES and value not in self.examples:
                self.examples.append(value)


class Node:
    __slots__ = ("literals", "classes", "wild", "leaf", "values")

    def __init__(self):
        self.literals: dict[bytes, Node] = {}
        self.classes: dict[str, Node] = {}
        self.wild: Node | None = None
        self.leaf: Leaf | None = None
        self.values: Values | None = None  # on a wildcard node: the values it stands for

    def size(self) -> int:
        """Nodes in this subtree."""
        total, stack = 0, [self]
        while stack:
            node = stack.pop()
            total += 1
            stack.extend(node.literals.values())
            stack.extend(node.classes.values())
            if node.wild is not None:
                stack.append(node.wild)
        return total

    def merge(self, other: Node, checks) -> None:
        """Fold `other`'s subtree into this one."""
        if other.leaf is not None:
            if self.leaf is None:
                self.leaf = other.leaf
            else:
                self.leaf.merge(other.leaf)
        if other.values is not None:
            if self.values is None:
                self.values = other.values
            else:
                self.values.merge(other.values)
        for cls, child in other.classes.items():
            mine = self.classes.get(cls)
            if mine is None:
                self.classes[cls] = child
            else:
                mine.merge(child, checks)
        if other.wild is not None:
            self.take_wild(other.wild, checks)
        for value, child in other.literals.items():
            self.add_literal(value, child, checks)

    def take_wild(self, wild: Node, checks) -> None:
        if self.wild is None:
            self.wild = Node()
            self.wild.values = Values()
            for value, child in list(self.literals.items()):
                self.wild.values.add(value)
                self.wild.merge(child, checks)
            self.literals.clear()
        self.wild.merge(wild, checks)

    def add_literal(self, value: bytes, child: Node, checks) -> None:
        if self.wild is not None:
            self.wild.values.add(value)
            self.wild.merge(child, checks)
            return
        mine = self.literals.get(value)
        if mine is None:
            self.literals[value] = child
        else:
            mine.merge(child, checks)
        if len(self.literals) > LITERALS_MAX:
            self.collapse(checks)

    def collapse(self, checks) -> None:
        """This position is variable: its literal children become one wildcard child."""
        wild = Node()
        wild.values = Values()
        self.take_wild(wild, checks)


class Checks:
    """The candidate naming rules tested on every name: K2 styles and K5 joiners for a delimiter."""

    def __init__(self, delimiter: str):
        self.styles = tuple((style, LetterCase(Settings("K2", {"style": style, "delimiter": delimiter}))._full)
                            for style in STYLES)
        self.joiners = tuple((joiner, Joiner(Settings("K5", {"joiner": joiner, "delimiter": delimiter}))._full)
                             for joiner in JOINERS if joiner != delimiter)


class KeyspaceModel:
    """Feed `add(key, type, ttl_ms, length, memory)` for every key, then `finish()` once."""

    def __init__(self, delimiter: str | None = None, nodes_max: int = NODES_MAX):
        self.delimiter = delimiter
        self.nodes_max = nodes_max
        self.root = Node()
        self.nodes = 1
        self.keys = 0
        self.memory = 0
        self.collapses = 0
        self._held: list | None = [] if delimiter is None else None
        if delimiter is not None:
            self._start(delimiter)

    def _start(self, delimiter: str) -> None:
        self.delimiter = delimiter
        self._split = delimiter.encode()
        self.classify = Classifier(delimiter)
        self.checks = Checks(delimiter)

    def add(self, key: bytes, kind: str, ttl_ms: int = -1, length: int | None = None,
            memory: int | None = None) -> None:
        held = self._held
        if held is not None:
            held.append((key, kind, ttl_ms, length, memory))
            if len(held) >= DETECT:
                self._release()
            return
        self._add(key, kind, ttl_ms, length, memory)

    def _release(self) -> None:
        held, self._held = self._held, None
        self._start(detect_delimiter(item[0] for item in held))
        for item in held:
            self._add(*item)

    def _add(self, key, kind, ttl_ms, length, memory) -> None:
        self.keys += 1
        if memory:
            self.memory += memory
        node = self.root
        classify = self.classify
        for segment in key.split(self._split, MAX_SEGMENTS - 1):
            cls = classify(segment)
            if cls is not None:
                child = node.classes.get(cls)
                if child is None:
                    child = node.classes[cls] = Node()
                    self.nodes += 1
            else:
                child = node.literals.get(segment)
                if child is None:
                    wild = node.wild
                    if wild is not None:
                        wild.values.add(segment)
                        child = wild
                    else:
                        child = node.literals[segment] = Node()
                        self.nodes += 1
                        if len(node.literals) > LITERALS_MAX:
                            self._collapse(node)
                            child = node.wild
            node = child
        leaf = node.leaf
        if leaf is None:
            leaf = node.leaf = Leaf(self.checks)
        leaf.add(key, kind, ttl_ms, length, memory)
        if self.nodes > self.nodes_max:
            self._shrink()

    def _collapse(self, node: Node) -> None:
        node.collapse(self.checks)
        self.collapses += 1
        self.nodes = self.root.size()

    def _shrink(self) -> None:
        """Over `nodes_max`: collapse the node with the most literal children until under it."""
        while self.nodes > self.nodes_max:
            widest, stack = None, [self.root]
            while stack:
                node = stack.pop()
                if node.literals and (widest is None or len(node.literals) > len(widest.literals)):
                    widest = node
                stack.extend(node.literals.values())
                stack.extend(node.classes.values())
                if node.wild is not None:
                    stack.append(node.wild)
            if widest is None or len(widest.literals) < 2:
                return
            self._collapse(widest)

    def finish(self) -> None:
        """The held keys are placed (a keyspace smaller than DETECT keys)."""
        if self._held is not None:
            self._release()

"""One key segment classified: a variable part (a number, a UUID, a hex hash, a date, an e-mail,
an IPv4 address, a random token) or a literal word, and the regexes the draft constrains each
class with.

The classes are tried in `ORDER`; the regexes of digits, uuid, date, hex, email and ipv4 are
disjoint by construction (hex needs a letter and a digit and has no '-', a date is 10 bytes with
'-', a UUID 36...), so sibling placeholders of these classes never overlap. `token` (16+ letters,
digits, '_' or '-' with both a letter and a digit) can overlap uuid and hex, and a collapsed
literal position overlaps anything: the draft excludes their earlier siblings explicitly.
`detect_delimiter` picks the level separator from a sample of keys. No I/O here.
"""

from __future__ import annotations

import re

from ..policy.rules._keyshape import byte

# class -> (regex over the segment's bytes, the placeholder's name, what the draft says it is)
CLASSES: dict[str, tuple[str, str, str]] = {
    "digits": ("[0-9]+", "id", "digits"),
    "uuid": ("[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}", "uuid", "UUIDs"),
    "date": ("[0-9]{4}-[01][0-9]-[0-3][0-9]", "date", "dates (YYYY-MM-DD)"),
    "hex": ("(?=[0-9]*[a-fA-F])(?=[a-fA-F]*[0-9])[0-9a-fA-F]{8,}", "hash", "hex hashes"),
    "email": ("[^@\\s{d}]+@[^@\\s{d}]+\\.[A-Za-z]{2,}", "email", "e-mail addresses"),
    "ipv4": ("[0-9]{1,3}\\.[0-9]{1,3}\\.[0-9]{1,3}\\.[0-9]{1,3}", "ip", "IPv4 addresses"),
    "token": ("(?=[A-Za-z0-9_-]*[A-Za-z])(?=[A-Za-z0-9_-]*[0-9])[A-Za-z0-9_-]{16,}", "token", "random tokens"),
}
ORDER = tuple(CLASSES)
OVERLAPPING = frozenset({"token"})  # classes whose regex may accept an earlier class's values
DELIMITERS = (":", ".", "/", "|", "#")
SLUG = "[a-z0-9]+(?:-[a-z0-9]+)*"
CACHE_MAX = 1 << 16


def class_regex(cls: str, delimiter: str) -> str:
    """The regex (over bytes, ASCII source) a placeholder of class `cls` is constrained with."""
    return CLASSES[cls][0].replace("{d}", byte(ord(delimiter)))


class Classifier:
    """`classify(segment) -> class or None` (None: a literal word), with a bounded cache: literal
    segments (namespaces, field words) repeat in every key and cost one dict lookup."""

    def __init__(self, delimiter: str = ":"):
        self.delimiter = delimiter
        self._tests = [(cls, re.compile(class_regex(cls, delimiter).encode()).fullmatch)
                       for cls in ORDER if cls != "digits"]
        self._cache: dict[bytes, str | None] = {}

    def __call__(self, segment: bytes) -> str | None:
        if segment.isdigit():
            return "digits"
        cache = self._cache
        found = cache.get(segment, 0)
        if found != 0:
            return found
        found = None
        if len(segment) >= 8:  # every class but digits is at least 8 bytes long
            for cls, test in self._tests:
                if test(segment) is not None:
                    found = cls
                    break
        if found is None:  # ids (found) are rarely seen twice: only literals are worth caching
            if len(cache) >= CACHE_MAX:
                cache.clear()
            cache[segment] = None
        return found


def detect_delimiter(keys) -> str:
    """The separator most keys contain (':' on a tie or when none does)."""
    counts = dict.fromkeys(DELIMITERS, 0)
    for key in keys:
        for delimiter in DELIMITERS:
            if delimiter.encode() in key:
                counts[delimiter] += 1
    best = max(DELIMITERS, key=lambda d: (counts[d], d == ":"))
    return best if counts[best] else ":"


def is_slug(value: bytes) -> bool:
    return _slug(value) is not None


_slug = re.compile(SLUG.encode()).fullmatch


def literal_regex(value: bytes) -> str:
    """A segment's bytes as an ASCII regex literal."""
    return "".join(byte(b) for b in value)

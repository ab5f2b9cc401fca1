"""K1: hierarchical segments separated by a delimiter (`module:submodule:description:id`).

Settings: `delimiter: ":"` (one punctuation character: 004 also allows '/' or '.'),
`min_segments: 1`, `max_segments: 8`. Empty segments (`a::b`, a leading or trailing delimiter,
the empty key) are errors.
"""

from ..base import KeyRule, register
from ._keyshape import byte, delimiter_setting, fullmatcher, key_bytes, show, subject

EXAMPLES = {1: ["entity"], 2: ["entity", "id"], 3: ["module", "entity", "id"],
            4: ["module", "submodule", "entity", "id"]}


@register
class Segments(KeyRule):
    id = "K1"
    order = 201
    title = "segments"

    def __init__(self, settings):
        super().__init__(settings)
        self.delimiter = delimiter_setting(settings)
        self.min_segments = settings.get("min_segments", 1, kind=int, minimum=1)
        self.max_segments = settings.get("max_segments", 8, kind=int, minimum=1)
        if self.max_segments < self.min_segments:
            raise settings.error("max_segments", f"'max_segments' ({self.max_segments}) must be at least "
                                                 f"'min_segments' ({self.min_segments})")
        d = byte(ord(self.delimiter))
        segment = f"[^{d}]++"
        self.pattern = f"{segment}(?:{d}{segment}){{{self.min_segments - 1},{self.max_segments - 1}}}+"
        self._full = fullmatcher(self.pattern)

    def check_key(self, key: str):
        if self._full(key_bytes(key)):
            return None
        d = self.delimiter
        parts = key.split(d)
        count = len(parts)
        if key and "" in parts:
            kept = [part for part in parts if part]
            if self.min_segments <= len(kept) <= self.max_segments:
                advice = f"no empty segments: use '{show(d.join(kept))}'"
            else:
                advice = f"no empty segments, and {self._range()} (this one has {len(kept)})"
        elif not key:
            advice = f"use {self._range()}, e.g. '{self._example()}'"
        elif count > self.max_segments:
            advice = f"use {self._range()} (this one has {count})"
        else:
            advice = f"use {self._range()}, e.g. '{self._example()}' (this one has {count})"
        return self.finding(subject(key), advice)

    def class_advice(self, key: str) -> bool:
        # The advice counts segments, which a key's class keeps (the delimiter is a class of its
        # own), except for empty segments, where it shows the key without them.
        return not (key and "" in key.split(self.delimiter))

    def _range(self) -> str:
        low, high, d = self.min_segments, self.max_segments, self.delimiter
        if low == high:
            count = f"exactly {low} segment{'s' if low > 1 else ''}"
        elif low == 1:
            count = f"at most {high} segments"
        else:
            count = f"{low} to {high} segments"
        return f"{count} separated by '{d}'"

    def _example(self) -> str:
        count = max(self.min_segments, min(3, self.max_segments))
        words = EXAMPLES.get(count) or (EXAMPLES[4][:3] + [f"part{i}" for i in range(1, count - 3)] + ["id"])
        return self.delimiter.join(words)

    def describe(self) -> str:
        return f"{self.min_segments} to {self.max_segments} non-empty segments separated by '{self.delimiter}'"

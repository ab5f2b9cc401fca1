"""K5: words inside one segment joined by one joiner only.

Settings: `joiner: "_"` (or `.`, `-`), `delimiter: ":"`. The other two joiners are errors, and
so is a joiner that joins nothing (`order__id`, `_id`, `id_`). 000 joins with `_` (`order_id`),
003 with `.` (`basic.info`), 004 with `-` (`sci-fiction`). Empty segments are K1's concern.
"""

import re

from ..base import KeyRule, register
from ._keyshape import byte, delimiter_setting, fullmatcher, key_bytes, show, subject

JOINERS = ("_", ".", "-")


@register
class Joiner(KeyRule):
    id = "K5"
    order = 205
    title = "word joiner"

    def __init__(self, settings):
        super().__init__(settings)
        self.joiner = settings.get("joiner", "_", kind=str, choices=JOINERS)
        self.delimiter = delimiter_setting(settings)
        if self.joiner == self.delimiter:
            raise settings.error("joiner", f"'joiner' must differ from the delimiter, got {self.joiner!r} for both")
        self.others = tuple(j for j in JOINERS if j not in (self.joiner, self.delimiter))
        d, j = byte(ord(self.delimiter)), byte(ord(self.joiner))
        word = "[^" + d + j + "".join(byte(ord(o)) for o in self.others) + "]++"
        segment = f"(?:{word}(?:{j}{word})*+)?+"
        self.pattern = f"{segment}(?:{d}{segment})*+"
        self._full = fullmatcher(self.pattern)

    def check_key(self, key: str):
        if self._full(key_bytes(key)):
            return None
        j = self.joiner
        wrong = next((o for o in self.others if o in key), None)
        fixed = self.delimiter.join(self._fix(part) for part in key.split(self.delimiter))
        if wrong is not None:
            advice = f"join words with '{j}', not '{wrong}': use '{show(fixed)}'"
        else:
            advice = f"put exactly one '{j}' between words: use '{show(fixed)}'"
        return self.finding(subject(key), advice)

    def _fix(self, segment: str) -> str:
        for other in self.others:
            segment = segment.replace(other, self.joiner)
        return re.sub(re.escape(self.joiner) + "+", self.joiner, segment).strip(self.joiner)

    def describe(self) -> str:
        return f"words inside a segment joined by '{self.joiner}' only"

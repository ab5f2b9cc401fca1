"""K2: letter case of key segments: lowercase only, camelCase (project-wide), or any.

Settings: `style: lowercase` (`camelCase`, `PascalCase`, `UPPERCASE`, `any`), `delimiter: ":"`.
Only ASCII letters have a case here: digits, punctuation and non-ASCII text (UTF-8 Chinese keys)
are neutral. Per segment:

- lowercase: no `A-Z`; UPPERCASE: no `a-z`.
- camelCase: the first letter is lower case and no `_` follows it (`userAdmin`, `{userAdmin}`,
  `id`, `18`), or the segment has no lower-case letter at all (`PRO:USER:UID:18`, seed 002's own
  example, reads as constants/acronyms and is accepted).
- PascalCase: the same with an upper-case first letter (`UserAdmin`).
"""

import re

from ..base import KeyRule, register
from ._keyshape import byte, delimiter_setting, fullmatcher, key_bytes, show, subject

STYLES = ("lowercase", "camelCase", "PascalCase", "UPPERCASE", "any")


def _segment_pattern(style: str, d: str) -> str:
    """One segment of `style`; `d` is the delimiter as a regex atom. Each alternative must reach
    the end of the segment and the choice is atomic, so a failing key never backtracks into
    earlier segments (linear time)."""
    first = "[a-z]" if style == "camelCase" else "[A-Z]"
    cased = f"[^A-Za-z_{d}]*+(?:{first}[^_{d}]*+)?+"
    constant = f"[^a-z{d}]*+"
    return f"(?>{cased}(?={d}|\\Z)|{constant}(?={d}|\\Z))"


def _ascii_lower(text: str) -> str:
    return re.sub("[A-Z]+", lambda m: m.group().lower(), text)


def _ascii_upper(text: str) -> str:
    return re.sub("[a-z]+", lambda m: m.group().upper(), text)


@register
class LetterCase(KeyRule):
    id = "K2"
    order = 202
    title = "letter case"

    def __init__(self, settings):
        super().__init__(settings)
        self.style = settings.get("style", "lowercase", kind=str, choices=STYLES)
        self.delimiter = delimiter_setting(settings)
        self.title = self.style if self.style != "any" else "letter case"
        d = byte(ord(self.delimiter))
        if self.style == "any":
            self.pattern = ""
        elif self.style == "lowercase":
            self.pattern = "[^A-Z]*+"
        elif self.style == "UPPERCASE":
            self.pattern = "[^a-z]*+"
        else:
            segment = _segment_pattern(self.style, d)
            self.pattern = f"{segment}(?:{d}{segment})*+"
        self._full = fullmatcher(self.pattern) if self.pattern else None
        cased = self.style in ("camelCase", "PascalCase")
        self._segment = fullmatcher(_segment_pattern(self.style, d)) if cased else None

    def check_key(self, key: str):
        if self._full is None or self._full(key_bytes(key)):
            return None
        if self.style == "lowercase":
            advice = f"use '{show(_ascii_lower(key))}'"
        elif self.style == "UPPERCASE":
            advice = f"use '{show(_ascii_upper(key))}'"
        else:
            parts = key.split(self.delimiter)
            bad = next((p for p in parts if not self._segment(key_bytes(p))), key)
            fixed = self.delimiter.join(p if self._segment(key_bytes(p)) else self._restyle(p) for p in parts)
            if self._full(key_bytes(fixed)):
                advice = f"use '{show(fixed)}'"
            else:
                advice = f"write every segment in {self.style} (segment '{show(bad)}' is not)"
        return self.finding(subject(key), advice)

    def _restyle(self, segment: str) -> str:
        """`user_admin`, `UserAdmin` -> `userAdmin` (camelCase) or `UserAdmin` (PascalCase)."""
        words = [word for word in segment.split("_") if word]
        out = []
        for index, word in enumerate(words):
            match = re.search("[A-Za-z]", word)
            if match is None:
                out.append(word)
                continue
            i = match.start()
            if index == 0 and self.style == "camelCase":
                letter = word[i].lower()
            else:
                letter = word[i].upper()
            out.append(word[:i] + letter + word[i + 1:])
        return "".join(out) or segment

    def describe(self) -> str:
        return f"segments in {self.style}"

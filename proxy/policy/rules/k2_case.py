"""K2: letter case of key segments: lowercase only, camelCase (project-wide), or any."""

import re

from ..base import KeyRule, register

STYLES = {
    # What a segment may look like; digits and non-letters are case-neutral.
    "lowercase": r"[^A-Z]*",
    "camelCase": r"(?:[a-z0-9][A-Za-z0-9]*|[^A-Za-z]+|[A-Z0-9_]+)?",
    "PascalCase": r"(?:[A-Z][A-Za-z0-9]*|[^A-Za-z]+)?",
    "UPPERCASE": r"[^a-z]*",
    "any": r".*",
}


@register
class LetterCase(KeyRule):
    id = "K2"
    title = "lowercase"

    def __init__(self, settings):
        super().__init__(settings)
        self.style = settings.get("style", "lowercase", kind=str, choices=tuple(STYLES))
        self.delimiter = settings.get("delimiter", ":", kind=str)
        self.title = self.style if self.style != "any" else "letter case"
        segment = STYLES[self.style]
        d = re.escape(self.delimiter)
        self.pattern = "" if self.style == "any" else f"(?:{segment})(?:{d}(?:{segment}))*"
        self._check = re.compile(self.pattern, re.S).fullmatch if self.pattern else None

    def check_key(self, key: str):
        if self._check is None or self._check(key):
            return None
        parts = key.split(self.delimiter)
        bad = next((p for p in parts if not re.fullmatch(STYLES[self.style], p, re.S)), key)
        if self.style == "lowercase":
            advice = f"use '{self.delimiter.join(p.lower() for p in parts)}'"
        else:
            advice = f"write every segment in {self.style} (segment '{bad}' is not)"
        return self.finding(f"key '{key}'", advice)

    def describe(self) -> str:
        return f"segments in {self.style}"

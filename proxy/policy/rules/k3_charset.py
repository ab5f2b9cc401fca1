"""K3: the characters a key may contain.

Settings: `charset: "a-z0-9:._-"` (the body of a regex character class, read over the key's
bytes), `first: any` (`letter`, `alnum`: what the first character must be; ASCII). Control
characters, spaces and quotes are errors whatever the charset says. A key is UTF-8 bytes: a
charset allows non-ASCII (Chinese) keys only when it names their bytes, `\\x80-\\xff`.
The empty key is left to K4 (`min_length`).
"""

import re

from ..base import KeyRule, register
from ._keyshape import FORBIDDEN_BYTES, byte_class, fullmatcher, key_bytes, show, subject

FIRST = {"any": None, "letter": ("[A-Za-z]", "a letter"), "alnum": ("[A-Za-z0-9]", "a letter or digit")}


@register
class Charset(KeyRule):
    id = "K3"
    order = 203
    title = "characters"

    def __init__(self, settings):
        super().__init__(settings)
        self.charset = settings.get("charset", "a-z0-9:._-", kind=str)
        if not self.charset:
            raise settings.error("charset", "'charset' must not be empty")
        if not self.charset.isascii():
            raise settings.error("charset", f"'charset' must be ASCII (write \\x80-\\xff to allow UTF-8 "
                                            f"non-ASCII characters), got {self.charset!r}")
        try:
            one = re.compile(f"[{self.charset}]".encode(), re.S).fullmatch
        except re.error as exc:
            raise settings.error("charset", f"'charset' is not the body of a regex character class "
                                            f"({exc}): {self.charset!r}") from None
        self.allowed = frozenset(b for b in range(256) if one(bytes([b]))) - FORBIDDEN_BYTES
        if not self.allowed:
            raise settings.error("charset", f"'charset' allows no character a key may contain: {self.charset!r}")
        self.first = settings.get("first", "any", kind=str, choices=tuple(FIRST))
        start = f"(?={FIRST[self.first][0]}|\\Z)" if FIRST[self.first] else ""
        self.pattern = f"{start}{byte_class(self.allowed)}*+"
        self._full = fullmatcher(self.pattern)
        self._first = re.compile(FIRST[self.first][0]).fullmatch if FIRST[self.first] else None

    def check_key(self, key: str):
        if self._full(key_bytes(key)):
            return None
        advice = None
        for index, char in enumerate(key):
            data = key_bytes(char)
            if all(b in self.allowed for b in data):
                continue
            code = data[0]
            if code < 0x20 or code == 0x7F:
                advice = f"no control characters (found '{show(char)}' at index {index})"
            elif code == 0x20:
                advice = f"no spaces (found one at index {index})"
            elif char in "\"'":
                advice = f"no quotes (found {char} at index {index})"
            else:
                advice = f"use only the characters [{self.charset}] (found '{show(char)}' at index {index})"
            break
        if advice is None:  # every character is allowed: the first one is what failed
            advice = f"start with {FIRST[self.first][1]} (not '{show(key[:1])}')"
        return self.finding(subject(key), advice)

    def describe(self) -> str:
        first = "" if self.first == "any" else f", starting with {FIRST[self.first][1]}"
        return f"characters [{self.charset}] only{first}; never control characters, spaces or quotes"

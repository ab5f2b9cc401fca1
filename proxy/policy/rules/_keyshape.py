"""Helpers shared by the key-name rules (K1...K11), and `text`, a key as every rule's messages
show it; not a rule itself.

Every key rule keeps two views of itself in step: `pattern`, the regex the engine folds into its
one combined lookahead (compiled as bytes, re.S), and `check_key`, which explains a failure. To
make them agree exactly, each rule's `check_key` first runs its own `pattern` over the key's bytes
(`fullmatcher`, `key_bytes`) and only builds advice when that fails.

Patterns are written to match in linear time whatever the key (possessive quantifiers and atomic
groups, no nested choices that can backtrack): the combined regex runs on every key argument
before any length rule has looked at it.
"""

from __future__ import annotations

import re

# Characters a key may never contain, whatever the policy (K3): control characters, space, quotes.
FORBIDDEN_BYTES = frozenset(range(0x21)) | {0x7F, ord('"'), ord("'")}


def key_bytes(key: str) -> bytes:
    """The key as the engine matched it: text decoded with surrogateescape maps back exactly."""
    try:
        return key.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return key.encode("utf-8", "surrogatepass")


def fullmatcher(pattern: str):
    """`pattern` compiled the way the engine compiles it (bytes, re.S), as a fullmatch."""
    return re.compile(pattern.encode("ascii"), re.S).fullmatch


def byte(value: int) -> str:
    """One byte as a regex atom usable inside and outside a character class."""
    char = chr(value)
    return char if value < 0x80 and char.isalnum() else f"\\x{value:02x}"


def literal(text: str) -> str:
    """Text as an ASCII-only regex literal over its UTF-8 bytes."""
    return "".join(byte(b) for b in text.encode("utf-8"))


def byte_class(values) -> str:
    """A character class of exactly these byte values, ranges folded."""
    values = sorted(set(values))
    parts, i = [], 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and values[j + 1] == values[j] + 1:
            j += 1
        if j == i:
            parts.append(byte(values[i]))
        elif j == i + 1:
            parts.append(byte(values[i]) + byte(values[j]))
        else:
            parts.append(f"{byte(values[i])}-{byte(values[j])}")
        i = j + 1
    return "[" + "".join(parts) + "]"


def show(text: str, limit: int = 100) -> str:
    """A key (or part of one) fit for a one-line error reply: control characters escaped, long
    keys cut."""
    text = key_bytes(text).decode("utf-8", "backslashreplace")
    if len(text) <= limit and text.isprintable():
        return text  # the usual key, shown as it is (one C pass: a command of many bad keys is explained fast)
    cut = len(text) > limit
    if cut:
        text = text[:limit]
    out = []
    for char in text:
        if char.isprintable():
            out.append(char)
        elif char in "\n\r\t":
            out.append({"\n": "\\n", "\r": "\\r", "\t": "\\t"}[char])
        elif ord(char) < 0x100:
            out.append(f"\\x{ord(char):02x}")
        else:
            out.append(f"\\u{ord(char):04x}")
    return "".join(out) + ("..." if cut else "")


def subject(key: str) -> str:
    return f"key '{show(key)}'"


def text(key: bytes) -> str:
    """A key's bytes as text for a message (bytes that are not UTF-8 as \\x escapes)."""
    return key.decode("utf-8", "backslashreplace")


def delimiter_setting(settings, name: str = "delimiter", default: str = ":") -> str:
    """A segment delimiter: one printable ASCII punctuation character (':', '/', '.')."""
    value = settings.get(name, default, kind=str)
    if (len(value) != 1 or not value.isascii() or value.isalnum() or not value.isprintable()
            or value.isspace() or value in "{}\"'\\"):
        raise settings.error(name, f"'{name}' must be one punctuation character such as ':', '/' or '.', "
                                   f"got {value!r}")
    return value


GLOB_SPECIAL = b"*?[]\\"


def glob_escape(text: bytes) -> bytes:
    """Bytes as a Redis glob (SCAN MATCH, ACL key patterns) that matches exactly them."""
    return b"".join(b"\\" + bytes((c,)) if c in GLOB_SPECIAL else bytes((c,)) for c in text)


def glob_literal_prefix(pattern: bytes) -> bytes:
    """What every key a Redis glob (stringmatchlen) matches starts with: its bytes up to the
    first `*`, `?` or `[`, escapes resolved."""
    out = bytearray()
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == 0x5C and i + 1 < len(pattern):  # backslash: the next byte is literal
            out.append(pattern[i + 1])
            i += 2
            continue
        if c in b"*?[":
            break
        out.append(c)
        i += 1
    return bytes(out)


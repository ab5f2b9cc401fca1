"""V4: objects are stored as hashes, not as serialised JSON strings (seed 001, line 42: a JSON
string must be read, decoded, changed, encoded and written back whole to change one field, and
concurrent writers overwrite each other).

An audit finding only: the proxy cannot tell a JSON write from any other string write at a
cost worth paying, so `redis-guard audit` reports it on the stored values. What is detected,
exactly: the first `sample_bytes` of a string value, after JSON whitespace, are `{` followed by
a quoted member name and `:` (or `}`), or `[` followed by such an object. When the whole value
fits in the sample it must also decode as JSON (an object, or a non-empty array of objects);
a longer value is judged on its sample. JSON scalars and arrays of scalars are not objects and
are not reported; neither are other encodings (MessagePack, pickles, compressed JSON).

Settings: `sample_bytes` (default 512): how much of each string value the audit reads
(`GETRANGE key 0 sample_bytes-1`).
"""

from __future__ import annotations

import json
import re

from ..base import Rule, register

# `{"name":` or `{}` at the start, possibly inside `[`: a JSON object, as JSON writes one.
_OBJECT_START = re.compile(
    rb'[ \t\r\n]*(\[[ \t\r\n]*)?\{[ \t\r\n]*(?:"(?:[^"\\\x00-\x1f]|\\.)*"[ \t\r\n]*:|\})', re.S)


def json_object_kind(sample: bytes, length: int) -> str | None:
    """'object' or 'array of objects' when the value (`sample` is its first bytes, `length` its
    size) is a JSON object or an array of them; else None."""
    match = _OBJECT_START.match(sample)
    if match is None:
        return None
    kind = "array of objects" if match.group(1) else "object"
    if length > len(sample):
        return kind
    try:
        value = json.loads(sample)
    except ValueError:  # UnicodeDecodeError included
        return None
    if isinstance(value, dict) or (isinstance(value, list) and value and
                                   all(isinstance(item, dict) for item in value)):
        return kind
    return None


@register
class JsonStrings(Rule):
    id = "V4"
    order = 404
    title = "objects as hashes, not JSON strings"

    def __init__(self, settings):
        super().__init__(settings)
        self.sample_bytes = settings.get("sample_bytes", 512, kind=int, minimum=16)

    def check_value(self, key: bytes, sample: bytes, length: int):
        """The finding for a stored string value, or None."""
        kind = json_object_kind(sample, length)
        if kind is None:
            return None
        return self.finding(f"key '{key.decode('utf-8', 'backslashreplace')}'",
                            f"a JSON {kind} of {length} bytes stored as a string: store an object "
                            "as a hash (HSET key field value ...) so one field is read and "
                            "changed alone")

    def describe(self) -> str:
        return (f"JSON objects stored as strings are reported by `redis-guard audit` (first "
                f"{self.sample_bytes} bytes read); not checked on live traffic")

"""K8: time in keys.

Setting: `timestamps: forbid` (001: never embed frequently changing values such as timestamps) or
`tagged` (000: only as `date:YYYYMMDD` and `ts:<epoch>`).

What looks like a time: a run of characters, bounded by non-alphanumerics (so a whole segment, or
a `_`/`.`/`-` joined word of one), that is

- an epoch in seconds or milliseconds: 10 or 13 digits starting with 1 (2001-2033),
- a date `YYYYMMDD` (years 1900-2099, valid month and day), or a date and time `YYYYMMDDHHMM[SS]`,
- a date with separators, `YYYY-MM-DD` (also `_`, `.`, `/`), optionally followed by `T` and digits.

An identifier of that shape (a ten-digit id starting with 1) looks like a time too: a policy
with such ids uses `K8: off`. In `tagged` mode a date `YYYYMMDD` is allowed right after a `date`
segment and an epoch right after a `ts` segment (tag and value separated by `:`, `/` or `.`);
every other time is an error.
"""

import re

from ..base import KeyRule, register
from ._keyshape import fullmatcher, key_bytes, show, subject

MODES = ("forbid", "tagged")

LEFT = "(?<![0-9A-Za-z])"
RIGHT = "(?![0-9A-Za-z])"
YEAR = "(?:19|20)[0-9]{2}"
MONTH = "(?:0[1-9]|1[0-2])"
DAY = "(?:0[1-9]|[12][0-9]|3[01])"
EPOCH = "1[0-9]{9}(?:[0-9]{3})?"
DATE8 = f"{YEAR}{MONTH}{DAY}"
DATETIME = f"{DATE8}(?:[01][0-9]|2[0-3])[0-5][0-9](?:[0-5][0-9])?"
SEPARATED = f"{YEAR}[-_./]{MONTH}[-_./]{DAY}(?:[Tt][0-9]+)?"
TAG_SEP = "[:/.]"
DATE_TAG = f"(?<={LEFT}[Dd][Aa][Tt][Ee]{TAG_SEP})"
TS_TAG = f"(?<={LEFT}[Tt][Ss]{TAG_SEP})"

FORBIDDEN = f"{LEFT}(?:{EPOCH}|{DATE8}|{DATETIME}|{SEPARATED}){RIGHT}"
UNTAGGED = f"{LEFT}(?:(?!{TS_TAG}){EPOCH}|(?!{DATE_TAG}){DATE8}|{DATETIME}|{SEPARATED}){RIGHT}"


@register
class Timestamps(KeyRule):
    id = "K8"
    order = 208
    title = "timestamps"

    def __init__(self, settings):
        super().__init__(settings)
        self.timestamps = settings.get("timestamps", "forbid", kind=str, choices=MODES)
        bad = FORBIDDEN if self.timestamps == "forbid" else UNTAGGED
        # No bad run starts anywhere. Every time starts with 1 or 2: other bytes are skipped in
        # C, and at a 1 or 2 the test is of bounded length (linear, and fast on common keys).
        self.pattern = f"(?:[^12]++|(?!{bad})[12])*+"
        self._full = fullmatcher(self.pattern)
        self._search = re.compile(bad.encode(), re.S).search

    def check_key(self, key: str):
        data = key_bytes(key)
        if self._full(data):
            return None
        found = self._search(data)
        token = show(found.group().decode("utf-8", "surrogateescape")) if found else "?"
        if self.timestamps == "forbid":
            advice = f"no times or dates in key names ('{token}' looks like one): keep them in the value"
        elif re.fullmatch(EPOCH, token):
            advice = f"tag epoch times as 'ts:{token}'"
        elif re.fullmatch(DATE8, token):
            advice = f"tag dates as 'date:{token}'"
        else:
            digits = re.sub("[^0-9]", "", token)
            example = f"date:{digits[:8]}" if re.fullmatch(DATE8, digits[:8]) else "date:YYYYMMDD"
            advice = f"write times only as 'date:YYYYMMDD' or 'ts:<epoch>' (e.g. '{example}', not '{token}')"
        return self.finding(subject(key), advice)

    def describe(self) -> str:
        if self.timestamps == "forbid":
            return "no timestamps or dates in key names"
        return "timestamps only as date:YYYYMMDD and ts:<epoch>"

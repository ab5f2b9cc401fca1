"""K9: no vague abbreviations, no camelCase words run together with an id.

Settings: `banned_words: []`, `run_together: false`.

A banned word (`usr`, `prf`; matched ignoring ASCII case) is an error wherever it stands as a
word of the key: a whole segment (`usr:prf:id:1`), a word joined by `_`, `.`, `-` or another
non-alphanumeric (`usr_id`), or a camelCase word (`usrProfile`, `myUsr`) or a word next to digits
(`usr1000`). Inside a longer word it is not (`usrname`, `prfx`). Words are ASCII letters and
digits, joined by `_`, `.` or `-` for a banned phrase such as `tmp_key`.

`run_together: true` also rejects an alphanumeric run (a segment, or a joined word of one) that
mixes camelCase words and digits (`orderStatusOrderId98765`, `userId1`): a camelCase hump is a
lower-case pair, an upper-case letter, a lower-case letter (`erSt`), so lower-case hex ids and
all-caps words with digits (`UID18`) pass.
"""

import re

from ..base import KeyRule, register
from ._keyshape import byte_class, fullmatcher, key_bytes, show, subject

WORD = re.compile(r"[A-Za-z0-9]+(?:[-_.][A-Za-z0-9]+)*")
HUMP = "[a-z]{2}[A-Z][a-z]"
ALNUM = "[0-9A-Za-z]"
# Per alphanumeric run, once: it has no digit, or it has no hump (scanning the run only).
RUN_OK = f"(?:(?=[A-Za-z]*+(?![0-9]))|(?!{ALNUM}*?{HUMP})){ALNUM}++"
RUNS_OK = f"(?:[^0-9A-Za-z]++|{RUN_OK})*+"
RUN_BAD = re.compile(f"(?<!{ALNUM}){ALNUM}+".encode())


START = {True: "(?:(?<![A-Za-z])|(?<=[a-z])(?=[A-Z]))", False: "(?<![0-9])"}
END = {True: "(?:(?<=[a-z])(?![a-z])|(?<=[A-Z])(?![A-Za-z]))", False: "(?![0-9])"}


def _banned_pattern(words) -> str:
    """Any of `words` standing as a word: grouped by the kind (letter/digit) of their first and
    last character, so each boundary test runs once per position."""
    groups: dict[tuple[bool, bool], list[str]] = {}
    for word in words:
        groups.setdefault((word[0].isalpha(), word[-1].isalpha()), []).append(word)
    by_head: dict[bool, list[str]] = {}
    for (head, tail), group in sorted(groups.items()):
        bodies = "|".join("".join(f"\\{c}" if c in "-_." else c for c in word) for word in group)
        by_head.setdefault(head, []).append(f"(?i:{bodies}){END[tail]}")
    return "(?:" + "|".join(f"{START[head]}(?:{'|'.join(alts)})" for head, alts in sorted(by_head.items())) + ")"


def _split_words(run: str) -> list[str]:
    return [w.lower() for w in re.findall(r"[A-Z]{2,}(?![a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+", run)]


@register
class Words(KeyRule):
    id = "K9"
    order = 209
    title = "clear words"

    def __init__(self, settings):
        super().__init__(settings)
        self.banned_words = settings.strings("banned_words")
        for word in self.banned_words:
            if not WORD.fullmatch(word):
                raise settings.error("banned_words", f"banned word {word!r} must be ASCII letters and digits "
                                                     f"(optionally joined by '_', '.' or '-')")
        self.run_together = settings.get("run_together", False, kind=bool)
        parts = []
        self._banned = None
        if self.banned_words:
            # Longest first, so the advice names 'usr_id' rather than 'usr' when both are banned.
            words = sorted(set(w.lower() for w in self.banned_words), key=lambda w: (-len(w), w))
            banned = _banned_pattern(words)
            # Skip, in C, every byte that cannot start a banned word; test the others.
            heads = byte_class({ord(c) for w in words for c in (w[0].lower(), w[0].upper())})
            others = "[^" + heads[1:]
            clean = f"(?:{others}++|(?!{banned}){heads})*+"
            parts.append(f"(?={clean}\\Z)" if self.run_together else clean)
            self._banned = re.compile(banned.encode(), re.S).search
        if self.run_together:
            parts.append(RUNS_OK)
        self.pattern = "".join(parts)
        self._full = fullmatcher(self.pattern) if self.pattern else None
        self._run_ok = fullmatcher(RUN_OK)

    def check_key(self, key: str):
        if self._full is None:
            return None
        data = key_bytes(key)
        if self._full(data):
            return None
        found = self._banned(data) if self._banned else None
        if found is not None:
            word = show(found.group().decode("utf-8", "surrogateescape"))
            advice = f"spell out '{word}' (a banned abbreviation)"
        else:
            run = next((m.group() for m in RUN_BAD.finditer(data) if not self._run_ok(m.group())), None)
            if run is None:
                advice = self.describe()
            else:
                text = run.decode("ascii")
                fixed = key.replace(text, ":".join(_split_words(text)), 1)
                advice = f"split '{text}' into segments: use '{show(fixed)}'"
        return self.finding(subject(key), advice)

    def describe(self) -> str:
        parts = []
        if self.banned_words:
            parts.append(f"no vague abbreviations ({', '.join(self.banned_words)})")
        if self.run_together:
            parts.append("no camelCase words run together with an id")
        return "; ".join(parts) or "no check"

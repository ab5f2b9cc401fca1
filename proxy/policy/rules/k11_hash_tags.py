"""K11: cluster hash tags `{...}`.

Setting: `hash_tags: allow` (`require`, `forbid`).

Redis hashes only what lies between the first `{` and the first `}` after it, when that is not
empty (`{user1000}.following` and `{user1000}.followers` share a slot). Braces that do not form
such a tag mislead: `foo{}{bar}` is hashed whole, `foo{{bar}}zap` on `{bar`, and in `{a}{b}` the
second pair does nothing. So in every mode braces may only appear as one tag, `{x}` with `x`
non-empty and brace-free. `require`: every key has that tag; `forbid`: no key has braces;
`allow`: either.
"""

from ..base import KeyRule, register
from ._keyshape import fullmatcher, key_bytes, show, subject

MODES = ("allow", "require", "forbid")
PLAIN = "[^{}]*+"
TAG = "\\{[^{}]++\\}"
PATTERNS = {
    "allow": f"{PLAIN}(?:{TAG}{PLAIN})?+",
    "require": f"{PLAIN}{TAG}{PLAIN}",
    "forbid": PLAIN,
}


def redis_tag(key: str) -> str | None:
    """What Redis hashes for this key's slot when it is not the whole key."""
    start = key.find("{")
    if start < 0:
        return None
    end = key.find("}", start + 1)
    if end <= start + 1:
        return None
    return key[start + 1:end]


@register
class HashTags(KeyRule):
    id = "K11"
    order = 211
    title = "hash tags"

    def __init__(self, settings):
        super().__init__(settings)
        self.hash_tags = settings.get("hash_tags", "allow", kind=str, choices=MODES)
        self.pattern = PATTERNS[self.hash_tags]
        self._full = fullmatcher(self.pattern)

    def check_key(self, key: str):
        if self._full(key_bytes(key)):
            return None
        braces = "{" in key or "}" in key
        if self.hash_tags == "forbid":
            advice = "no braces: this policy forbids hash tags"
        elif not braces:
            advice = "add one hash tag naming what the key is stored with, e.g. '{user1000}.following'"
        else:
            tag = redis_tag(key)
            hashed = f"Redis hashes only '{show(tag)}' here" if tag is not None else "Redis hashes the whole key here"
            advice = f"use braces only for one non-empty tag such as '{{user1000}}' ({hashed})"
        return self.finding(subject(key), advice)

    def describe(self) -> str:
        return {"allow": "braces only as one hash tag {x}", "require": "exactly one hash tag {x} per key",
                "forbid": "no hash tags (no braces)"}[self.hash_tags]

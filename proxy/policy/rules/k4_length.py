"""K4: key length in bytes, between `min_length` (default 1) and `max_length` (default 128)."""

from ..base import KeyRule, register
from ._keyshape import fullmatcher, key_bytes, subject

REDIS_MAX_KEY = 512 * 1024 * 1024  # Redis's own limit on a string, key names included


@register
class Length(KeyRule):
    id = "K4"
    order = 204
    title = "length"

    def __init__(self, settings):
        super().__init__(settings)
        self.min_length = settings.get("min_length", 1, kind=int, minimum=0)
        self.max_length = settings.get("max_length", 128, kind=int, minimum=1)
        if self.max_length > REDIS_MAX_KEY:
            raise settings.error("max_length", f"'max_length' must be at most {REDIS_MAX_KEY} "
                                               f"(Redis's own limit), got {self.max_length}")
        if self.max_length < self.min_length:
            raise settings.error("max_length", f"'max_length' ({self.max_length}) must be at least "
                                               f"'min_length' ({self.min_length})")
        self.pattern = f".{{{self.min_length},{self.max_length}}}+"
        self._full = fullmatcher(self.pattern)

    def check_key(self, key: str):
        data = key_bytes(key)
        if self._full(data):
            return None
        size = len(data)
        if size > self.max_length:
            advice = f"at most {self.max_length} bytes (this one has {size})"
        else:
            advice = f"at least {self.min_length} byte{'s' if self.min_length > 1 else ''} (this one has {size})"
        return self.finding(subject(key), advice)

    def class_advice(self, key: str) -> bool:
        return True  # the advice gives the key's length, which its class keeps

    def describe(self) -> str:
        return f"{self.min_length} to {self.max_length} bytes"

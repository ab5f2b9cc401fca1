"""Application passwords: stored as salted scrypt hashes, never in clear, compared in constant time.

The stored form is one self-describing string in the PHC format that passlib and others use,
`$scrypt$ln=14,r=8,p=1$<salt>$<hash>` (base64 without padding), so a policy file says how its
hashes were made and the cost can be raised later without breaking the hashes already written.
Checking a password costs one scrypt run (tens of milliseconds, on purpose): callers keep that
off the event loop and remember the credentials they have already accepted (`Verified`).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
from dataclasses import dataclass

SCHEME = "scrypt"
DEFAULT_LOG_N, DEFAULT_R, DEFAULT_P = 14, 8, 1  # 16 MiB per check; its time: benchmarks/README.md
SALT_BYTES, HASH_BYTES = 16, 32
_MAX_LOG_N = 20  # 1 GiB of memory at r=8: anything above is a typo, not a policy
_FORMAT = re.compile(r"\$scrypt\$ln=(\d+),r=(\d+),p=(\d+)\$([A-Za-z0-9+/]+)\$([A-Za-z0-9+/]+)")


class HashFormatError(ValueError):
    pass


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii").rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.b64decode(text + "=" * (-len(text) % 4))


@dataclass(frozen=True, slots=True)
class PasswordHash:
    log_n: int
    r: int
    p: int
    salt: bytes
    digest: bytes

    @classmethod
    def parse(cls, text: str) -> PasswordHash:
        match = _FORMAT.fullmatch(text.strip())
        if match is None:
            raise HashFormatError("expected '$scrypt$ln=N,r=R,p=P$<salt>$<hash>' as printed by "
                                  "'redis-guard policy hash-password'")
        log_n, r, p = (int(part) for part in match.group(1, 2, 3))
        if not 1 <= log_n <= _MAX_LOG_N or not 1 <= r <= 32 or not 1 <= p <= 16:
            raise HashFormatError(f"scrypt cost out of range (ln 1..{_MAX_LOG_N}, r 1..32, p 1..16)")
        try:
            salt, digest = _unb64(match.group(4)), _unb64(match.group(5))
        except ValueError:
            raise HashFormatError("salt or hash is not valid base64") from None
        if len(salt) < 8 or len(digest) < 16:
            raise HashFormatError("salt or hash too short")
        return cls(log_n, r, p, salt, digest)

    def matches(self, password: bytes) -> bool:
        computed = _scrypt(password, self.salt, self.log_n, self.r, self.p, len(self.digest))
        return hmac.compare_digest(computed, self.digest)

    def __repr__(self) -> str:  # no salt or hash in logs and tracebacks
        return f"PasswordHash(scrypt ln={self.log_n} r={self.r} p={self.p})"

    def __str__(self) -> str:
        return f"${SCHEME}$ln={self.log_n},r={self.r},p={self.p}${_b64(self.salt)}${_b64(self.digest)}"


def _scrypt(password: bytes, salt: bytes, log_n: int, r: int, p: int, size: int) -> bytes:
    n = 1 << log_n
    return hashlib.scrypt(password, salt=salt, n=n, r=r, p=p, dklen=size,
                          maxmem=256 * n * r * p + (1 << 20))


def hash_password(password: bytes, log_n: int = DEFAULT_LOG_N, r: int = DEFAULT_R, p: int = DEFAULT_P,
                  salt: bytes | None = None) -> str:
    """The stored form of a password, with a fresh random salt."""
    salt = os.urandom(SALT_BYTES) if salt is None else salt
    return str(PasswordHash(log_n, r, p, salt, _scrypt(password, salt, log_n, r, p, HASH_BYTES)))


class Verified:
    """Credentials already accepted, so that a client pool opening many connections pays the
    slow hash once. Holds keyed digests (HMAC under a per-process random key), never passwords;
    bounded, and thrown away with the policy it belongs to."""

    MAX = 4096

    __slots__ = ("_key", "_seen")

    def __init__(self):
        self._key = os.urandom(32)
        self._seen: dict[bytes, object] = {}

    def tag(self, user: bytes, password: bytes) -> bytes:
        """What the credentials are remembered by: a keyed digest."""
        return hmac.new(self._key, len(user).to_bytes(4, "big") + user + password, hashlib.sha256).digest()

    def get(self, tag: bytes):
        return self._seen.get(tag)

    def add(self, tag: bytes, value) -> None:
        if len(self._seen) >= self.MAX:
            self._seen.clear()
        self._seen[tag] = value

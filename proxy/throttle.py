"""AUTH brute force: a brake on the failing connection, never on its neighbours, bounded in memory.

`LoginThrottle` is sans-IO (a clock is all it reads). A correct login is answered at once; a
failed one (WRONGPASS) is answered late, and its connection reads nothing more until then: the
n-th failure waits `base * 2^(n-1)`, at most `cap` (0.05, 0.1, 0.2 ... 2 s), n the larger of
the connection's own failures and those of its (client address, user) pair, so that a guesser
who opens a new connection per guess is slowed as one who keeps his. After `close_after`
failures the connection is closed (`closes`): 100 pipelined guesses end there, before a later
correct one is read. Failures of other connections, even from the same address (the pods behind
one NAT share it), never delay a correct login: only the failing connection waits. A pair with no
failure for `forget_after` seconds starts again; at most `size` pairs are remembered, the least
recently seen dropped first. Each failure is counted (`redis_guard_auth_failures_total`) and a
log line written every `LOG_EVERY` seconds at most. Serves the proxy's own AUTH with applications
(`session/auth.py` checks the password, in a worker thread for the slow hash) and without them
(the upstream URL's credentials) alike.
"""

from __future__ import annotations

import collections
import hashlib
import logging
import time

from . import metrics

log = logging.getLogger("redis_guard.auth")


def _host(address) -> str:
    """The client's IP from a peer address (host, port[, flow, scope]), or the address itself."""
    return address[0] if isinstance(address, tuple) and address else str(address)


def _pair(address, user: bytes) -> tuple:
    """The key of a (client address, user): a long user name is kept as its digest (bounded memory)."""
    if len(user) > 64:
        user = hashlib.blake2b(user, digest_size=16).digest()
    return (_host(address), user)


class LoginThrottle:
    LOG_EVERY = 10.0

    def __init__(self, base: float = 0.05, cap: float = 2.0, close_after: int = 10, size: int = 65536,
                 forget_after: float = 300.0, clock=time.monotonic):
        self.base = base
        self.cap = cap
        self.close_after = close_after
        self.size = size
        self.forget_after = forget_after
        self.clock = clock
        # (host, user) -> [failures in a row, last failure's time]
        self.entries: collections.OrderedDict[tuple, list] = collections.OrderedDict()
        self.logged_at = float("-inf")
        self.unlogged = 0

    def step(self, failures: int) -> float:
        """How late the reply of the `failures`-th failure comes."""
        return 0.0 if failures <= 0 else min(self.cap, self.base * 2 ** min(failures - 1, 64))

    def failed(self, address, user: bytes, on_connection: int) -> float:
        """A failed attempt, the connection's `on_connection`-th: seconds its reply waits."""
        now = self.clock()
        key = _pair(address, user)
        entry = self.entries.get(key)
        if entry is None:
            entry = self.entries[key] = [0, now]
            if len(self.entries) > self.size:
                self.entries.popitem(last=False)
        else:
            self.entries.move_to_end(key)
            if now - entry[1] > self.forget_after:
                entry[0] = 0  # forgiven
        entry[0] += 1
        entry[1] = now
        wait = self.step(max(on_connection, entry[0]))
        metrics.AUTH_FAILURES.inc()
        self.unlogged += 1
        if now - self.logged_at >= self.LOG_EVERY:
            log.warning("%d failed AUTH attempt(s) since the last report; the latest from %s as user %r, its %d in "
                        "a row (%d on its connection): answered after %.2f s", self.unlogged, key[0],
                        user[:64].decode("utf-8", "replace"), entry[0], on_connection, wait)
            self.logged_at = now
            self.unlogged = 0
        return wait

    def closes(self, on_connection: int) -> bool:
        """Is a connection with this many failures closed after its reply?"""
        return on_connection >= self.close_after


THROTTLE = LoginThrottle()  # one per process, like the process's proxy

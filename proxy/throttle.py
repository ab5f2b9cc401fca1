"""AUTH brute force: failed attempts slow down per client address, with a bound on memory.

`LoginThrottle` is sans-IO (a clock is all it reads). Per client address (the IP, not the port:
a guesser opens new connections) it remembers the failures in a row and when the next attempt may
be checked. `delay(address)` answers how long the attempt about to be checked waits, and reserves
its turn, so that attempts sent together over many connections are checked one after the other:
the n-th attempt after n-1 failures (or still in flight) waits `base * 2^(n-2)` after the one
before it, at most `cap` (0.05, 0.1, 0.2 ... 2 s: from about 50 guesses a second to one every 2 s
per address; a cap well under clients' socket timeouts, 5 s for redis-py, which retries a failed
AUTH three times: a misconfigured client must still get its WRONGPASS). `succeeded(address)` forgets the
address, `failed(address)` counts a failure (metrics
`redis_guard_auth_failures_total`, and a log line every `LOG_EVERY` seconds at most). An address
with no failure for `forget_after` seconds starts again; at most `size` addresses are remembered,
the least recently seen dropped first. `delay`/`failed`/`succeeded` serve the proxy's own AUTH
(applications: `check`, its thin asyncio layer, runs the password check after the delay) and an
AUTH forwarded to Redis alike.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time

from . import metrics

log = logging.getLogger("redis_guard.auth")


def _host(address) -> str:
    """The client's IP from a peer address (host, port[, flow, scope]), or the address itself."""
    return address[0] if isinstance(address, tuple) and address else str(address)


class LoginThrottle:
    LOG_EVERY = 10.0

    def __init__(self, base: float = 0.05, cap: float = 2.0, size: int = 65536, forget_after: float = 300.0,
                 clock=time.monotonic):
        self.base = base
        self.cap = cap
        self.size = size
        self.forget_after = forget_after
        self.clock = clock
        # host -> [failures in a row, attempts in flight, next attempt's earliest time, last failure]
        self.entries: collections.OrderedDict[str, list] = collections.OrderedDict()
        self.logged_at = float("-inf")
        self.unlogged = 0

    def step(self, attempts: int) -> float:
        """The wait between an attempt and the one after it, `attempts` failed or in flight."""
        return 0.0 if attempts <= 0 else min(self.cap, self.base * 2 ** (attempts - 1))

    def _entry(self, host: str, now: float) -> list:
        """The host's record, the most recently seen now (a new one drops the least recent)."""
        entry = self.entries.get(host)
        if entry is None:
            entry = self.entries[host] = [0, 0, now, now]
            if len(self.entries) > self.size:
                self.entries.popitem(last=False)
        else:
            self.entries.move_to_end(host)
            if entry[1] == 0 and now - entry[3] > self.forget_after:
                entry[0] = 0  # forgiven
        return entry

    def delay(self, address) -> float:
        """Seconds the attempt about to be checked must wait; reserves its turn."""
        now = self.clock()
        entry = self._entry(_host(address), now)
        start = max(now, entry[2])
        entry[2] = start + self.step(entry[0] + entry[1] + 1)
        entry[1] += 1
        return start - now

    def release(self, address) -> None:
        """An attempt that got no outcome: it is no longer in flight."""
        entry = self.entries.get(_host(address))
        if entry is not None:
            entry[1] = max(0, entry[1] - 1)

    def succeeded(self, address) -> None:
        entry = self.entries.get(_host(address))
        if entry is None:
            return
        entry[1] = max(0, entry[1] - 1)
        entry[0] = 0
        entry[2] = self.clock()
        if entry[1] == 0:
            del self.entries[_host(address)]

    def failed(self, address) -> None:
        now = self.clock()
        host = _host(address)
        entry = self._entry(host, now)
        entry[1] = max(0, entry[1] - 1)
        entry[0] += 1
        entry[3] = now
        metrics.AUTH_FAILURES.inc()
        self.unlogged += 1
        if now - self.logged_at >= self.LOG_EVERY:
            log.warning("%d failed AUTH attempt(s) since the last report; the latest from %s, its %d in a row: "
                        "its next attempt waits %.1f s", self.unlogged, host, entry[0], max(0.0, entry[2] - now))
            self.logged_at = now
            self.unlogged = 0

    def check(self, loop, address, verify, *args) -> asyncio.Future:
        """Run `verify(*args)` (a slow password check returning None on failure) in a worker
        thread once this address's turn comes, and count its outcome."""
        wait = self.delay(address)

        async def later():
            try:
                if wait > 0:
                    await asyncio.sleep(wait)
                result = await loop.run_in_executor(None, verify, *args)
            except BaseException:
                self.release(address)  # no outcome (cancelled, a bug): the turn only
                raise
            (self.failed if result is None else self.succeeded)(address)
            return result

        return asyncio.ensure_future(later(), loop=loop)


THROTTLE = LoginThrottle()  # one per process, like the process's proxy

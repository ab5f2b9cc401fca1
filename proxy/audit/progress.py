"""The progress line and the rate limit, as plain arithmetic on (keys done, time now).

`Progress.line` says how many keys were scanned, the rate, and, against the estimate (the sum of
DBSIZE over the servers scanned, taken at the start), how far along and how long is left. On a
terminal it is a bar redrawn in place (`\\r`, every `TTY_INTERVAL` seconds); otherwise one line
every `LOG_INTERVAL` seconds. With `--match` most keys are not returned, so the estimate is an
upper bound. `RateLimit.delay` is how long to wait before asking for more keys so that at most
`rate` keys a second are read.
"""

from __future__ import annotations

TTY_INTERVAL = 0.2
LOG_INTERVAL = 5.0
BAR = 24


def duration(seconds: float) -> str:
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


class Progress:
    def __init__(self, estimate: int, start: float, tty: bool):
        self.estimate = estimate
        self.start = start
        self.tty = tty
        self.interval = TTY_INTERVAL if tty else LOG_INTERVAL
        self.last = start

    def due(self, now: float) -> bool:
        if now - self.last >= self.interval:
            self.last = now
            return True
        return False

    def line(self, scanned: int, now: float) -> str:
        elapsed = max(now - self.start, 1e-9)
        rate = scanned / elapsed
        text = f"{scanned:,} keys, {rate:,.0f} keys/s, {duration(elapsed)}"
        if self.estimate > 0:
            share = min(scanned / self.estimate, 1.0)
            left = (self.estimate - scanned) / rate if rate > 0 and scanned < self.estimate else 0
            text = (f"{scanned:,} of ~{self.estimate:,} keys ({share:.0%}), {rate:,.0f} keys/s, "
                    f"{duration(elapsed)} elapsed, ~{duration(left)} left")
            if self.tty:
                filled = int(share * BAR)
                text = f"[{'#' * filled}{'.' * (BAR - filled)}] " + text
        return f"audit: {text}"


class RateLimit:
    """At most `rate` keys a second on average since `start` (None: no limit)."""

    def __init__(self, rate: float | None, start: float):
        self.rate = rate
        self.start = start

    def delay(self, done: int, now: float) -> float:
        if not self.rate:
            return 0.0
        return max(0.0, self.start + done / self.rate - now)

    def scan_count(self, count: int) -> int:
        """SCAN's COUNT under the limit: a tenth of a second's worth, so bursts stay short."""
        if not self.rate:
            return count
        return max(1, min(count, int(self.rate / 10)))

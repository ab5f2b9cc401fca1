"""Durations as people read them: `duration` exact ('30 days', '90 s', for settings and limits:
T3's messages, the key schema), `approximately` rounded to two units ('2 days 7 h', for a TTL
a key has left: the audit and its error texts).
"""

UNITS = ((86400, "day", "days"), (3600, "h", "h"), (60, "min", "min"))


def duration(seconds: float) -> str:
    """'1 s', '0.001 s', '30 days', '2 h', '90 s' (whole larger units only)."""
    if seconds >= 60 and float(seconds).is_integer():
        for size, one, many in UNITS:
            if seconds % size == 0:
                count = int(seconds // size)
                return f"{count} {one if count == 1 else many}"
    if float(seconds).is_integer():
        return f"{int(seconds)} s"
    return f"{seconds:.3f}".rstrip("0").rstrip(".") + " s"


def approximately(seconds: float) -> str:
    """A duration in its largest unit and the next one: '2 days 7 h', '1 h 30 min', '3 min 5 s',
    '45 s', '0.25 s' (for people reading a TTL, where `duration` is exact)."""
    if seconds < 60:
        return duration(round(seconds, 3) if seconds < 10 else round(seconds))
    rest = int(seconds)
    units = (*UNITS, (1, "s", "s"))
    first = next(at for at, (size, _, _) in enumerate(units) if rest >= size)
    parts = []
    for size, one, many in units[first:first + 2]:
        count, rest = divmod(rest, size)
        if count:
            parts.append(f"{count} {one if count == 1 else many}")
    return " ".join(parts)

"""How long the proxy waits for an upstream reply before it gives up (`request_timeout`).

Sans-IO: the connection (`connection.py`) asks only when its oldest request in flight has waited
longer than `request_timeout`, which is rare, so nothing here runs per request. A command that
blocks by design (BLPOP and the other blocking pops, XREAD/XREADGROUP BLOCK, WAIT, WAITAOF) may
wait its own timeout on top; one that blocks forever (a timeout of 0) is never cut short.
`allowance(sent, remaining)` reads the requests of a run not answered yet: the seconds they may
block together, or None for forever.
"""

from __future__ import annotations

import hiredis

# Blocking pops: the timeout (seconds, a float) is the last argument; BLMPOP and BZMPOP take it
# first (index 1), before numkeys.
_LAST = frozenset({b"blpop", b"brpop", b"brpoplpush", b"blmove", b"bzpopmin", b"bzpopmax"})
_FIRST = frozenset({b"blmpop", b"bzmpop"})


def block_seconds(args) -> float | None:
    """How long the command `args` (a list of bytes) may block by design: 0.0 for a command that
    does not block, None for one that may block forever."""
    if not args:
        return 0.0
    name = bytes(args[0]).lower()
    try:
        if name in _LAST and len(args) >= 3:
            return _seconds(float(args[-1]))
        if name in _FIRST and len(args) >= 3:
            return _seconds(float(args[1]))
        if name in (b"xread", b"xreadgroup"):
            for index in range(1, len(args) - 1):
                word = bytes(args[index]).lower()
                if word == b"streams":
                    break
                if word == b"block":
                    return _seconds(int(args[index + 1]) / 1000)
            return 0.0
        if name == b"wait" and len(args) == 3:
            return _seconds(int(args[2]) / 1000)
        if name == b"waitaof" and len(args) == 4:
            return _seconds(int(args[3]) / 1000)
    except ValueError:  # Redis refuses it at once
        return 0.0
    return 0.0


def _seconds(value: float) -> float | None:
    if value <= 0:
        return None if value == 0 else 0.0
    return value


def allowance(sent, count: int, remaining: int) -> float | None:
    """The seconds the `remaining` unanswered requests of a run of `count` (its bytes `sent`, or
    None for the proxy's own) may block together; None when one may block forever."""
    if not sent or remaining <= 0:
        return 0.0
    commands = []
    try:
        reader = hiredis.Reader()
        reader.feed(bytes(sent))
        while (command := reader.gets()) is not False:
            commands.append(command)
    except hiredis.ProtocolError:  # inline commands (`BLPOP q 0` and a line end)
        commands = [line.split() for line in bytes(sent).splitlines() if line.strip()]
    total = 0.0
    for args in commands[max(0, count - remaining):] if count >= remaining else commands:
        if not isinstance(args, list):
            continue
        seconds = block_seconds(args)
        if seconds is None:
            return None
        total += seconds
    return total

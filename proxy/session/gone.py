"""A client that is gone while a command of its waits upstream: the wait ends as Redis ends it.

Redis frees a client when it reads EOF on its socket (a close, or a half-close: shutdown of the
write side), blocked or not; a blocked command leaves nothing behind: no element popped or moved,
no stream entry added to a group's pending list for nobody. The proxy reads that EOF, not Redis,
and a command that waits (`waits`) holds the client's own upstream connection (a lease, or its
pinned connection; a cluster's WAIT, one lent by every master): `cut_waits` half-closes that
connection, so that Redis reads EOF there and frees its client exactly as it would have freed
the client itself. What Redis had already done (a pop just before) is still written back before
it closes, and reaches the client if it still reads; nothing is done after. The same happens at
shutdown, so that SIGTERM does not wait for a BLPOP 0. Ordinary commands in flight are answered
as before (the session closes once they are); scripts are not cut (Redis runs a script to its
end whoever waits for it). Why not CLIENT UNBLOCK from the control connection: it needs each
connection's client id and an ACL permission the proxy's user may lack, and it leaves the same
window as the half-close (a push between the client's EOF and the cut is served to the client
that is gone, as with Redis directly: a push before Redis reads EOF), wider by a round trip on
another connection; the half-close is what Redis itself does to a client that leaves.
"""

from __future__ import annotations

import logging

import hiredis

log = logging.getLogger("redis_guard.server")

# What waits besides the commands flagged `blocking` in the command table: WAIT and WAITAOF wait
# for replicas (no side effect, but WAIT 1 0 without replicas waits forever).
ALSO_WAITING = frozenset({b"wait", b"waitaof"})
# Flagged `blocking`, but they wait only with a BLOCK option before STREAMS.
BLOCK_OPTION = frozenset({b"xread", b"xreadgroup"})

_names: dict[int, frozenset] = {}  # id(command table) -> names of the commands that wait


def waiting_names(table) -> frozenset:
    """Lower-case names of the commands that may wait, from the command table's flags."""
    key = id(table)
    names = _names.get(key)
    if names is None:
        flagged = {spec.name.encode() for spec in table if "blocking" in spec.flags and "|" not in spec.name}
        names = _names[key] = frozenset(flagged) | ALSO_WAITING
    return names


def waits(args, names) -> bool:
    """Does this request wait (until data arrives, a timeout, replicas)?"""
    name = args[0].lower() if args else b""
    if name not in names:
        return False
    if name in BLOCK_OPTION:
        for arg in args[1:]:
            lowered = arg.lower()
            if lowered == b"block":
                return True
            if lowered == b"streams":
                return False
        return False
    return True


def unanswered(sent, remaining: int) -> list:
    """The last `remaining` requests of a run's bytes (those whose replies are still owed)."""
    reader = hiredis.Reader()
    reader.feed(sent)
    requests = []
    while True:
        try:
            request = reader.gets()
        except hiredis.ProtocolError:  # (never: a run's bytes are requests the proxy parsed)
            break
        if request is False:
            break
        requests.append(request)
    return requests[len(requests) - remaining:] if remaining < len(requests) else requests


def cut_waits(session) -> bool:
    """The client is gone (EOF) or the proxy stops: half-close its own upstream connection if a
    request that waits is unanswered there. True when it did."""
    cut = False
    for entry in session.queue:  # a cluster's WAIT, on a connection lent by every master
        lent = getattr(entry, "lent", None)
        if lent and entry.remaining > 0:
            for conn in lent:
                conn.half_close()
            cut = True
    own = session.own
    if own is None or own.closed:
        return cut
    table = getattr(session.backend.behaviour, "table", None)
    if table is None:
        return cut
    names = waiting_names(table)
    for entry in session.queue:
        remaining = getattr(entry, "remaining", 0)
        sent = getattr(entry, "sent", None)
        if getattr(entry, "conn", None) is not own or remaining <= 0 or sent is None:
            continue
        if any(waits(request, names) for request in unanswered(sent, remaining)):
            log.debug("client %s gone with a command that waits in flight: its upstream connection "
                      "half-closed", session.describe())
            own.half_close()
            return True
    return cut

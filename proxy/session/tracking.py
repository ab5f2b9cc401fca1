"""Whose connection a CLIENT TRACKING REDIRECT may name: one of the same client's, never another's.

Redis sends a tracking client's invalidations to the connection whose id REDIRECT names, any
connection of the server: through the proxy that could be another client's connection of its own
(a RESP3 push it never asked for, a `__redis__:invalidate` message into its subscription) or one
of the proxy's shared connections, where the pushes would land among other clients' replies. So
the proxy takes note of the ids it hands out, that is, the integer a session's `CLIENT ID` gets
from its own connection (`HandedIds.record`), and a REDIRECT must name one of them whose session
still holds that connection and is the same client: the same application under `applications:`,
else the same client host (the connections of one client library, its tracking connection and
its subscriber, come from one process). The connection named then takes pushes apart from its
replies (`UpstreamConnection.take_pushes`), as a tracking client's own does, so an invalidation
never reaches it as a reply. Any other id goes to Redis as an id no client has (`checked`), which
answers its own error for an id that does not exist, whether the server has the id or not:
nobody enumerates ids through it. A cluster's CLIENT ID is the proxy's own number (no id of a
server), so there REDIRECT is always refused, with the same words. Sans-IO but for the
registry's look at sessions.
"""

from __future__ import annotations

from ..pending import Receiver
from .behaviour import strict_int
from .clientkill import NO_SUCH_ID

REDIRECT = b"redirect"
PRUNE_FLOOR = 1024  # entries kept before the first sweep of departed sessions


def redirects(args) -> list:
    """The values of CLIENT TRACKING's REDIRECT options (`CLIENT TRACKING ON|OFF [REDIRECT id]
    [PREFIX p]... [BCAST] [OPTIN] [OPTOUT] [NOLOOP]`): as Redis reads them, one per REDIRECT."""
    out = []
    i = 3
    while i < len(args):
        word = args[i].lower()
        if word in (REDIRECT, b"prefix") and i + 1 < len(args):
            if word == REDIRECT:
                out.append(args[i + 1])
            i += 2
        else:
            i += 1
    return out


def same_client(session) -> tuple:
    """Who a session is, for REDIRECT: its application, else its client's host."""
    if session.app is not None:
        return ("app", session.app)
    peer = session.peer
    return ("host", peer[0] if isinstance(peer, tuple) and peer else peer)


class HandedIds:
    """id -> (session, connection) for every id a session's CLIENT ID was answered; one per
    proxy process. Entries of sessions gone are swept when the map has doubled since the last
    sweep: memory bounded by twice the live ones (plus the floor), time linear overall."""

    def __init__(self):
        self.by_id = {}
        self.sweep_at = PRUNE_FLOOR

    def record(self, client_id: int, session, conn) -> None:
        self.by_id[client_id] = (session, conn)
        if len(self.by_id) > self.sweep_at:
            self.by_id = {key: entry for key, entry in self.by_id.items() if _holds(*entry)}
            self.sweep_at = max(PRUNE_FLOOR, 2 * len(self.by_id))

    def target(self, client_id: int, session):
        """The connection REDIRECT `client_id` may send `session`'s invalidations to, or None."""
        entry = self.by_id.get(client_id)
        if entry is None or not _holds(*entry):
            return None
        target, conn = entry
        return conn if same_client(target) == same_client(session) else None


def _holds(session, conn) -> bool:
    """The session is open and still on the connection its CLIENT ID was answered on."""
    return session.own is conn and conn.owner is session and not conn.closed and \
        session in session.proxy.sessions


def handed_ids(proxy) -> HandedIds:
    ids = getattr(proxy, "handed_ids", None)
    if ids is None:
        ids = proxy.handed_ids = HandedIds()
    return ids


def checked(session, args) -> list | None:
    """`args` with every REDIRECT that names no connection of the same client made to name
    nobody (`NO_SUCH_ID`: Redis then answers its own error, in its place among the replies, as
    it would in a transaction or after CLIENT REPLY OFF), or None when `args` may go as they are.
    The connections named rightly take pushes apart from now on. A value that is no integer
    stays: Redis answers its error."""
    values = redirects(args)
    if not values:
        return None
    ids = handed_ids(session.proxy)
    refused = set()
    for value in values:
        client_id = strict_int(value)
        if client_id is None:
            continue
        conn = ids.target(client_id, session)
        if conn is None:
            refused.add(value)
        elif conn.pushes_to is None:
            conn.take_pushes(ids.by_id[client_id][0])
    return naming_nobody(args, refused) if refused else None


def naming_nobody(args, refused=None) -> list:
    """`args` with the REDIRECT values in `refused` (every one: None) replaced by `NO_SUCH_ID`."""
    out = list(args)
    i = 3
    while i + 1 < len(out):
        word = out[i].lower()
        if word == REDIRECT and (refused is None or out[i + 1] in refused):
            out[i + 1] = NO_SUCH_ID
        i += 2 if word in (REDIRECT, b"prefix") else 1
    return out


class ClientIdReply(Receiver):
    """Stands in for the session for CLIENT ID's reply: the id is recorded as handed to the
    session on `conn`, and the reply goes on to the client."""

    __slots__ = ("session", "conn", "head")

    def __init__(self, session, conn):
        self.session = session
        self.conn = conn
        self.head = b""  # (a reply cut across reads: its start, at most a few bytes)

    def deliver(self, pending, data: bytes, done: int) -> None:
        if self.head is not None:
            head = self.head + data[:24]
            if done or len(head) >= 24:
                self.head = None
                if head[:1] == b":":
                    end = head.find(b"\r\n")
                    client_id = strict_int(head[1:end]) if end > 1 else None
                    if client_id is not None:
                        handed_ids(self.session.proxy).record(client_id, self.session, self.conn)
            else:
                self.head = head
        self.session.deliver(pending, data, done)

    def pending_failed(self, pending, error: bytes, partial: bool) -> None:
        self.session.pending_failed(pending, error, partial)

"""A MOVED or ASK on a transaction's connection, shown to the client as an error it can act on.

A transaction (WATCH, MULTI) runs on a connection lent by the owner of its first key's slot
(`route.TxnRoute`). When that slot migrates away before the proxy's map learns it, the node
answers its commands `-MOVED`/`-ASK` (nothing ran; in MULTI the node flags the transaction,
so EXEC answers EXECABORT; an EXEC itself answered so has discarded it). The command cannot go
to the new owner: what the transaction watched and queued is on the old owner's connection. So
`TxnReplies` stands between the connection and the session for each run the route sends there:
a whole reply that is a redirection becomes a `-TRYAGAIN` error that names no node and says
what to do (`errors.slot_moving`), the map learns a MOVED at once (the retry goes to the new
owner; a refused WATCH leaves nothing watched), every other byte passes as it came. The
replies are cut with a `ReplySplitter` of its own (exact across reads: a `-` inside a value is
none); an error reply is held until whole (one line), nothing else is.
"""

from __future__ import annotations

import hiredis

from ... import errors
from ...pending import Receiver
from ...resp.replies import ReplySplitter, ReplyStreamError
from ...session.states import WATCHING
from .routing.redirect import parse_redirect

__all__ = ["TxnReplies", "redirection", "unredirected", "command_of"]


def redirection(reply: bytes) -> bool:
    return reply.startswith((b"-MOVED ", b"-ASK "))


def unredirected(reply: bytes, args, where: str = errors.SLOT_MOVING_RETRY) -> bytes:
    """`reply`, but a redirection the proxy could not follow (too many, no connection to the node
    named) as the TRYAGAIN error that names no node: a client never sees a node's address."""
    return errors.slot_moving(args, where) if redirection(reply) else reply


def command_of(request: bytes) -> list:
    """A command's arguments from its request bytes ([] if they cannot be read)."""
    reader = hiredis.Reader()
    reader.feed(request)
    try:
        args = reader.gets()
    except hiredis.ProtocolError:
        return []
    return args if isinstance(args, list) else []


class TxnReplies(Receiver):
    """The replies to one run of commands on a transaction's connection (`names`: the commands,
    `queued`: sent inside MULTI), redirections replaced (see the module)."""

    __slots__ = ("session", "router", "commands", "queued", "splitter", "held")

    def __init__(self, session, router, commands, queued: bool):
        self.session = session
        self.router = router
        self.commands = commands
        self.queued = queued
        self.splitter = ReplySplitter()
        self.held = None  # the start of an error reply not whole yet

    def deliver(self, entry, data: bytes, done: int) -> None:
        splitter = self.splitter
        out = []
        whole_replies = 0
        pos = 0
        size = len(data)
        try:
            while pos < size:
                starting = not splitter.in_reply
                end, whole, _pushes = splitter.scan(data, pos, 1)
                piece = data[pos:end]
                pos = end
                if self.held is not None:
                    piece = self.held + piece
                    self.held = None
                elif not (starting and piece[:1] == b"-"):
                    out.append(piece)
                    whole_replies += whole
                    continue
                if not whole:
                    self.held = piece
                    continue
                if redirection(piece):
                    piece = self._replaced(entry.count - entry.remaining + whole_replies, piece, entry.conn)
                out.append(piece)
                whole_replies += 1
        except ReplyStreamError:
            out.append(data[pos:])  # (the connection fails on it: shown as it is)
        if out:
            self.session.deliver(entry, b"".join(out), whole_replies)

    def _replaced(self, index: int, reply: bytes, conn) -> bytes:
        commands = self.commands
        args = commands[index] if 0 <= index < len(commands) else None
        redirect = parse_redirect(reply)
        if redirect is not None and not redirect.ask and conn is not None:
            self.router.moved(redirect.slot, redirect.address(conn.address))
        name = args[0].lower() if args else b""
        if name == b"exec":
            where = errors.SLOT_MOVING_EXEC
        elif name == b"watch":
            where = errors.SLOT_MOVING_WATCH
            self._unwatch(conn)
        elif self.queued:
            where = errors.SLOT_MOVING_QUEUED
        else:
            where = errors.SLOT_MOVING_RETRY
        return errors.slot_moving(args, where)

    def _unwatch(self, conn) -> None:
        """WATCH refused: nothing stays watched (the client sees an error, as if it had not run;
        what an earlier WATCH of the same slot watched is doomed: the slot's keys are leaving). As
        the client's UNWATCH would, the connection goes back once everything sent there answered
        (before this reply is delivered: the session's drain sees the transaction over)."""
        session = self.session
        if session.state.txn is WATCHING and conn is not None and session.own is conn:
            session.send_hidden(conn, [("UNWATCH",)])
            session.state.to("unwatch")
            session.extra.txn_slot = None
            session.bind()

    def pending_failed(self, entry, error: bytes, partial: bool) -> None:
        self.held = None
        self.session.pending_failed(entry, error, partial)

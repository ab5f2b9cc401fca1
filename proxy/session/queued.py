"""Commands queued in a transaction whose effect outlives it, learnt from EXEC's reply.

Theory of operation: what a client queues between MULTI and EXEC runs at EXEC, on the
connection the transaction took. Two such commands change more than that connection: CLIENT
PAUSE/UNPAUSE (Redis pauses every client: the proxy's dispatch tables must know) and, in front
of a cluster, HELLO (the client's protocol: its later commands go to the shared connections of
the other protocol) and CLIENT SETNAME (the proxy answers CLIENT GETNAME outside transactions).
Their handlers list them in `Session.queued_effects`; EXEC goes with an `ExecWatch`, which reads
EXEC's whole reply: when the transaction ran, the pauses took effect, the last HELLO reply in it
says the client's protocol and the last CLIENT SETNAME names the client (Redis checked the name
when it queued the command). A discarded, aborted or WATCH-failed transaction changes nothing.
"""

from __future__ import annotations

import hiredis

from ..login import parse_hello
from ..pending import Receiver
from .pause import took_effect, watches

HELLO_KEYS = frozenset((b"server", b"version", b"proto", b"id", b"mode"))


def is_hello(args) -> bool:
    return args[0].lower() == b"hello"


def is_setname(args) -> bool:
    return len(args) == 3 and args[0].lower() == b"client" and args[1].lower() == b"setname"


def is_no_evict(args) -> bool:
    return len(args) == 3 and args[0].lower() == b"client" and args[1].lower() == b"no-evict"


def hello_name(args, name):
    """The name HELLO's SETNAME option gives the client, else `name`."""
    login = parse_hello(args)
    if isinstance(login, bytes) or len(login.hello) < 4:  # refused, or no SETNAME
        return name
    return login.hello[-1]  # `[HELLO, version, SETNAME, name]`


class ExecWatch(Receiver):
    """Receives EXEC's reply for a transaction that queued `effects` (their arguments, in order)."""

    __slots__ = ("session", "effects", "chunks")

    def __init__(self, session, effects):
        self.session = session
        self.effects = effects
        self.chunks = []

    def deliver(self, pending, data: bytes, done: int) -> None:
        self.chunks.append(data)
        if done:
            reply = b"".join(self.chunks)
            self.chunks = []
            self._learn(reply)
            self.session.deliver(pending, reply, done)

    def pending_failed(self, pending, error: bytes, partial: bool) -> None:
        self.session.pending_failed(pending, error, False)

    def _learn(self, reply: bytes) -> None:
        reader = hiredis.Reader()
        reader.feed(reply)
        try:
            results = reader.gets()
        except hiredis.ProtocolError:
            return
        if not isinstance(results, list):  # EXECABORT, or a null reply: nothing ran
            return
        session = self.session
        hellos = [args for args in self.effects if is_hello(args)]
        accepted = [found for found in map(hello_protocol, results) if found is not None] if hellos else []
        every_hello_ran = len(accepted) == len(hellos)  # else which HELLO failed is not known
        name = None
        for args in self.effects:
            if watches(args):
                took_effect(session.backend.pauses, args)
            elif is_setname(args):
                name = args[2]
            elif is_no_evict(args) and args[2].lower() in (b"on", b"off"):  # (else its syntax error)
                session.extra.no_evict = args[2].lower() == b"on"
            elif every_hello_ran and is_hello(args):
                name = hello_name(args, name)
        if name is not None:
            session.extra.name = name or None
        if accepted and accepted[-1] in (2, 3):  # the last HELLO that Redis accepted sets the protocol
            session.protocol = session.policy_state.protocol = accepted[-1]


def hello_protocol(result) -> int | None:
    """The protocol a HELLO reply says (a RESP3 map, or RESP2's flat list of names and values)."""
    if isinstance(result, dict) and HELLO_KEYS <= result.keys():
        return result[b"proto"]
    if isinstance(result, list) and len(result) >= 10 and HELLO_KEYS <= set(result[0::2]):
        fields = dict(zip(result[0::2], result[1::2]))
        return fields[b"proto"]
    return None

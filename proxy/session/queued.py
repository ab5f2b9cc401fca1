"""Commands queued in a transaction whose effect outlives it, learnt from EXEC's reply.

Theory of operation: what a client queues between MULTI and EXEC runs at EXEC, on the
connection the transaction took. Two such commands change more than that connection: CLIENT
PAUSE/UNPAUSE (Redis pauses every client: the proxy's dispatch tables must know) and, in front
of a cluster, HELLO (the client's protocol: its later commands go to the shared connections of
the other protocol). Their handlers list them in `Session.queued_effects`; EXEC goes with an
`ExecWatch`, which reads EXEC's whole reply: when the transaction ran, the pauses took effect
and the last HELLO reply in it says the client's protocol (an aborted transaction changes
nothing).
"""

from __future__ import annotations

import hiredis

from .pause import took_effect, watches

HELLO_KEYS = frozenset((b"server", b"version", b"proto", b"id", b"mode"))


def is_hello(args) -> bool:
    return args[0].lower() == b"hello"


class ExecWatch:
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
        for args in self.effects:
            if watches(args):
                took_effect(session.backend.pauses, args)
        if any(is_hello(args) for args in self.effects):
            protocol = None
            for result in results:  # the last HELLO that Redis accepted sets the protocol
                found = hello_protocol(result)
                if found is not None:
                    protocol = found
            if protocol in (2, 3):
                session.protocol = session.policy_state.protocol = protocol


def hello_protocol(result) -> int | None:
    """The protocol a HELLO reply says (a RESP3 map, or RESP2's flat list of names and values)."""
    if isinstance(result, dict) and HELLO_KEYS <= result.keys():
        return result[b"proto"]
    if isinstance(result, list) and len(result) >= 10 and HELLO_KEYS <= set(result[0::2]):
        fields = dict(zip(result[0::2], result[1::2]))
        return fields[b"proto"]
    return None

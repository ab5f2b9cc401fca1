"""Cluster error replies: redirections (MOVED, ASK) and the other cluster errors.

Theory of operation
-------------------
Everything here reads one complete error reply as the proxy holds it (the bytes from ``-``
to ``\\r\\n``, as ``ReplySplitter`` cut it; the ``\\r\\n`` may also be absent) and never does
I/O. The texts are Redis 7.0's own (src/cluster.c, ``clusterRedirectClient``):

================  ===========================================  ================================
error             example                                      what the router does about it
================  ===========================================  ================================
``MOVED``         ``-MOVED 3999 127.0.0.1:6381``               slot now lives at that node:
                                                               ``SlotMap.with_moved``, resend
``ASK``           ``-ASK 3999 127.0.0.1:6381``                 slot is migrating: send
                                                               ``ASKING`` + the command there,
                                                               once; the map does not change
``TRYAGAIN``      ``-TRYAGAIN Multiple keys request during     multi-key command during a
                  rehashing of slot``                          migration: retry later
``CLUSTERDOWN``   ``-CLUSTERDOWN Hash slot not served``,       no usable owner: refresh the
                  ``-CLUSTERDOWN The cluster is down``         map; answer the client
``CROSSSLOT``     ``-CROSSSLOT Keys in request don't hash to   a client error: forward it
                  the same slot``
================  ===========================================  ================================

The address in a redirection is the node's preferred endpoint followed by ``:port``. Redis
writes an IPv6 address without brackets (``::1:6381``); ``[::1]:6381`` is accepted too. The
host is empty (``:6381``) when the node's endpoint is unknown and ``?`` when the preferred
endpoint is a hostname the node does not announce: both mean "the host of the node that
answered", which ``Redirect.address(answered_by)`` substitutes.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from ....config import Address
from .slots import SLOT_COUNT

__all__ = [
    "ASKING",
    "CLUSTERDOWN_SLOT_NOT_SERVED",
    "CROSSSLOT",
    "ClusterError",
    "Redirect",
    "classify_error",
    "parse_redirect",
]

# Redis's own texts, for replies the proxy writes in Redis's place.
CROSSSLOT = b"-CROSSSLOT Keys in request don't hash to the same slot\r\n"
CLUSTERDOWN_SLOT_NOT_SERVED = b"-CLUSTERDOWN Hash slot not served\r\n"
# The command that must precede a command resent after ASK, on the same connection.
ASKING = b"*1\r\n$6\r\nASKING\r\n"


class ClusterError(enum.Enum):
    MOVED = b"MOVED"
    ASK = b"ASK"
    TRYAGAIN = b"TRYAGAIN"
    CLUSTERDOWN = b"CLUSTERDOWN"
    CROSSSLOT = b"CROSSSLOT"


_BY_CODE = {kind.value: kind for kind in ClusterError}


def classify_error(reply: bytes) -> ClusterError | None:
    """Which cluster error ``reply`` is (by its first word), None for any other reply."""
    if reply[:1] != b"-":
        return None
    end = len(reply)
    for stop in (b" ", b"\r"):
        at = reply.find(stop, 1, end)
        if at >= 0:
            end = at
    return _BY_CODE.get(reply[1:end])


@dataclass(frozen=True, slots=True)
class Redirect:
    """A ``MOVED`` or ``ASK`` redirection. ``host`` is None when Redis left it to us
    (empty or ``?``): the host of the node that answered."""

    ask: bool  # True for ASK (one command, after ASKING), False for MOVED
    slot: int
    host: str | None
    port: int

    @property
    def kind(self) -> ClusterError:
        return ClusterError.ASK if self.ask else ClusterError.MOVED

    def address(self, answered_by: Address) -> Address:
        """Where to go: the named node, or on ``answered_by``'s host when no host was named."""
        return Address(answered_by.host if self.host is None else self.host, self.port)


def parse_redirect(line: bytes) -> Redirect | None:
    """The redirection in an error reply (``-MOVED 3999 127.0.0.1:6381\\r\\n``), or None when
    ``line`` is not a well-formed MOVED or ASK error."""
    if line.startswith(b"-MOVED "):
        ask, rest = False, line[7:]
    elif line.startswith(b"-ASK "):
        ask, rest = True, line[5:]
    else:
        return None
    if rest.endswith(b"\r\n"):
        rest = rest[:-2]
    parts = rest.split(b" ")
    if len(parts) != 2:
        return None
    slot_text, target = parts
    host_bytes, colon, port_text = target.rpartition(b":")
    if not colon or not slot_text.isdigit() or not port_text.isdigit():
        return None
    slot, port = int(slot_text), int(port_text)
    if slot >= SLOT_COUNT or not 0 < port <= 65535:
        return None
    if host_bytes.startswith(b"[") and host_bytes.endswith(b"]"):
        host_bytes = host_bytes[1:-1]
    if not host_bytes or host_bytes == b"?":
        return Redirect(ask, slot, None, port)
    try:
        host = host_bytes.decode("ascii")
    except UnicodeDecodeError:
        return None
    return Redirect(ask, slot, host, port)

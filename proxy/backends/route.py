"""The `Route` interface: where a session's ordinary commands go, the per-command routing hook of
the dispatch loop. The session (proxy/session/session.py) calls it and every backend implements
it (`SharedRoute`, `OwnRoute`, `StreamRoute`, the cluster's routes): this module is what both
sides import, and depends on neither. Compiled, it is a `cdef` class (route.pxd) whose `forward`
the compiled session calls as a C call."""

from __future__ import annotations

from .. import compiled


class Route:
    """Where ordinary commands go: the per-command routing hook of the dispatch loop (a
    backend's shared route, a connection of the client's own...). Every route subclasses it, so
    that the compiled session calls a compiled route's `forward` without a Python call."""

    __slots__ = compiled.declared_fields(__file__, "Route")

    def forward(self, session, batch, start: int, stop: int) -> None:
        """commands[start:stop] of `batch`, ordinary ones; their replies to the session in order."""
        raise NotImplementedError

    def send(self, session, args, data: bytes, count: int, receiver) -> None:
        """One request the proxy built for `args` (a policy rewrite, a DISCARD), `count` replies."""
        raise NotImplementedError

    def hidden(self, session, args, commands) -> None:
        """Commands the policy adds after `args`, their replies seen by nobody."""
        raise NotImplementedError



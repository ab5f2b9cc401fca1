"""Top-level RESP3 pushes cut out of a connection's replies, with no I/O.

A client that turns on CLIENT TRACKING gets its invalidation messages as RESP3 pushes (`>`) on
its own connection, unasked, between the replies to its commands. The replies stay paired with
the requests when the pushes are cut out where a reply could start and handed to the client
apart: `PushCutter` reads one push, its header line and then its elements, which a
`ReplySplitter` counts as values. A push is handed on whole, however the reads cut it.
"""

from __future__ import annotations

from .replies import ReplySplitter, ReplyStreamError

__all__ = ["PushCutter"]

_MAX_HEADER = 32  # ">9223372036854775807\r\n" and then some: a longer line is not RESP


class PushCutter:
    """The push in progress, across reads."""

    __slots__ = ("header", "left", "elements", "parts")

    def __init__(self) -> None:
        self.header = b""  # the start of a push's header line, cut by the end of a read
        self.left = -1  # elements still to come of the push in progress (-1: no push in progress)
        self.elements = None  # the ReplySplitter of its elements
        self.parts = []  # its bytes so far

    @property
    def in_push(self) -> bool:
        return self.left >= 0 or bool(self.header)

    def cut(self, data: bytes, pos: int) -> tuple[int, bytes | None]:
        """The push that starts at data[pos] (a '>' where a reply could start), or goes on there:
        (where its bytes in `data` end, the push when it is whole, else None)."""
        if self.left < 0:
            nl = data.find(b"\n", pos)
            if nl < 0:
                self.header += data[pos:]
                if len(self.header) > _MAX_HEADER:
                    raise ReplyStreamError(f"push header line too long: {self.header[:40]!r}")
                return len(data), None
            line = self.header + data[pos:nl + 1]
            self.header = b""
            digits = line[1:-2]
            if line[:1] != b">" or line[-2:] != b"\r\n" or not digits.isdigit():
                raise ReplyStreamError(f"malformed RESP push header {line[:40]!r}")
            self.left = int(digits)
            self.elements = ReplySplitter()
            self.parts.append(line)
            pos = nl + 1
        if self.left:
            end, done, pushes = self.elements.scan(data, pos, self.left)
            if pushes:
                raise ReplyStreamError("a push inside a push")
            self.left -= done
            self.parts.append(data[pos:end])
            pos = end
        if self.left:
            return pos, None
        push = b"".join(self.parts)
        self.parts = []
        self.left = -1
        self.elements = None
        return pos, push

"""C4: DEL of a big key blocks the server while it frees the value; UNLINK frees it in the
background. DEL is rewritten to UNLINK: same arguments, same reply (the number of keys removed)."""

from __future__ import annotations

from ..base import RewriteRule, register


@register
class UnlinkInsteadOfDel(RewriteRule):
    id = "C4"
    order = 106
    title = "UNLINK instead of DEL"
    server_commands = frozenset({"unlink"})

    def applies_to(self, spec) -> bool:
        return spec.name == "del"

    def rewrite(self, call):
        return [[b"UNLINK", *call.args[1:]]]

    def describe(self) -> str:
        return "rewrite DEL to UNLINK (the value is freed in the background; same reply)"

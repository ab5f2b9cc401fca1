"""A key's class under the policy's translate table (policy/keyclass.py), and whether it is the
class of the last key that passed: what the session's loop and the plans' memos check for every
command they pass on (`session._key_passes`, `memo.Memo`). In C when built
(`resp/_compiled_requests.pyx`, cimported by the compiled session and memo), else the pure twins
here. A leaf module: the session and the plans' memos import it."""

from __future__ import annotations

from .. import compiled


def pure_same_class(key: bytes, table, kept) -> bool:
    """Is `kept` (the class of the last key that passed, or None) the class of `key`?"""
    return kept is not None and bytes.translate(key, table) == kept


# A key's class is `key.translate(table)`: the type's own function (no method lookup on the key
# for every command), in C when built; compared without making it when built.
_compiled = compiled.load("proxy.resp._compiled_requests")
key_class = _compiled.key_class if _compiled is not None else bytes.translate
same_class = _compiled.same_class if _compiled is not None else pure_same_class

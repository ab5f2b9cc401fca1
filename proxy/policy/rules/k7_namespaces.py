"""K7: namespaces. One project, one namespace: an application uses only the key prefixes it has
applied for, and a read-only application writes nothing.

The `K7` entry of `rules:` holds the mode and what happens to a client that is no application
(`anonymous: reject`, the default, or `allow`, for `auth: optional`); the prefixes and
`read_only` come from each entry of the `applications:` section. The loader compiles them, per
application, into `Prefixes` (a key rule: one literal alternation folded into the engine's
combined key regex, so an owned key costs nothing more) and `ReadOnly` (a command rule on the
commands that write: the `@write` ACL category, or a key spec that inserts, updates or deletes,
which catches `EVAL`/`FCALL` but not `EVAL_RO`).
"""

from __future__ import annotations

from ..base import CommandRule, KeyRule, Rule, register
from ._keyshape import fullmatcher, key_bytes, literal, subject
from .c2_deny import command_words

WRITE_KEY_FLAGS = frozenset({"INSERT", "UPDATE", "DELETE", "OW", "RM"})


@register
class Namespaces(Rule):
    """The K7 settings; the checks are the rules below, built per application."""

    id = "K7"
    title = "namespace"

    def __init__(self, settings):
        super().__init__(settings)
        self.anonymous = settings.get("anonymous", "reject", kind=str, choices=("reject", "allow"))

    def describe(self) -> str:
        return (f"keys only under the prefixes each application applied for; clients that are no "
                f"application: {self.anonymous}")


class Prefixes(KeyRule):
    id = "K7"
    title = "namespace"

    def __init__(self, mode: str, app: str | None, prefixes: tuple[str, ...]):
        self.mode = mode
        self.app = app
        self.prefixes = prefixes
        if prefixes:
            self.pattern = "(?:" + "|".join(literal(p) for p in sorted(prefixes, key=len, reverse=True)) + ").*+"
        else:
            self.pattern = "(?!)"  # owns nothing: every key is outside
        self._full = fullmatcher(self.pattern)

    def check_key(self, key: str):
        if self._full(key_bytes(key)):
            return None
        if self.app is None:
            return self.finding(subject(key), "authenticate as the application that applied for "
                                              "this key's prefix (AUTH user password)")
        if not self.prefixes:
            return self.finding(subject(key), f"application '{self.app}' has applied for no key "
                                              "prefix; ask the operators to register one")
        owned = ", ".join(f"'{p}'" for p in self.prefixes)
        return self.finding(subject(key), f"application '{self.app}' may use keys under {owned} "
                                          "only; apply for a new prefix with the operators")

    def describe(self) -> str:
        if self.app is None:
            return "clients that are no application use no key"
        return f"'{self.app}' uses keys under {', '.join(self.prefixes) or 'no prefix'}"


class ReadOnly(CommandRule):
    id = "K7"
    title = "namespace"

    def __init__(self, mode: str, app: str):
        self.mode = mode
        self.app = app

    def applies_to(self, spec) -> bool:
        return "write" in spec.acl_categories or any(
            not WRITE_KEY_FLAGS.isdisjoint(key_spec.flags) for key_spec in spec.key_specs)

    def check(self, call):
        return self.finding(f"command {command_words(call.name)}",
                            f"application '{self.app}' is read-only; ask the operators for write access")

    def describe(self) -> str:
        return f"'{self.app}' is read-only: no command that writes"

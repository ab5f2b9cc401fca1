"""K7: namespaces. One project, one namespace: an application uses only the key prefixes it has
applied for, and a read-only application writes nothing.

The `K7` entry of `rules:` holds the mode and what happens to a client that is no application
(`anonymous: reject`, the default, or `allow`, for `auth: optional`); the prefixes and
`read_only` come from each entry of the `applications:` section. The loader compiles them, per
application, into `Prefixes` (a key rule: one literal alternation folded into the engine's
combined key regex, so an owned key costs nothing more), `ReadOnly` (a command rule on the
commands that write: the `@write` ACL category, or a key spec that inserts, updates or deletes,
which catches `EVAL`/`FCALL` but not `EVAL_RO`) and `OwnKeysOnly` (the commands that reach keys
no argument names: SCAN lists only the application's keys, RANDOMKEY, SWAPDB, MOVE and SELECT
are refused, SORT's BY/GET patterns must lie under a prefix).

SCAN: a `MATCH` glob whose literal start (up to the first `*`, `?`, `[`) lies under one of the
application's prefixes passes as it is; without `MATCH`, an application of one prefix gets
`MATCH <prefix>*` added (the reply is SCAN's own, in RESP2 and RESP3, and a cluster session's
cursor over the masters stays its own); anything else is refused with the SCAN to send instead
(one per prefix). A client that is no application under `anonymous: reject` owns no prefix.
"""

from __future__ import annotations

from ..base import CommandRule, KeyRule, RewriteRule, Rule, current_commands, register, same_command
from ._commands import command_words
from ._keyshape import fullmatcher, glob_escape, glob_literal_prefix, key_bytes, literal, subject

WRITE_KEY_FLAGS = frozenset({"INSERT", "UPDATE", "DELETE", "OW", "RM"})


@register
class Namespaces(Rule):
    """The K7 settings; the checks are the rules below, built per application."""

    id = "K7"
    order = 207
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

    def denies(self, spec) -> bool:
        return self.applies_to(spec)

    def check(self, call):
        return self.finding(f"command {command_words(call.name)}",
                            f"application '{self.app}' is read-only; ask the operators for write access")

    def describe(self) -> str:
        return f"'{self.app}' is read-only: no command that writes"


# Commands that reach keys no argument names (or every key of a database): refused to an
# application, with what to do instead.
ELSEWHERE = {
    "randomkey": "RANDOMKEY returns any key of the database: SCAN with MATCH <prefix>* instead",
    "swapdb": "SWAPDB swaps every application's keys with another database's",
    "move": "MOVE takes the key to a database the proxy does not give the application",
    "select": "the application's keys live in the proxy's database: use key prefixes, not databases",
}
SORT_PATTERNS = frozenset({b"by", b"get"})


class OwnKeysOnly(RewriteRule):
    """What an application reaches beside the keys it names (the module's docstring)."""

    id = "K7"
    title = "namespace"

    def __init__(self, mode: str, app: str | None, prefixes: tuple[str, ...]):
        self.mode = mode
        self.app = app
        self.prefixes = tuple(prefix.encode() for prefix in prefixes)
        self.owned = ", ".join(f"'{p}'" for p in prefixes)
        self.scans = " or ".join(f"SCAN <cursor> MATCH {glob_escape(p).decode('utf-8', 'replace')}*"
                                 for p in self.prefixes)

    def applies_to(self, spec) -> bool:
        return spec.name in ELSEWHERE or spec.name in ("scan", "keys", "sort", "sort_ro")

    def denies(self, spec) -> bool:
        return spec.name in ELSEWHERE

    def _owns(self, literal_start: bytes) -> bool:
        return any(literal_start.startswith(prefix) for prefix in self.prefixes)

    def _whose(self) -> str:
        if self.app is None:
            return "a client that is no application owns no key: authenticate first (AUTH user password)"
        if not self.prefixes:
            return f"application '{self.app}' has applied for no key prefix; ask the operators to register one"
        return f"application '{self.app}' may use keys under {self.owned} only"

    def check(self, call):
        name = call.name
        if name in ELSEWHERE:
            return self.finding(f"command {command_words(name)}", f"{self._whose()}; {ELSEWHERE[name]}")
        if name == "scan":
            return self._check_scan(call.args)
        if name == "keys":  # denied by the baseline guard; an application allowed it lists its own
            return self._check_pattern("KEYS", call.args[1] if len(call.args) > 1 else None)
        return self._check_sort(call.args)

    def _check_scan(self, args):
        match = _scan_match(args)
        if match is None and len(self.prefixes) == 1:
            return None  # rewrite() adds the MATCH
        return self._check_pattern("SCAN", match)

    def _check_pattern(self, command: str, pattern: bytes | None):
        """A glob listing key names (SCAN's MATCH, KEYS'): its literal start under a prefix."""
        if pattern is not None and self._owns(glob_literal_prefix(pattern)):
            return None
        shown = pattern.decode("utf-8", "backslashreplace") if pattern is not None else None
        subject = f"command {command}" if pattern is None else f"pattern '{shown}'"
        if not self.prefixes:
            return self.finding(subject, self._whose())
        how = "one SCAN per prefix" if pattern is None else "the pattern must start with an owned prefix"
        return self.finding(subject, f"{self._whose()}: {how}: {self.scans}")

    def _check_sort(self, args):
        """SORT ... BY/GET pattern: the key read is the pattern with its first `*` replaced by an
        element; `#` and a pattern without `*` read no key."""
        i = 2
        while i + 1 < len(args):
            word = args[i].lower()
            if word in SORT_PATTERNS:
                pattern = args[i + 1]
                star = pattern.find(b"*")
                if pattern != b"#" and star >= 0 and not self._owns(pattern[:star]):
                    shown = pattern.decode("utf-8", "backslashreplace")
                    return self.finding(f"pattern '{shown}'", f"{self._whose()}: SORT {word.decode().upper()} "
                                                              "reads the keys its pattern names")
                i += 2
            elif word == b"limit":
                i += 3
            elif word == b"store":
                i += 2
            else:
                i += 1
        return None

    def rewrite(self, call):
        if call.name != "scan" or len(self.prefixes) != 1:
            return None
        commands = current_commands(call)
        args = commands[0]
        if not same_command(call, args) or len(args) < 2 or _scan_match(args) is not None:
            return None
        return [[*args, b"MATCH", glob_escape(self.prefixes[0]) + b"*"], *commands[1:]]

    def describe(self) -> str:
        return "SCAN limited to the application's prefixes; RANDOMKEY, SWAPDB, MOVE, SELECT refused"


def _scan_match(args) -> bytes | None:
    """The MATCH pattern of `SCAN cursor [MATCH p] [COUNT n] [TYPE t]` (the last one, as Redis
    reads them), or None."""
    match = None
    i = 2
    while i + 1 < len(args):
        if args[i].lower() == b"match":
            match = args[i + 1]
        i += 2
    return match


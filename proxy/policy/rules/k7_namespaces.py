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
are refused, and so is COPY's DB option, SORT's BY/GET patterns must lie under a prefix).

Channels and key-name broadcasts are the application's own as its keys are: `PUBSUB CHANNELS` and
`SHARDCHANNELS` list only its channels (a pattern under a prefix, or one added as SCAN's MATCH
is), `NUMSUB`/`SHARDNUMSUB` of a channel outside its prefixes is refused as a key outside them
is, and `CLIENT TRACKING ... BCAST` (the names of every key that changes) needs `PREFIX`es that
lie under the application's prefixes.

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
# PUBSUB's subcommands that list channel names (by an optional glob) or count a channel's
# subscribers (by name).
CHANNEL_LISTS = {"pubsub|channels": "PUBSUB CHANNELS", "pubsub|shardchannels": "PUBSUB SHARDCHANNELS"}
CHANNEL_COUNTS = {"pubsub|numsub": "PUBSUB NUMSUB", "pubsub|shardnumsub": "PUBSUB SHARDNUMSUB"}
# CLIENT TRACKING's options that take a value.
TRACKING_VALUES = frozenset({b"redirect", b"prefix"})


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
        name = spec.name
        return name in ELSEWHERE or name in ("scan", "keys", "sort", "sort_ro", "copy", "client|tracking") or \
            name in CHANNEL_LISTS or name in CHANNEL_COUNTS

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
        if name == "copy":
            return self._check_copy(call.args)
        if name in CHANNEL_LISTS:
            return self._check_channel_list(name, call.args)
        if name in CHANNEL_COUNTS:
            return self._check_channels(name, call.args[2:])
        if name == "client|tracking":
            return self._check_tracking(call.args)
        return self._check_sort(call.args)

    def _check_copy(self, args):
        """COPY source destination [DB n] [REPLACE]: DB writes into a database, as SELECT would."""
        for word in args[3:]:
            if word.lower() == b"db":
                return self.finding("command COPY ... DB", f"{self._whose()}; COPY ... DB writes into another "
                                                           f"database: {ELSEWHERE['select']}")
        return None

    def _check_channel_list(self, name: str, args):
        """PUBSUB CHANNELS [pattern]: the pattern under a prefix; none with one prefix: added."""
        pattern = args[2] if len(args) > 2 else None
        if pattern is None and len(self.prefixes) == 1:
            return None  # rewrite() adds it
        if pattern is not None and self._owns(glob_literal_prefix(pattern)):
            return None
        command = CHANNEL_LISTS[name]
        shown = pattern.decode("utf-8", "backslashreplace") if pattern is not None else None
        subject = f"command {command}" if pattern is None else f"pattern '{shown}'"
        if not self.prefixes:
            return self.finding(subject, self._whose())
        each = " or ".join(f"{command} {glob_escape(p).decode('utf-8', 'replace')}*" for p in self.prefixes)
        how = "one per prefix" if pattern is None else "the pattern must start with an owned prefix"
        return self.finding(subject, f"{self._whose()}: channels too: {how}: {each}")

    def _check_channels(self, name: str, channels):
        """PUBSUB NUMSUB channel...: every channel under a prefix (another's is refused, as its
        keys are: a count of 0 would say nobody listens where someone does)."""
        for channel in channels:
            if not self._owns(channel):
                shown = channel.decode("utf-8", "backslashreplace")
                return self.finding(f"channel '{shown}'", f"{self._whose()}: channels too "
                                                          f"({CHANNEL_COUNTS[name]} of its own channels only)")
        return None

    def _check_tracking(self, args):
        """CLIENT TRACKING ON ... BCAST: the names of every key changed under its PREFIXes (of
        every key without one), so each PREFIX must lie under an owned prefix. Without BCAST only
        the keys the client read are tracked, and it reads only its own."""
        bcast = False
        prefixes = []
        i = 3
        while i < len(args):
            word = args[i].lower()
            if word in TRACKING_VALUES and i + 1 < len(args):
                if word == b"prefix":
                    prefixes.append(args[i + 1])
                i += 2
                continue
            bcast = bcast or word == b"bcast"
            i += 1
        if not bcast or len(args) < 3 or args[2].lower() != b"on":
            return None
        how = "CLIENT TRACKING ON BCAST " + " ".join(
            f"PREFIX {p.decode('utf-8', 'replace')}" for p in self.prefixes) if self.prefixes else ""
        if not prefixes:
            return self.finding("command CLIENT TRACKING ... BCAST", f"{self._whose()}; BCAST without PREFIX "
                                f"broadcasts every key's name" + (f": {how}" if how else ""))
        for prefix in prefixes:
            if not self._owns(prefix):
                shown = prefix.decode("utf-8", "backslashreplace")
                return self.finding(f"prefix '{shown}'", f"{self._whose()}: BCAST's PREFIXes must lie under them"
                                                         + (f": {how}" if how else ""))
        return None

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
        if len(self.prefixes) != 1:
            return None
        if call.name in CHANNEL_LISTS:  # PUBSUB CHANNELS alone: the application's channels
            commands = current_commands(call)
            args = commands[0]
            if not same_command(call, args) or len(args) != 2:
                return None
            return [[*args, glob_escape(self.prefixes[0]) + b"*"], *commands[1:]]
        if call.name != "scan":
            return None
        commands = current_commands(call)
        args = commands[0]
        if not same_command(call, args) or len(args) < 2 or _scan_match(args) is not None:
            return None
        return [[*args, b"MATCH", glob_escape(self.prefixes[0]) + b"*"], *commands[1:]]

    def describe(self) -> str:
        return ("SCAN and PUBSUB CHANNELS limited to the application's prefixes; RANDOMKEY, SWAPDB, MOVE, "
                "SELECT, COPY ... DB refused; CLIENT TRACKING BCAST only with PREFIXes under them")


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


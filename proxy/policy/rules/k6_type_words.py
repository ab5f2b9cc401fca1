"""K6: a key that names its value's type (`user:profile:hash:1`, `chat:messages:list:room_id:1`)
must be written by a command of that type: `HSET` on `...:string` is rejected.

The check needs the command, so K6 is a command rule. It applies to the commands Redis flags
`write`, and within them to the keys whose key-spec flags say the value is written (`OW`,
`INSERT`, `UPDATE`); what type the command writes comes from its COMMAND DOCS group. Generic
commands (group 'generic') say no type, except these: `SORT ... STORE` writes a list; RESTORE
writes the type its payload's first byte names (the RDB type); COPY, RENAME and RENAMENX give
the destination the source's value, whose type only the server knows: when the destination names
a type, K6 is also a RewriteRule that sends the write as the server-side check of `_write_check`,
which compares the source's TYPE first (a source whose own type word names another type is
refused at once). In audit mode that server check is not made. Expiry and deletion (EXPIRE, DEL,
MOVE's same name in another database) write no type.

Settings: `words` (value type -> the word, or list of words, that names it in a key; it replaces
the default mapping), `position` (`any` segment, or only the `last` one, is a type word),
`required` (a key written without a type word is an error too, for the types that have a word)
and `delimiter` (the segment separator, as in K1/K2/K5). Words compare case-insensitively: letter
case is K2's business.
"""

from __future__ import annotations

import re

from ...commands.keyspecs import find_keys
from ..base import NO_ARGUMENTS, RewriteRule, register
from ._types import GROUP_TYPES, TYPES
from ._write_check import SCRIPT_COMMANDS, checked_write, payload_type, with_check

DEFAULT_WORDS = {"string": "string", "list": "list", "hash": "hash", "set": "set", "zset": "zset"}
WRITE_FLAGS = frozenset({"OW", "INSERT", "UPDATE"})  # key-spec flags of a key whose value is written
CARRIES = frozenset({"copy", "rename", "renamenx"})  # source -> destination: the server knows the type
GENERIC_WRITES = CARRIES | {"sort", "restore", "restore-asking"}


@register
class TypeWords(RewriteRule):
    id = "K6"
    order = 206
    title = "type word matches the value"
    server_commands = SCRIPT_COMMANDS  # COPY/RENAME/RENAMENX checked by _write_check.SCRIPT

    def __init__(self, settings):
        super().__init__(settings)
        words = settings.mapping("words", DEFAULT_WORDS, schema={
            "propertyNames": {"enum": list(TYPES)},
            "additionalProperties": {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]},
        })
        self.position = settings.get("position", "any", kind=str, choices=("any", "last"))
        self.required = settings.get("required", False, kind=bool)
        self.delimiter = settings.get("delimiter", ":", kind=str)
        if not self.delimiter:
            raise settings.error("delimiter", "'delimiter' must not be empty")
        self.types: dict[bytes, str] = {}  # lower-case word -> value type
        self.word_for: dict[str, str] = {}  # value type -> the first word naming it
        for value_type, spelled in words.items():
            if value_type not in TYPES:
                raise settings.error("words", f"'words' names unknown type '{value_type}' "
                                              f"(Redis's types: {', '.join(TYPES)})")
            if not isinstance(spelled, (str, list)) or not spelled:
                raise settings.error("words", f"'words': {value_type} must be a word or a list of words")
            for word in ([spelled] if isinstance(spelled, str) else spelled):
                if not isinstance(word, str) or not word or self.delimiter in word:
                    raise settings.error("words", f"'words': {value_type} needs a word without "
                                                  f"'{self.delimiter}', got {word!r}")
                key = word.lower().encode()
                if self.types.setdefault(key, value_type) != value_type:
                    raise settings.error("words", f"'words': '{word}' names both "
                                                  f"{self.types[key]} and {value_type}")
                self.word_for.setdefault(value_type, word)
        self.split = self.delimiter.encode()

    def applies_to(self, spec) -> bool:
        return spec.name in GENERIC_WRITES or (
            "write" in spec.flags and spec.group in GROUP_TYPES
            and any(not ks.flags.isdisjoint(WRITE_FLAGS) for ks in spec.key_specs))

    def reads_from(self, spec) -> int | None:
        if spec.name in GENERIC_WRITES:
            return None  # SORT's options, RESTORE's payload, a server-side check: decided every time
        return NO_ARGUMENTS  # the keys and the command's group only

    def key_patterns(self, spec):
        # The segments are cut at the delimiter and compared with the words in either case.
        words = (b"".join(re.escape(bytes((c,))) if not bytes((c,)).isalpha() else
                          b"[" + bytes((c,)).upper() + bytes((c,)).lower() + b"]" for c in word)
                 for word in self.types)
        return (re.escape(self.split), *words)

    def check(self, call):
        keys = call.keys if call.keys is not None else find_keys(call.spec, call.args)
        if call.name in GENERIC_WRITES:
            return self._check_generic(call, keys)
        return self._check_keys(call, keys, GROUP_TYPES[call.spec.group])

    def _check_generic(self, call, keys):
        args = call.args
        if call.name in CARRIES:
            if len(keys) < 2:
                return None
            source, target = args[keys[0][0]], args[keys[1][0]]
            named = self.named_type(source)
            if named is not None:  # the source says what it holds: the destination must agree
                return self._check_keys(call, keys[1:], named)
            if self.required and not self.names_type(target):
                shown = source.decode("utf-8", "backslashreplace")
                return self.finding(f"key '{target.decode('utf-8', 'backslashreplace')}'",
                                    f"{call.name.upper()} writes the value of '{shown}'"
                                    f": the key must name its type {self._where()}")
            return None  # a type word on the destination: rewrite() has the server compare
        if call.name == "sort":
            return self._check_keys(call, [(i, ks) for i, ks in keys if not ks.flags.isdisjoint(WRITE_FLAGS)], "list")
        restored = payload_type(args[3]) if len(args) > 3 else None
        return self._check_keys(call, keys, restored) if restored is not None else None

    def _check_keys(self, call, keys, writes: str):
        for index, ks in keys:
            if ks.flags.isdisjoint(WRITE_FLAGS):
                continue
            key = call.args[index]
            wrong = self.wrong_word(key, writes)
            if wrong is not None:
                return self._mismatch(call, key, *wrong, writes)
            if self.required and writes in self.word_for and not self.names_type(key):
                return self._missing(call, key, writes)
        return None

    def rewrite(self, call):
        if call.name not in CARRIES:
            return None
        args = call.args
        keys = call.keys or ()
        if len(keys) < 2 or self.named_type(args[keys[0][0]]) is not None:
            return None  # decided in check()
        target = args[keys[1][0]]
        named = self.named_type(target)
        if named is None:
            return None
        check = checked_write(call)
        if check is None:
            return None
        shown = target.decode("utf-8", "backslashreplace")
        word = next(s for s in self._words(target) if s.lower() in self.types).decode("utf-8", "backslashreplace")
        check.allow_types([named], self.finding(
            f"key '{shown}'", f"{call.name.upper()} gives it the value of "
            f"'{args[keys[0][0]].decode('utf-8', 'backslashreplace')}', but its type word '{word}' says {named}: "
            f"give it a name with its value's type word"))
        return with_check(call, check)

    def named_type(self, key: bytes) -> str | None:
        """The type the first type word of `key` names, or None."""
        for segment in self._words(key):
            named = self.types.get(segment.lower())
            if named is not None:
                return named
        return None

    def _where(self) -> str:
        return "as its last segment" if self.position == "last" else "as a segment"

    def _words(self, key: bytes) -> list[bytes]:
        segments = key.split(self.split)
        return segments[-1:] if self.position == "last" else segments

    def wrong_word(self, key: bytes, value_type: str) -> tuple[bytes, str] | None:
        """(word, the type it names) of the first type word of `key` naming another type."""
        types = self.types
        for segment in self._words(key):
            named = types.get(segment.lower())
            if named is not None and named != value_type:
                return segment, named
        return None

    def names_type(self, key: bytes) -> bool:
        return any(segment.lower() in self.types for segment in self._words(key))

    def check_stored(self, key: bytes, value_type: str):
        """The finding for a key already holding a value of `value_type` (TYPE's answer), as
        `redis-guard audit` sees it; None when its type words agree."""
        wrong = self.wrong_word(key, value_type)
        if wrong is not None:
            text = key.decode("utf-8", "backslashreplace")
            own = self.word_for.get(value_type)
            word = wrong[0].decode("utf-8", "backslashreplace")
            return self.finding(f"key '{text}'", f"it holds a {value_type} but its type word '{word}' "
                                f"says {wrong[1]}: " + (f"rename it with '{own}'" if own else
                                                        "rename it without the type word"))
        if self.required and value_type in self.word_for and not self.names_type(key):
            text = key.decode("utf-8", "backslashreplace")
            where = "as its last segment" if self.position == "last" else "as a segment"
            return self.finding(f"key '{text}'", f"it holds a {value_type}: the key must name its "
                                f"type {where}, e.g. '{text}{self.delimiter}{self.word_for[value_type]}'")
        return None

    def _mismatch(self, call, key: bytes, word: bytes, named: str, writes: str):
        text = key.decode("utf-8", "backslashreplace")
        own = self.word_for.get(writes)
        fix = f"name the key with '{own}'" if own else "drop the type word"
        return self.finding(f"key '{text}'",
                            f"{call.name.upper()} writes a {writes} but the key's type word "
                            f"'{word.decode('utf-8', 'backslashreplace')}' says {named}: "
                            f"write it with {named} commands or {fix}")

    def _missing(self, call, key: bytes, writes: str):
        text = key.decode("utf-8", "backslashreplace")
        word = self.word_for[writes]
        where = "as its last segment" if self.position == "last" else "as a segment"
        return self.finding(f"key '{text}'",
                            f"{call.name.upper()} writes a {writes}: the key must name its type "
                            f"{where}, e.g. '{text}{self.delimiter}{word}'")

    def describe(self) -> str:
        words = ", ".join(f"{t}={w}" for t, w in self.word_for.items())
        where = "the last segment" if self.position == "last" else "any segment"
        return f"type words ({words}) in {where} match the writing command" + (
            "; required on written keys" if self.required else "")

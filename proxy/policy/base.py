"""What every policy rule is: an id from docs/rules.md, a mode, validated settings, one entry point.

A rule module defines one subclass of `KeyRule` (a check on one key name), `CommandRule` (a
check on one command) or `RewriteRule` (a change to a command before it is forwarded), and
registers it with `@register`; its class attribute `order` is its place in the chain (`REGISTRY`
keeps the rules in that order). The loader builds rules from the YAML `rules:` mapping through
`Rule.from_settings`, which reads its settings with `Settings` so every mistake in a policy file
is reported with its line. Rules precompile what they need in `__init__`; their entry points run
per command and must be cheap.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..yamlcheck import did_you_mean

ENFORCE, AUDIT, OFF = "enforce", "audit", "off"
MODES = (ENFORCE, AUDIT, OFF)


class PolicyError(Exception):
    """A mistake in a policy file; `line` is 1-based when known. `errors` holds every mistake the
    loader found in the file (this one alone, unless made by `several`); the error's own message
    and line are the first one's."""

    def __init__(self, message: str, line: int | None = None, source: str | None = None):
        self.message = message
        self.line = line
        self.source = source
        self.errors = [self]
        super().__init__(self.located())

    def located(self) -> str:
        """The message with where it is: 'file:line: ...'."""
        if self.line:
            return f"{self.source or 'policy'}:{self.line}: {self.message}"
        return f"{self.source}: {self.message}" if self.source else self.message

    @classmethod
    def several(cls, errors: list[PolicyError]) -> PolicyError:
        """One error standing for all of `errors` (in the order found); str() lists each on a line."""
        first = errors[0]
        error = cls(first.message, first.line, first.source)
        error.errors = list(errors)
        error.args = ("\n".join(each.located() for each in errors),)
        return error


@dataclass(frozen=True, slots=True)
class Finding:
    """A rule that fired: `subject` names what broke it ("key 'UserProfile'", "command KEYS"),
    `advice` says how to comply."""

    rule: str
    title: str
    subject: str
    advice: str
    mode: str = ENFORCE


class Settings:
    """Typed access to one rule's YAML mapping; unknown or ill-typed settings are errors.

    A mistake does not stop the rule's construction: it is kept in `problems` and the setting's
    default is returned, so one load reports every mistake of the file (the loader raises them).
    `table` is the command table that command names in settings are checked against."""

    def __init__(self, rule_id: str, values: dict, lines: dict[str, int] | None = None, line: int | None = None,
                 table=None):
        self.rule_id = rule_id
        self.values = dict(values)
        self.lines = lines or {}
        self.line = line
        self.used = {"mode"}
        self.problems: list[PolicyError] = []
        self.table = table

    def error(self, key: str | None, message: str) -> PolicyError:
        line = self.lines.get(key, self.line) if key else self.line
        return PolicyError(f"rule {self.rule_id}: {message}", line)

    def problem(self, key: str | None, message: str) -> None:
        """Keep a mistake and go on (the loader reports every one)."""
        self.problems.append(self.error(key, message))

    def get(self, key: str, default=None, kind=None, choices=None, minimum=None, schema=None):
        """The setting, checked; `schema` is a JSON Schema fragment for what `kind` cannot say
        (the items of a mapping), read only when the policy's schema is generated."""
        self.used.add(key)
        if key not in self.values:
            return default
        try:
            return self._checked(key, self.values[key], kind, choices, minimum)
        except PolicyError as exc:
            self.problems.append(exc)
            return default

    def _checked(self, key: str, value, kind, choices, minimum):
        if kind is not None:
            kinds = kind if isinstance(kind, tuple) else (kind,)
            if isinstance(value, bool) and bool not in kinds:
                raise self.error(key, f"'{key}' must be {_kind_names(kinds)}, got {value!r}")
            if int in kinds and float not in kinds and isinstance(value, float) and value.is_integer():
                value = int(value)
            if not isinstance(value, kinds):
                raise self.error(key, f"'{key}' must be {_kind_names(kinds)}, got {value!r}")
        if choices is not None and value not in choices:
            hint = did_you_mean(value, map(str, choices)) if isinstance(value, str) else ""
            raise self.error(key, f"'{key}' must be one of {', '.join(map(str, choices))}, got {value!r}{hint}")
        if minimum is not None and value < minimum:
            raise self.error(key, f"'{key}' must be at least {minimum}, got {value!r}")
        return value

    def strings(self, key: str, default=(), schema=None) -> tuple[str, ...]:
        value = self.get(key, list(default), kind=(list, tuple, str), schema=schema)
        if isinstance(value, str):
            value = [value]
        for item in value:
            if not isinstance(item, (str, int)) or isinstance(item, bool):
                self.problem(key, f"'{key}' must be a list of strings, got {item!r}")
                return tuple(default)
        return tuple(str(item) for item in value)

    def mapping(self, key: str, default=None, schema=None) -> dict:
        value = self.get(key, default if default is not None else {}, kind=dict, schema=schema)
        return dict(value)

    def check_unused(self) -> None:
        unknown = sorted(set(self.values) - self.used)
        if unknown:
            hint = did_you_mean(unknown[0], self.used) if len(unknown) == 1 else ""
            self.problem(unknown[0], f"unknown setting(s): {', '.join(unknown)}{hint}")


def _kind_names(kinds) -> str:
    names = {bool: "true/false", int: "a whole number", float: "a number", str: "a string",
             list: "a list", tuple: "a list", dict: "a mapping"}
    return " or ".join(dict.fromkeys(names.get(k, k.__name__) for k in kinds))


class Rule:
    """Base of every rule. `id` and `title` come from docs/rules.md."""

    id: ClassVar[str] = ""
    title: ClassVar[str] = ""
    default_mode: ClassVar[str] = ENFORCE
    # The rule's place in the chain (`register`): hundreds are the family, in the order command,
    # key, TTL and value rules; units the place within it. Lower runs first.
    order: ClassVar[int | None] = None

    def __init__(self, settings: Settings):
        self.mode = settings.get("mode", self.default_mode, kind=str, choices=MODES)

    @classmethod
    def from_settings(cls, settings: Settings) -> Rule:
        rule = cls(settings)
        settings.check_unused()
        return rule

    def finding(self, subject: str, advice: str) -> Finding:
        return Finding(self.id, self.title, subject, advice, self.mode)

    def describe(self) -> str:
        """One line for `policy check`: what this rule enforces."""
        return self.title

    def use_schema(self, schema) -> None:
        """Called once at load with the policy's key schema (None without one), for the rules
        that enforce it (K10) or take per-pattern settings from it (T1, T3, V1, V2)."""

    def use_source(self, source: str | None) -> None:
        """Called once at load with the policy file's path (None for a text), for the rules
        whose settings name files relative to it (C6's library)."""


class KeyRule(Rule):
    """A rule on key names alone. `pattern` is a regex fragment that every passing key matches
    (used inside a lookahead, so all key rules combine into one compiled match per key);
    `check_key` explains a failure."""

    pattern: str = ""

    def check_key(self, key: str) -> Finding | None:
        raise NotImplementedError

    def class_advice(self, key: str) -> bool:
        """For the engine's memo of refusals (`refusals`): is this rule's advice on `key` (which
        fails it) the same for every key of its class (`keyclass`: keys of the same length whose
        bytes this rule's pattern cannot tell apart, byte for byte)? The answer itself must be
        the same for every key of the class. False (the default): the advice is worked out for
        each key."""
        return False


# `CommandRule.reads_from`: the rule reads no argument's bytes besides the keys (lengths at most).
NO_ARGUMENTS = 1 << 30


class CommandRule(Rule):
    """A rule on a whole command. `applies_to(spec)` decides, at policy load, the commands it
    is compiled into; `check(call)` runs for those only. For the ACL compiler (`policy/acl.py`):
    `denies(spec)` says the rule refuses every call of the command whatever its arguments, and
    `server_commands` names what the rule sends upstream on a client's behalf."""

    server_commands: ClassVar[frozenset[str]] = frozenset()

    def applies_to(self, spec) -> bool:
        raise NotImplementedError

    def denies(self, spec) -> bool:
        """Does this rule refuse every call of `spec`, whatever its arguments (what Redis's ACL
        can refuse too)? False leaves the command to the proxy."""
        return False

    def reads_from(self, spec) -> int | None:
        """For the engine's memo of commands that passed (`engine.Plan`): the first argument
        from which this rule's verdict on `spec` may depend on argument bytes, not only on
        their lengths, besides the key at argument 1; `NO_ARGUMENTS` when it reads none. None
        (the default): the verdict may depend on more (the server, chance), so a command with
        this rule is always decided in full. A check that reads `call.later` or the clock is
        not memoized for that call (`Call.volatile`)."""
        return None

    def key_patterns(self, spec) -> tuple | None:
        """For the memo too: the regexes (str over the key decoded with surrogateescape, or
        bytes) through which alone this rule's verdict on `spec` reads the key at argument 1,
        besides its length (`keyclass`); () when it reads the length at most. None (the
        default): it may read more, so the memo holds the key itself."""
        return None

    # Does `check` read `call.later` (the rest of the pipeline)? For the memo of refusals
    # (`refusals`): such a rule's verdict may change with the later commands that name the key
    # of argument 1 and that the policy passes (`Engine.passes`), and with no others.
    reads_later: ClassVar[bool] = False

    def check(self, call) -> Finding | None:
        raise NotImplementedError


class RewriteRule(CommandRule):
    """A rule that changes commands rather than (or besides) rejecting them. `rewrite(call)`
    returns the complete list of commands to send instead: the first one's reply goes to the
    client, the replies of the others are hidden. In a chain, `call.args` is the first command
    an earlier rule produced and `call.commands` all of them (None before any rewrite): keep the
    ones you do not change. None leaves the command as it is."""

    # True when the rewrite is how the rule checks (a script that measures on the server) rather
    # than a change of what the command does: audit mode and shadow policies do not report it.
    checks_on_server: ClassVar[bool] = False

    def check(self, call) -> Finding | None:
        return None

    def rewrite(self, call) -> list[list[bytes]] | None:
        raise NotImplementedError

    def would_rewrite(self, name: str, commands, mode: str = AUDIT) -> Finding:
        """The finding for a rewrite into `commands` that was not done: in audit mode (the
        engine's), or by a shadow policy (mode ENFORCE)."""
        sent = "; ".join(" ".join(_shown(arg) for arg in command) for command in commands)
        why = "sent unchanged in audit mode; enforced, it is" if mode == AUDIT else "the policy would send it"
        return Finding(self.id, self.title, f"command {name.replace('|', ' ').upper()}", f"{why} sent as: {sent}", mode)


def _shown(arg: bytes, limit: int = 40) -> str:
    text = bytes(arg).decode("utf-8", "backslashreplace")
    return text if len(text) <= limit else text[:limit] + "..."


def current_commands(call) -> list:
    """What the rewrite chain sends so far: the earlier rewrite rules' output (with the engine's
    `Call.commands`, see the report), else just this command."""
    return getattr(call, "commands", None) or [call.args]


def same_command(call, args) -> bool:
    """Is `args` still the command the plan was made for (not already turned into an EVAL)?"""
    name = call.name.partition("|")[0]
    return len(args) > 0 and len(args[0]) == len(name) and args[0].lower() == name.encode()


# rule id -> rule class, in the order rules run (their `order`); filled by `register` as
# `policy.rules` is imported. Loop over it for "every rule, in order".
REGISTRY: dict[str, type[Rule]] = {}


class RegistrationError(Exception):
    """A rule class `register` cannot place: no id, an id or a place already taken, no place."""


def register(cls: type[Rule]) -> type[Rule]:
    """Add a rule class to `REGISTRY` at its place (`Rule.order`). A mistake here is a bug in the
    rule module and stops the import: a rule left out of the chain would pass silently."""
    if not cls.id:
        raise RegistrationError(f"rule class {cls.__qualname__} has no id")
    if cls.id in REGISTRY:
        raise RegistrationError(f"rule {cls.id} is registered twice ({REGISTRY[cls.id].__qualname__}, "
                                f"{cls.__qualname__})")
    place = cls.order
    if not isinstance(place, int) or isinstance(place, bool):
        raise RegistrationError(f"rule {cls.id} ({cls.__qualname__}) declares no place: set its class "
                                f"attribute `order` (see Rule.order), got {place!r}")
    taken = next((other for other in REGISTRY.values() if other.order == place), None)
    if taken is not None:
        raise RegistrationError(f"rules {taken.id} and {cls.id} both declare order = {place}")
    ranked = sorted([*REGISTRY.values(), cls], key=lambda rule: rule.order)
    REGISTRY.clear()
    REGISTRY.update((rule.id, rule) for rule in ranked)
    return cls


# The items of a setting naming commands (`FLUSHALL`, `CONFIG|SET`) and ACL categories (`@admin`).
COMMAND_LIST = {"items": {"type": "string", "pattern": "^(@[a-z]+|[A-Za-z][A-Za-z0-9_|-]*)$"}}

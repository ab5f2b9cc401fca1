"""The key schema (rule K10, seed 004): every key pattern declared once, with its value type,
description, relationships, owner application, TTL rule and size limits.

Theory of operation
-------------------
A policy's top-level `schema:` lists patterns such as `book:{id}`. `parse_schema` turns the YAML
nodes into a `Schema` at load and reports every mistake at its line: unknown types and settings,
ill-formed placeholders, duplicate patterns, and overlapping ones (two patterns that match one
key: found by trying every pattern's sample keys on the others, so an overlap the samples miss
is not reported; at run time the first pattern in file order then wins). A `{placeholder}`
matches one segment (anything but the delimiter) unless `placeholders:` constrains it (`digits`,
`slug`, `uuid`, `{enum: [...]}`, `{regex: ...}`); `{{` and `}}` are literal braces.

Every pattern is a regex over the key's bytes; all of them are folded into one alternation of
groups, so `match` costs one regex match (a dict lookup for a key seen before) and the group that
matched names the pattern. `any_pattern` is the same alternation without groups, for the engine's
combined key check (strict K10).

`Schema.match(key) -> KeyPattern | None` is the public interface: K10 (strictness, type family),
T1/T3 (per-pattern TTL rule), V1/V2 (per-pattern limits), the keyspace audit and
`redis-guard schema docs` all read it. No I/O here.
"""

from __future__ import annotations

import difflib
import itertools
import re
import string
from dataclasses import dataclass, field

import yaml

from .base import PolicyError
from .rules._durations import duration
from .rules._keyshape import byte, literal
from .rules._types import TYPES

FIELDS = ("key", "type", "description", "placeholders", "ttl", "limits", "owner", "relationships")
COLLECTIONS = ("hash", "list", "set", "zset")  # the types V2 caps
LIMITS = {"max_bytes": ("string",), "max_elements": COLLECTIONS}
PERSISTENT_WORDS = ("none", "persistent")

# Named constraints: regex over the key's bytes, and sample values for the overlap check.
CONSTRAINTS = {
    "digits": ("[0-9]+", ("1", "42")),
    "slug": ("[a-z0-9]+(?:-[a-z0-9]+)*", ("a", "1", "a-b")),
    "uuid": ("[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}",
             ("123e4567-e89b-12d3-a456-426614174000",)),
}
ANY_SAMPLES = ("1", "a", "a-b")
SAMPLES_PER_PATTERN = 256
CACHE_MAX = 1 << 16
EXPLAIN_MAX = 512  # longer keys get no closest-pattern search (difflib is quadratic)


@dataclass(frozen=True)
class SchemaTtl:
    """A pattern's TTL rule: `required` (T1: every write leaves the key a TTL), optionally within
    `min_ttl`..`max_ttl` seconds (T3; None: T3's own bound), or not (`ttl: none`: persistent keys,
    exempt from T1 and T3)."""

    required: bool
    min_ttl: int | None = None
    max_ttl: int | None = None

    @property
    def bounded(self) -> bool:
        return self.min_ttl is not None or self.max_ttl is not None

    def __str__(self) -> str:
        if not self.required:
            return "none (persistent)"
        if self.min_ttl is not None and self.max_ttl is not None:
            return f"required, {duration(self.min_ttl)} to {duration(self.max_ttl)}"
        if self.min_ttl is not None:
            return f"required, at least {duration(self.min_ttl)}"
        if self.max_ttl is not None:
            return f"required, at most {duration(self.max_ttl)}"
        return "required"


@dataclass(frozen=True)
class Placeholder:
    """One `{name}` of a pattern: `kind` is any, digits, slug, uuid, enum or regex; `regex` is
    what it matches (over bytes, no capturing group); `values` the enum's values or the regex's
    source."""

    name: str
    kind: str
    regex: str
    values: tuple[str, ...] = ()

    def __str__(self) -> str:
        if self.kind == "any":
            return "one segment"
        if self.kind == "enum":
            return "one of " + ", ".join(self.values)
        if self.kind == "regex":
            return f"regex {self.values[0]}"
        return self.kind

    def accepts(self, value: bytes) -> bool:
        return re.fullmatch(self.regex.encode(), value, re.S) is not None


@dataclass(frozen=True)
class KeyPattern:
    """One declared pattern. `relationships` is a tuple: the related patterns when the file gives
    a list (each one declared), or one free-text item. `ttl`, `max_bytes`, `max_elements` and
    `owner` are None when not set."""

    pattern: str
    type: str
    description: str = ""
    owner: str | None = None
    relationships: tuple[str, ...] = ()
    ttl: SchemaTtl | None = None
    max_bytes: int | None = None
    max_elements: int | None = None
    placeholders: tuple[Placeholder, ...] = ()
    regex: str = field(default="", repr=False, compare=False)
    line: int | None = field(default=None, compare=False)

    def placeholder(self, name: str) -> Placeholder | None:
        return next((p for p in self.placeholders if p.name == name), None)


class Schema:
    """The compiled patterns of one policy, in file order."""

    def __init__(self, patterns: tuple[KeyPattern, ...], delimiter: str = ":"):
        self.patterns = patterns
        self.delimiter = delimiter
        self.any_pattern = "(?:" + "|".join(p.regex for p in patterns) + ")"
        groups = "|".join(f"({p.regex})" for p in patterns)
        self._match = re.compile(f"(?:{groups})\\Z".encode(), re.S).match
        self._cache: dict[bytes, KeyPattern | None] = {}
        self._loose: dict[str, object] = {}

    def __iter__(self):
        return iter(self.patterns)

    def __len__(self) -> int:
        return len(self.patterns)

    def get(self, pattern: str) -> KeyPattern | None:
        return next((p for p in self.patterns if p.pattern == pattern), None)

    def match(self, key: bytes) -> KeyPattern | None:
        """The pattern a key name belongs to (None: no pattern matches it)."""
        cache = self._cache
        try:
            return cache[key]
        except KeyError:
            pass
        data = key.encode("utf-8", "surrogateescape") if isinstance(key, str) else bytes(key)
        found = self._match(data)
        pattern = self.patterns[found.lastindex - 1] if found is not None else None
        if len(cache) >= CACHE_MAX:
            cache.clear()  # cheaper than LRU bookkeeping on every hit
        cache[key] = pattern
        return pattern

    def ttl_exempt(self, glob):
        """T1/T3's exemption test with the schema's word first: a key whose pattern says
        `ttl: none` is exempt, one whose pattern requires a TTL is not, whatever the rule's
        `persistent` globs say; other keys are left to the globs (`glob`, None for none)."""
        match = self.match

        def exempt(key: bytes) -> bool:
            pattern = match(key)
            if pattern is not None and pattern.ttl is not None:
                return not pattern.ttl.required
            return glob is not None and glob(key)

        return exempt

    def closest(self, key: bytes) -> tuple[KeyPattern | None, str]:
        """For a key no pattern matches: the pattern it was probably meant for (None for a very
        long key), and why it does not match when that is a placeholder's constraint ('')."""
        if len(key) > EXPLAIN_MAX:
            return None, ""
        for pattern in self.patterns:
            loose = self._loose_match(pattern)(key)
            if loose is None:
                continue
            for placeholder in pattern.placeholders:
                value = loose.group(placeholder.name)
                if not placeholder.accepts(value):
                    shown = value.decode("utf-8", "backslashreplace")
                    return pattern, f"{{{placeholder.name}}} must be {placeholder}, not '{shown}'"
        text = key.decode("utf-8", "backslashreplace")
        best = max(self.patterns, key=lambda p: difflib.SequenceMatcher(None, text, p.pattern).ratio())
        return best, ""

    def _loose_match(self, pattern: KeyPattern):
        """The pattern's shape with every placeholder unconstrained (one segment, or anything
        for a regex placeholder), each captured by name."""
        found = self._loose.get(pattern.pattern)
        if found is None:
            d = byte(ord(self.delimiter))
            parts = []
            for text, name in _parts(pattern.pattern):
                parts.append(literal(text))
                if name is not None:
                    kind = pattern.placeholder(name).kind
                    parts.append(f"(?P<{name}>{'.+' if kind == 'regex' else f'[^{d}]+'})")
            found = self._loose[pattern.pattern] = re.compile("".join(parts).encode(), re.S).fullmatch
        return found


# -- parsing ------------------------------------------------------------------------------------


def _line(node) -> int:
    return node.start_mark.line + 1


def _plain(node):
    return yaml.safe_load(yaml.serialize(node))


def _parts(pattern: str):
    """(literal text, placeholder name or None) pairs of a key pattern."""
    return [(text, name) for text, name, _, _ in string.Formatter().parse(pattern)]


def parse_schema(node, delimiter: str = ":", source: str | None = None, problems=None) -> Schema | None:
    """The `schema:` section (a YAML node) as a Schema; None when it is empty. With `problems`
    (`problems.Problems`) every pattern's first mistake is kept there and the others are read on;
    without, the first mistake is raised."""
    def fail(error: PolicyError) -> None:
        if problems is None:
            raise error
        problems.add(error)

    if isinstance(node, yaml.ScalarNode) and node.value in ("", "null", "~"):
        return None
    if not isinstance(node, yaml.SequenceNode):
        raise PolicyError("'schema' must be a list of key patterns (- key: ..., type: ...)", _line(node), source)
    if not node.value:
        return None
    patterns: list[KeyPattern] = []
    related: list[tuple[KeyPattern, int]] = []
    for item in node.value:
        try:
            pattern, names_line = _pattern(item, delimiter, source)
        except PolicyError as exc:
            fail(exc)
            continue
        earlier = next((p for p in patterns if p.pattern == pattern.pattern), None)
        if earlier is not None:
            fail(PolicyError(f"schema: pattern '{pattern.pattern}' is declared twice (first at line "
                             f"{earlier.line})", pattern.line, source))
            continue
        patterns.append(pattern)
        if names_line is not None:
            related.append((pattern, names_line))
    declared = {p.pattern for p in patterns}
    for pattern, line in related:
        for name in pattern.relationships:
            if name not in declared:
                close = difflib.get_close_matches(name, sorted(declared), n=1)
                hint = f" (did you mean '{close[0]}'?)" if close else ""
                fail(PolicyError(f"schema: pattern '{pattern.pattern}': relationship '{name}' is not a declared "
                                 f"pattern{hint}; write free text as one string instead of a list", line, source))
    if not patterns:
        return None
    schema = Schema(tuple(patterns), delimiter)
    _check_overlaps(schema, source)
    return schema


def _pattern(node, delimiter: str, source):
    """(KeyPattern, the line of a `relationships:` list to check once all are known, or None)."""
    if not isinstance(node, yaml.MappingNode):
        raise PolicyError("schema: each entry must be a mapping (key: ..., type: ...)", _line(node), source)
    values, lines = {}, {}
    for key_node, value_node in node.value:
        name = str(key_node.value)
        if name not in FIELDS:
            raise PolicyError(f"schema: unknown setting '{name}' (known: {', '.join(FIELDS)})",
                              _line(key_node), source)
        if name in values:
            raise PolicyError(f"schema: '{name}' appears twice", _line(key_node), source)
        values[name] = value_node
        lines[name] = _line(key_node)
    line = _line(node)
    if "key" not in values:
        raise PolicyError("schema: an entry without 'key' (the pattern, e.g. 'book:{id}')", line, source)
    key = _plain(values["key"])
    line = lines["key"]

    def error(field_name: str | None, message: str, at: int | None = None) -> PolicyError:
        return PolicyError(f"schema: pattern '{key}': {message}", at or lines.get(field_name, line), source)

    if not isinstance(key, str) or not key:
        raise PolicyError(f"schema: 'key' must be a non-empty string, got {key!r}", line, source)
    kind = _plain(values["type"]) if "type" in values else None
    if kind not in TYPES:
        raise error("type", f"'type' must be one of {', '.join(TYPES)}, got {kind!r}")
    constraints = _constraints(values.get("placeholders"), error)
    placeholders, regex = _compile(key, constraints, delimiter, error)
    description = _text(values, "description", error)
    owner = _text(values, "owner", error) or None
    relationships, names_line = (), None
    if "relationships" in values:
        given = _plain(values["relationships"])
        if isinstance(given, str):
            relationships = (given,)
        elif isinstance(given, list) and all(isinstance(item, str) and item for item in given):
            relationships, names_line = tuple(given), lines["relationships"]
        elif given is not None:
            raise error("relationships", "'relationships' must be free text or a list of pattern names")
    ttl = _ttl(values.get("ttl"), error) if "ttl" in values else None
    limits = _limits(values.get("limits"), kind, error) if "limits" in values else {}
    return KeyPattern(
        pattern=key, type=kind, description=description, owner=owner, relationships=relationships,
        ttl=ttl, max_bytes=limits.get("max_bytes"), max_elements=limits.get("max_elements"),
        placeholders=placeholders, regex=regex, line=line,
    ), names_line


def _text(values, name: str, error) -> str:
    if name not in values:
        return ""
    value = _plain(values[name])
    if value is None:
        return ""
    if not isinstance(value, (str, int, float)) or isinstance(value, bool):
        raise error(name, f"'{name}' must be text, got {value!r}")
    return str(value).strip()


def _constraints(node, error) -> dict[str, tuple[str, str, tuple[str, ...]]]:
    """name -> (kind, regex, values) from the `placeholders:` mapping."""
    if node is None:
        return {}
    if not isinstance(node, yaml.MappingNode):
        raise error("placeholders", "'placeholders' must map each placeholder to digits, slug, uuid, "
                                    "{enum: [...]} or {regex: ...}")
    found = {}
    for name_node, value_node in node.value:
        name = str(name_node.value)
        at = _line(name_node)
        value = _plain(value_node)
        where = f"placeholder {{{name}}}"
        if name in found:
            raise error(None, f"{where} is constrained twice", at)
        if value == "any":
            found[name] = ("any", "", (), at)
        elif isinstance(value, str) and value in CONSTRAINTS:
            found[name] = (value, CONSTRAINTS[value][0], (), at)
        elif isinstance(value, dict) and set(value) == {"enum"}:
            items = value["enum"]
            if (not isinstance(items, list) or not items
                    or not all(isinstance(v, (str, int)) and not isinstance(v, bool) and str(v) for v in items)):
                raise error(None, f"{where}: 'enum' must be a non-empty list of values", at)
            items = tuple(dict.fromkeys(str(v) for v in items))
            ordered = sorted(items, key=len, reverse=True)  # 'ab' before 'a': the longest value wins
            found[name] = ("enum", "(?:" + "|".join(literal(v) for v in ordered) + ")", items, at)
        elif isinstance(value, dict) and set(value) == {"regex"}:
            source = value["regex"]
            if not isinstance(source, str) or not source or not source.isascii():
                raise error(None, f"{where}: 'regex' must be a non-empty ASCII regex (over the key's bytes; "
                                     r"write other bytes as \xNN)", at)
            try:
                compiled = re.compile(source.encode(), re.S)
            except re.error as exc:
                raise error(None, f"{where}: invalid regex: {exc}", at) from None
            if compiled.groups:
                raise error(None, f"{where}: the regex must not capture: write (?:...) for its groups", at)
            found[name] = ("regex", f"(?:{source})", (source,), at)
        else:
            raise error(None, f"{where}: must be any, digits, slug, uuid, {{enum: [...]}} or {{regex: ...}}, "
                                 f"got {value!r}", at)
    return found


def _compile(key: str, constraints: dict, delimiter: str, error):
    """(placeholders, regex) of a key pattern."""
    try:
        parts = list(string.Formatter().parse(key))
    except ValueError as exc:
        raise error("key", f"{exc}: write a literal brace as '{{{{' or '}}}}'") from None
    d = byte(ord(delimiter))
    placeholders: list[Placeholder] = []
    regex = []
    for position, (text, name, spec, conversion) in enumerate(parts):
        regex.append(literal(text))
        if name is None:
            continue
        if spec or conversion:
            raise error("key", f"write '{{{name}}}' and constrain it under 'placeholders:'")
        if not name.isidentifier():
            raise error("key", f"placeholder {{{name}}} must be a name (letters, digits, _)")
        if any(p.name == name for p in placeholders):
            raise error("key", f"placeholder {{{name}}} appears twice")
        if position > 0 and not text and parts[position - 1][1] is not None:
            raise error("key", f"placeholders {{{parts[position - 1][1]}}} and {{{name}}} need a literal "
                               "between them: where one ends would be a guess")
        kind, body, values, _ = constraints.get(name, ("any", "", (), None))
        nxt = parts[position + 1][0] if position + 1 < len(parts) else ""
        if kind in ("any", "digits"):
            body = f"[^{d}]" if kind == "any" else "[0-9]"
            # Possessive when it cannot eat what follows: no backtracking on long keys.
            possessive = not nxt or re.fullmatch(body, nxt[0]) is None
            body += "++" if possessive else "+"
            placeholders.append(Placeholder(name, kind, body.rstrip("+") + "+", values))
        else:
            placeholders.append(Placeholder(name, kind, body, values))
        regex.append(body)
    unused = sorted(set(constraints) - {p.name for p in placeholders})
    if unused:
        raise error(None, f"'placeholders' names {{{unused[0]}}}, which the key pattern does not have",
                    constraints[unused[0]][3])
    return tuple(placeholders), "".join(regex)


def _ttl(node, error) -> SchemaTtl:
    value = _plain(node)
    forms = "'required', 'none' (or 'persistent'), or {min: seconds, max: seconds}"
    if value == "required":
        return SchemaTtl(True)
    if value in PERSISTENT_WORDS:
        return SchemaTtl(False)
    if isinstance(value, dict) and value and set(value) <= {"min", "max"}:
        bounds = {}
        for side in ("min", "max"):
            number = value.get(side)
            if number is None:
                continue
            if isinstance(number, bool) or not isinstance(number, int) or number < 1:
                raise error("ttl", f"'ttl' {side} must be a whole number of seconds (at least 1), got {number!r}")
            bounds[side] = number
        if "min" in bounds and "max" in bounds and bounds["max"] < bounds["min"]:
            raise error("ttl", f"'ttl' max ({bounds['max']}) is below min ({bounds['min']})")
        return SchemaTtl(True, bounds.get("min"), bounds.get("max"))
    raise error("ttl", f"'ttl' must be {forms}, got {value!r}")


def _limits(node, kind: str, error) -> dict[str, int]:
    value = _plain(node)
    if not isinstance(value, dict) or not value:
        raise error("limits", "'limits' must be a mapping: max_bytes (strings), max_elements (collections)")
    found = {}
    for name, number in value.items():
        if name not in LIMITS:
            raise error("limits", f"unknown limit '{name}' (known: {', '.join(LIMITS)})")
        if kind not in LIMITS[name]:
            what = "string values" if name == "max_bytes" else f"collections ({', '.join(COLLECTIONS)})"
            raise error("limits", f"'{name}' limits {what}, not a {kind}")
        if isinstance(number, bool) or not isinstance(number, int) or number < 1:
            raise error("limits", f"'{name}' must be a whole number of at least 1, got {number!r}")
        found[name] = number
    return found


# -- overlaps -----------------------------------------------------------------------------------


def _check_overlaps(schema: Schema, source) -> None:
    patterns = schema.patterns
    segments = sorted({segment for p in patterns for text, _ in _parts(p.pattern)
                       for segment in text.split(schema.delimiter) if segment})
    compiled = [re.compile(p.regex.encode(), re.S).fullmatch for p in patterns]
    for i, pattern in enumerate(patterns):
        for sample in _samples(pattern, segments):
            for j, other in enumerate(patterns):
                if j != i and compiled[j](sample) is not None:
                    first, second = sorted((pattern, other), key=lambda p: p.line or 0)
                    shown = sample.decode("utf-8", "backslashreplace")
                    raise PolicyError(
                        f"schema: pattern '{second.pattern}' overlaps '{first.pattern}' (line {first.line}): "
                        f"both match '{shown}'; constrain a placeholder (digits, {{enum: [...]}}, "
                        "{regex: ...}) so that every key has one pattern", second.line, source)


def _samples(pattern: KeyPattern, segments):
    """Keys the pattern matches, built from sample values and every literal segment."""
    choices = []
    for placeholder in pattern.placeholders:
        if placeholder.kind == "enum":
            candidates = placeholder.values
        else:
            candidates = CONSTRAINTS.get(placeholder.kind, (None, ANY_SAMPLES))[1] + tuple(segments)
        kept = [value.encode() for value in dict.fromkeys(candidates) if placeholder.accepts(value.encode())]
        if not kept:
            return
        choices.append(kept)
    names = [placeholder.name for placeholder in pattern.placeholders]
    parts = _parts(pattern.pattern)
    for values in itertools.islice(itertools.product(*choices), SAMPLES_PER_PATTERN):
        chosen = dict(zip(names, values))
        yield b"".join(text.encode() + (chosen[name] if name is not None else b"") for text, name in parts)


def enforcing_rules(pattern: KeyPattern) -> list[tuple[str, str]]:
    """(rule id, what) for each setting of the pattern that a rule enforces: a policy whose
    schema sets them must name those rules (`mode: off` to only document them)."""
    needs = []
    if pattern.ttl is not None and pattern.ttl.required:
        needs.append(("T1", f"ttl: {pattern.ttl}"))
    if pattern.ttl is not None and pattern.ttl.bounded:
        needs.append(("T3", f"ttl: {pattern.ttl}"))
    if pattern.max_bytes is not None:
        needs.append(("V1", f"max_bytes: {pattern.max_bytes}"))
    if pattern.max_elements is not None:
        needs.append(("V2", f"max_elements: {pattern.max_elements}"))
    return needs

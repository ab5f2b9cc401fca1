"""From a `KeyspaceModel` to a draft policy: key patterns, their type, TTL and size limits, the
naming rules the keys follow, the outliers, and the commented YAML and `policy test` fixtures.

Theory of operation
-------------------
`settle` reworks the trie bottom-up: below the first segment (namespaces stay literal), literal
siblings whose subtrees look alike (the same signature: the same shape below, the same type and
TTL practice at the leaves) are one variable position: `MERGE_MIN` or more of them become an enum
placeholder (a slug or any-segment one past `ENUM_MAX`), and any of them that look like the
wildcard sibling join it. Each leaf is then a pattern; its placeholders are the classes of
`segments`, constrained so that no two patterns of the draft match one key (K10 refuses overlaps):
literal and enum siblings are exact, the classes are disjoint, and a token or wildcard position
excludes, by a negative lookahead, the values and classes of its siblings.

A pattern is a rule when it covers `min_keys` keys or more, or has no placeholder at all (a
named key: a counter, an index, a ranking); the others are outliers (`rare`). Within a rule:
the type is the one most of its keys hold (the others are outliers: `type`); the TTL is required
when at most `MISSING_TTL` of the keys lack one (those are outliers: `ttl`), with a maximum a
little above the longest remaining TTL seen (a TTL read by SCAN is at most the one set), `none`
when no key has one, and `none` with a note when the practice is mixed; sizes are limited a
little above the bulk of the values, where a few values far above the rest (a gap of a power of
two or more, at most 0.1% of the keys) are outliers (`size`). The naming rules (K1 segments, K2
case, K3 characters, K4 length, K5 joiner) are those every name under a rule follows. No I/O here.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field

from ..policy.loader import load_policy_text
from ..policy.rules._durations import approximately, duration
from ..policy.rules._keyshape import FORBIDDEN_BYTES, byte
from .model import Node, Values
from .segments import CLASSES, ORDER, OVERLAPPING, SLUG, class_regex, literal_regex

MERGE_MIN = 3
ENUM_MAX = 8
MIN_KEYS = 3
MISSING_TTL = 0.05  # share of keys without a TTL under a pattern that requires one: outliers
SIZE_OUTLIERS = 0.001  # share of keys far above the rest that are outliers, not the limit
SIZE_MIN_KEYS = 20  # fewer keys under a pattern: no size outliers, the limit covers them all
HEADROOM = 1.25
LIMITED = {"string": "max_bytes", "hash": "max_elements", "list": "max_elements", "set": "max_elements",
           "zset": "max_elements"}
READS = {"string": ("GET",), "hash": ("HGET", "f"), "list": ("LINDEX", "0"), "set": ("SISMEMBER", "m"),
         "zset": ("ZSCORE", "m"), "stream": ("XLEN",)}
WRITES = {"string": ("SET", "v"), "hash": ("HSET", "f", "v"), "list": ("RPUSH", "v"), "set": ("SADD", "m"),
          "zset": ("ZADD", "1", "m")}
NICE_DURATIONS = (60, 300, 600, 900, 1800, 3600, 7200, 21600, 43200, 86400, 172800, 604800, 1209600,
                  2592000, 7776000, 31536000)
FIXTURE_VALUE_MAX = 65536  # an over-size string fixture longer than this is left out
EXAMPLES = 3


# -- settling the trie ----------------------------------------------------------------------------


def ttl_practice(leaf) -> str:
    if leaf.with_ttl == 0:
        return "none"
    if leaf.no_ttl <= leaf.count * MISSING_TTL:
        return "required"
    return "mixed"


def settle(root: Node, checks) -> dict[int, list[bytes]]:
    """Merge look-alike literal siblings (see the module's docstring). Returns the enum values of
    the merged nodes (by node id), which sit in their parent's `classes` as 'enum#N'."""
    enums: dict[int, list[bytes]] = {}
    signatures: dict[int, tuple] = {}

    def signature(node: Node) -> tuple:
        leaf = node.leaf
        return (
            (leaf.major_type(), ttl_practice(leaf)) if leaf is not None else None,
            tuple(sorted(((value, signatures[id(child)]) for value, child in node.literals.items()), key=repr)),
            tuple(sorted(((cls.split("#")[0], signatures[id(child)]) for cls, child in node.classes.items()),
                         key=repr)),
            signatures[id(node.wild)] if node.wild is not None else None,
        )

    def visit(node: Node, depth: int) -> None:
        for child in (*node.literals.values(), *node.classes.values(), *((node.wild,) if node.wild else ())):
            visit(child, depth + 1)
        if depth >= 1 and len(node.literals) > 1 or (depth >= 1 and node.wild is not None and node.literals):
            groups: dict[tuple, list[bytes]] = {}
            for value, child in node.literals.items():
                groups.setdefault(signatures[id(child)], []).append(value)
            for sig, values in groups.items():
                if node.wild is not None and signatures[id(node.wild)] == sig:
                    for value in values:
                        node.wild.values.add(value)
                        node.wild.merge(node.literals.pop(value), checks)
                    _coalesce(node.wild, enums, checks)
                elif len(values) >= MERGE_MIN:
                    merged = node.literals.pop(values[0])
                    for value in values[1:]:
                        merged.merge(node.literals.pop(value), checks)
                    _coalesce(merged, enums, checks)
                    signatures[id(merged)] = sig
                    if len(values) > ENUM_MAX and node.wild is None:
                        merged.values = Values()
                        for value in values:
                            merged.values.add(value)
                        node.wild = merged
                    else:
                        node.classes[f"enum#{len(enums)}"] = merged
                        enums[id(merged)] = sorted(values)
        signatures[id(node)] = signature(node)

    visit(root, 0)
    return enums


def _coalesce(node: Node, enums: dict[int, list[bytes]], checks) -> None:
    """Subtrees merged into one may bring two enum children sharing values to one position (two
    patterns matching one key): they become one enum, their values joined, all the way down."""
    joined = True
    while joined:  # a join may make a group meet another
        joined = False
        kept: list[list] = []  # [key, values]
        for key in [key for key in node.classes if key.startswith("enum#")]:
            values = set(enums[id(node.classes[key])])
            into = next((entry for entry in kept if entry[1] & values), None)
            if into is None:
                kept.append([key, values])
                continue
            target = node.classes[into[0]]
            target.merge(node.classes.pop(key), checks)
            into[1] |= values
            enums[id(target)] = sorted(into[1])
            joined = True
    for key, values in kept:  # a literal sibling that is one of an enum's values joins it
        target = node.classes[key]
        for value in [value for value in node.literals if value in values]:
            target.merge(node.literals.pop(value), checks)
    for child in (*node.literals.values(), *node.classes.values(), *((node.wild,) if node.wild else ())):
        _coalesce(child, enums, checks)


# -- patterns -------------------------------------------------------------------------------------


@dataclass
class Placeholder:
    name: str
    kind: str  # a class of segments.CLASSES, enum, slug or any
    constraint: object  # for `placeholders:`: "digits", "uuid", "slug", {"enum": [...]}, {"regex": ...}; None: any
    what: str
    examples: list[str] = field(default_factory=list)


@dataclass
class Pattern:
    text: str
    placeholders: list[Placeholder]
    leaf: object
    segments: int
    rule: bool = True
    type: str = ""
    ttl: str = "none"  # required, none, mixed
    max_ttl: int | None = None
    limit: int | None = None
    bulk_high: int | None = None  # the largest size under the limit
    wrong_type: dict[str, int] = field(default_factory=dict)
    without_ttl: int = 0
    oversize: list = field(default_factory=list)  # (count, examples [(key, size)])
    oversize_count: int = 0
    traffic: list | None = None  # [commands, writes with a TTL, shortest, longest, writes without]

    @property
    def count(self) -> int:
        return self.leaf.count

    @property
    def outliers(self) -> int:
        if not self.rule:
            return self.count
        return sum(self.wrong_type.values()) + self.without_ttl + self.oversize_count


def shown(key: bytes, limit: int = 80) -> str:
    """A key as printable text for a comment or a report (never a line break)."""
    text = key.decode("utf-8", "backslashreplace")
    text = "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in text)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _name(previous: str | None, fallback: str, used: set[str], ordinal: int = 0) -> str:
    base = fallback
    if previous:
        word = re.sub(r"\W+", "_", previous, flags=re.ASCII).strip("_").lower()
        if word and word[0].isalpha() and len(word) <= 24:
            base = word[:-1] if word.endswith("s") and len(word) > 3 else word
    if ordinal:
        base = f"{base}{ordinal + 1}"
    name, n = base, 2
    while name in used:
        name, n = f"{base}{n}", n + 1
    used.add(name)
    return name


def _exclusion(excluded: list[str], body: str, delimiter: str) -> str:
    if not excluded:
        return body
    d = byte(ord(delimiter))
    return f"(?!(?:{'|'.join(excluded)})(?:{d}|\\Z))(?:{body})"


def collect(root: Node, enums: dict[int, list[bytes]], delimiter: str) -> list[Pattern]:
    """Every leaf of the settled trie as a Pattern (its decisions not yet taken)."""
    found: list[Pattern] = []
    d = byte(ord(delimiter))
    any_body = f"[^{d}]+"

    def walk(node: Node, parts: list, depth: int) -> None:
        if node.leaf is not None:
            found.append(_pattern(parts, node.leaf, delimiter))
        literal_values = list(node.literals)
        for value in sorted(literal_values):
            walk(node.literals[value], parts + [("lit", value)], depth + 1)
        enum_values = [v for key, child in node.classes.items() if key.startswith("enum#") for v in enums[id(child)]]
        # siblings named alike (two enums, an enum and a wildcard) get 2, 3... so that their
        # patterns' texts differ
        enum_keys = sorted(k for k in node.classes if k.startswith("enum#"))
        for ordinal, key in enumerate(enum_keys):
            child = node.classes[key]
            walk(child, parts + [("enum", enums[id(child)], ordinal)], depth + 1)
        earlier: list[str] = []
        for cls in ORDER:
            child = node.classes.get(cls)
            if child is None:
                continue
            body = class_regex(cls, delimiter)
            excluded = []
            if cls in OVERLAPPING:
                test = re.compile(body.encode()).fullmatch
                excluded = [literal_regex(v) for v in literal_values + enum_values if test(v)] + earlier
            walk(child, parts + [("class", cls, _exclusion(excluded, body, delimiter))], depth + 1)
            earlier.append(body)
        if node.wild is not None:
            values = node.wild.values
            body = SLUG if values is not None and values.slugs else any_body
            test = re.compile(body.encode()).fullmatch
            excluded = [literal_regex(v) for v in literal_values + enum_values if test(v)] + earlier
            kind = "slug" if body == SLUG else "any"
            walk(node.wild, parts + [("wild", kind, _exclusion(excluded, body, delimiter), values, len(enum_keys))],
                 depth + 1)

    walk(root, [], 0)
    return found


def _pattern(parts: list, leaf, delimiter: str) -> Pattern:
    texts, placeholders, used = [], [], set()
    previous = None
    for part in parts:
        kind = part[0]
        if kind == "lit":
            value = part[1].decode("utf-8", "surrogateescape")
            texts.append(value.replace("{", "{{").replace("}", "}}"))
            previous = value
            continue
        if kind == "enum":
            values = [v.decode("utf-8", "surrogateescape") for v in part[1]]
            name = _name(previous, "part", used, part[2])
            placeholder = Placeholder(name, "enum", {"enum": values}, f"one of {len(values)} values seen",
                                      values[:EXAMPLES])
        elif kind == "class":
            cls, regex = part[1], part[2]
            name = _name(None, CLASSES[cls][1], used)
            if cls in ("digits", "uuid") and regex == class_regex(cls, delimiter):
                constraint = cls
            else:
                constraint = {"regex": regex}
            placeholder = Placeholder(name, cls, constraint, CLASSES[cls][2])
        else:
            _, wild_kind, regex, values, ordinal = part
            name = _name(previous, "name", used, ordinal)
            plain = regex in (SLUG, f"[^{byte(ord(delimiter))}]+")
            constraint = ("slug" if wild_kind == "slug" else None) if plain else {"regex": regex}
            count = values.count if values is not None else 0
            what = f"{'slugs' if wild_kind == 'slug' else 'names'} ({count:,} values or more seen)"
            examples = [shown(v, 32) for v in values.examples] if values is not None else []
            placeholder = Placeholder(name, wild_kind, constraint, what, examples)
        placeholders.append(placeholder)
        texts.append("{" + placeholder.name + "}")
        previous = None
    return Pattern(delimiter.join(texts), placeholders, leaf, len(parts))


# -- decisions ------------------------------------------------------------------------------------


def nice_above(value: float) -> int:
    """The smallest 1, 2, 5 x 10^k at least `value`."""
    if value <= 1:
        return 1
    power = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 5, 10):
        if step * power >= value:
            return int(step * power)
    return int(10 * power)


def nice_duration(seconds: float) -> int:
    for nice in NICE_DURATIONS:
        if nice >= seconds:
            return nice
    return int(math.ceil(seconds / 86400) * 86400)


def _sizes(pattern: Pattern) -> None:
    buckets = pattern.leaf.sizes.get(pattern.type)
    if not buckets or pattern.type not in LIMITED:
        return
    indexes = sorted(buckets)
    total = sum(b.count for b in buckets.values())
    allowed = max(1, int(total * SIZE_OUTLIERS))
    cut = indexes[-1]
    if total >= SIZE_MIN_KEYS:
        above = 0
        for at in range(len(indexes) - 1, 0, -1):
            above += buckets[indexes[at]].count
            if above > allowed:
                break
            if indexes[at] - indexes[at - 1] >= 2:
                cut = indexes[at - 1]
    bulk_high = max(buckets[i].high for i in indexes if i <= cut)
    limit = nice_above(max(bulk_high * HEADROOM, bulk_high + 1))
    for index in indexes:  # a bucket that straddles the limit is covered whole
        bucket = buckets[index]
        if bucket.low is not None and bucket.low <= limit < bucket.high:
            limit = nice_above(bucket.high * HEADROOM)
    pattern.limit = limit
    pattern.bulk_high = bulk_high
    for index in indexes:
        bucket = buckets[index]
        if bucket.low is not None and bucket.low > limit:
            pattern.oversize_count += bucket.count
            pattern.oversize.extend(bucket.examples)


def decide(patterns: list[Pattern], min_keys: int = MIN_KEYS) -> None:
    for pattern in patterns:
        leaf = pattern.leaf
        pattern.rule = leaf.count >= min_keys or not pattern.placeholders
        pattern.type = leaf.major_type()
        pattern.wrong_type = {kind: count for kind, count in leaf.types.items() if kind != pattern.type}
        pattern.ttl = ttl_practice(leaf)
        if pattern.ttl == "required":
            # keys of another type are outliers already: counted once
            pattern.without_ttl = leaf.types[pattern.type] - leaf.ttl_types.get(pattern.type, 0)
            pattern.max_ttl = nice_duration(max(leaf.ttl_high / 1000 * 1.1, 1))
        _sizes(pattern)


# -- naming rules ---------------------------------------------------------------------------------


@dataclass
class Naming:
    delimiter: str
    min_segments: int
    max_segments: int
    style: str | None
    charset: str | None
    first_letter: bool
    max_length: int
    longest: int
    joiner: str | None
    chars: bytes
    empty_segments: bool = False  # some name has an empty segment (a::b): K1 would refuse it


def _charset(chars: bytes) -> str | None:
    if any(b in FORBIDDEN_BYTES for b in chars):
        return None
    parts = []
    for low, high, text in ((ord("a"), ord("z"), "a-z"), (ord("A"), ord("Z"), "A-Z"), (ord("0"), ord("9"), "0-9")):
        if any(low <= b <= high for b in chars):
            parts.append(text)
    others = sorted(b for b in chars if b < 0x80 and not chr(b).isalnum())
    parts.extend(byte(b) if chr(b) not in "-]\\^" else "\\" + chr(b) for b in others)
    if any(b >= 0x80 for b in chars):
        parts.append("\\x80-\\xff")
    return "".join(parts) or None


def naming(patterns: list[Pattern], delimiter: str) -> Naming | None:
    rules = [p for p in patterns if p.rule]
    if not rules:
        return None
    leaves = [p.leaf for p in rules]
    chars = bytes(sorted(set(b"".join(leaf.chars for leaf in leaves))))
    firsts = b"".join(leaf.firsts for leaf in leaves)
    styles = None
    joiners = None
    for leaf in leaves:
        names = [style for style, _ in leaf.styles]
        styles = names if styles is None else [s for s in styles if s in names]
        names = [joiner for joiner, _ in leaf.joiners]
        joiners = names if joiners is None else [j for j in joiners if j in names]
    used_joiners = [j for j in joiners or () if j.encode() in chars]
    longest = max(leaf.length_high for leaf in leaves)
    return Naming(
        delimiter=delimiter,
        min_segments=min(p.segments for p in rules),
        max_segments=max(p.segments for p in rules),
        style=styles[0] if styles else None,
        charset=_charset(chars),
        first_letter=bool(firsts) and all(chr(b).isalpha() and b < 0x80 for b in firsts),
        max_length=max(16, int(math.ceil(longest * HEADROOM / 8) * 8)),
        longest=longest,
        joiner=used_joiners[0] if len(used_joiners) == 1 else None,
        chars=chars,
        empty_segments=any("" in p.text.split(delimiter) for p in rules),
    )


# -- the draft ------------------------------------------------------------------------------------


@dataclass
class Draft:
    patterns: list[Pattern]
    naming: Naming | None
    keys: int
    delimiter: str
    source: str = ""
    traffic: object = None  # traffic.Learned, when --from-traffic

    @property
    def rules(self) -> list[Pattern]:
        return [p for p in self.patterns if p.rule]

    @property
    def rare(self) -> list[Pattern]:
        return [p for p in self.patterns if not p.rule]

    @property
    def outlier_keys(self) -> int:
        return sum(p.outliers for p in self.patterns)

    @property
    def accepted(self) -> int:
        """Keys the draft accepts (a key that is an outlier twice is counted out twice: a floor)."""
        return max(0, self.keys - self.outlier_keys)


def build(model, min_keys: int = MIN_KEYS, source: str = "", traffic=None) -> Draft:
    model.finish()
    delimiter = model.delimiter or ":"
    if model.keys == 0:
        return Draft([], None, 0, delimiter, source, traffic)
    enums = settle(model.root, model.checks)
    patterns = collect(model.root, enums, delimiter)
    decide(patterns, min_keys)
    patterns.sort(key=lambda p: (not p.rule, -p.count, p.text))
    draft = Draft(patterns, naming(patterns, delimiter), model.keys, delimiter, source, None)
    if traffic is not None:
        with_traffic(draft, traffic)
    return draft


def with_traffic(draft: Draft, learned) -> None:
    """Each key shape the traffic used, to the draft's pattern its example key matches: the TTLs
    writes set there (a better maximum than the TTLs left on the keys scanned); shapes no
    pattern matches are listed for review (K10 would reject them)."""
    schema = load_policy_text(render(draft)).schema if draft.rules else None
    by_text = {p.text: p for p in draft.rules}
    for shape, example, count, ttl_writes, low, high, plain in learned.shapes():
        found = schema.match(example.encode("utf-8", "surrogateescape")) if schema is not None else None
        if found is None:
            learned.uncovered.append((shape, count, example))
            continue
        pattern = by_text[found.pattern]
        seen = pattern.traffic or [0, 0, None, None, 0]
        seen[0] += count
        seen[1] += ttl_writes
        if low is not None:
            seen[2] = low if seen[2] is None else min(seen[2], low)
            seen[3] = high if seen[3] is None else max(seen[3], high)
        seen[4] += plain
        pattern.traffic = seen
        if pattern.ttl == "required" and seen[3] is not None:
            pattern.max_ttl = max(pattern.max_ttl, nice_duration(seen[3]))
    learned.uncovered.sort(key=lambda item: -item[1])
    draft.traffic = learned


def _share(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "0%"


def _keys(count: int) -> str:
    return f"{count:,} key{'s' if count != 1 else ''}"


def _q(text: str) -> str:
    return json.dumps(text)


def _examples(keys, limit: int = EXAMPLES) -> str:
    return ", ".join(shown(k) for k in list(keys)[:limit])


def render(draft: Draft, name: str = "inferred") -> str:
    """The draft policy as YAML, every line commented with its evidence."""
    lines = []
    out = lines.append
    rules = draft.rules
    where = f" of {draft.source}" if draft.source else ""
    out(f"# Drafted by `redis-guard policy infer` from {draft.keys:,} keys{where}.")
    out(f"# {len(rules)} key patterns cover {sum(p.count for p in rules):,} keys; the draft accepts "
        f"{draft.accepted:,} of {draft.keys:,} ({_share(draft.accepted, draft.keys)}).")
    out(f"# {draft.outlier_keys:,} keys are outliers (listed at the end): review them before enforcing.")
    out("# Review it like a diff: each line says what it was drawn from. Then run it as a shadow policy")
    out("# (serve --shadow-policy), in audit mode, and enforce (docs/adopting.md).")
    out(f"name: {name}  # shown by policy check, in logs and metrics (policy infer --name)")
    out(f"description: {_q(f'inferred from {draft.keys:,} keys: {len(rules)} patterns')}")
    out("mode: enforce  # try it as a shadow policy, then in mode: audit, before enforcing it")
    out("rules:")
    naming_ = draft.naming
    if naming_ is not None:
        d = naming_.delimiter
        low, high = naming_.min_segments, naming_.max_segments
        if naming_.empty_segments:
            out(f"  # K1 (segments): left out, some names have an empty segment ({_q(d + d)})")
        else:
            out(f"  K1: {{delimiter: {_q(d)}, min_segments: {low}, max_segments: {high}}}"
                f"  # every pattern has {low if low == high else f'{low} to {high}'} segments split by {_q(d)}")
        if naming_.style is not None:
            out(f"  K2: {{style: {naming_.style}, delimiter: {_q(d)}}}  # every name is {naming_.style}")
        else:
            out("  # K2 (letter case): left out, the names mix cases")
        if naming_.charset is not None:
            first = ", first: letter" if naming_.first_letter else ""
            seen = "".join(chr(b) if 0x20 < b < 0x7f else f"\\x{b:02x}" for b in naming_.chars)
            out(f"  K3: {{charset: {_q(naming_.charset)}{first}}}  # the bytes seen: {seen}"
                + ("; every name starts with a letter" if first else ""))
        out(f"  K4: {{min_length: 1, max_length: {naming_.max_length}}}  # the longest name has "
            f"{naming_.longest} bytes")
        if naming_.joiner is not None:
            out(f"  K5: {{joiner: {_q(naming_.joiner)}, delimiter: {_q(d)}}}  # words inside a segment are joined "
                f"by {_q(naming_.joiner)} only")
    if rules:
        out("  K10: {strict: true}  # a key must match a pattern below, commands must be of its type")
    else:
        out("  # K10 (key schema): left out: no key pattern found")
    if any(p.ttl == "required" for p in rules):
        out("  T1: {action: reject}  # the patterns with a TTL below: every write leaves the key a TTL")
    bounded = [p.max_ttl for p in rules if p.max_ttl]
    if bounded:
        out(f"  T3: {{max_ttl: {max(bounded)}}}  # the longest TTL a pattern below allows ({duration(max(bounded))})")
    strings = [p.limit for p in rules if p.limit and p.type == "string"]
    collections = [p.limit for p in rules if p.limit and p.type != "string"]
    out(f"  V1: {{max_bytes: {max(strings + [10240])}}}  # strings; each pattern below has its own limit")
    out(f"  V2: {{max_elements: {max(collections + [5000])}}}  # collections; each pattern below has its own limit")
    if draft.traffic is not None:
        out(draft.traffic.c2_line())
    else:
        out("  C2: {baseline: true}  # the baseline guard: KEYS, FLUSHALL, FLUSHDB, @admin, @dangerous...")
    if draft.traffic is not None:
        lines.extend(draft.traffic.policy_lines())
    out("")
    if rules:
        out("schema:")
    for pattern in rules:
        lines.extend(_pattern_lines(pattern, draft.keys))
    lines.extend(_outlier_lines(draft))
    if draft.traffic is not None:
        lines.extend(draft.traffic.review_lines())
    return "\n".join(lines) + "\n"


def _pattern_lines(p: Pattern, total: int) -> list[str]:
    leaf = p.leaf
    lines = [f"  # {_keys(p.count)} ({_share(p.count, total)}), e.g. {_examples(leaf.type_examples[p.type])}"
             + ("; a single named key: review" if not p.placeholders and p.count < MIN_KEYS else "")]
    lines.append(f"  - key: {_q(p.text)}")
    others = "; ".join(f"{count:,} {kind}" for kind, count in sorted(p.wrong_type.items()))
    lines.append(f"    type: {p.type}  # {leaf.types[p.type]:,} of {p.count:,} keys"
                 + (f" (outliers: {others})" if others else ""))
    if p.placeholders:
        items = []
        notes = []
        for ph in p.placeholders:
            if ph.constraint is not None:
                value = ph.constraint if isinstance(ph.constraint, str) else (
                    "{enum: [" + ", ".join(_q(v) for v in ph.constraint["enum"]) + "]}" if "enum" in ph.constraint
                    else "{regex: " + _q(ph.constraint["regex"]) + "}")
                items.append(f"{ph.name}: {value}")
            notes.append(f"{{{ph.name}}} {ph.what}" + (f": {', '.join(ph.examples)}" if ph.examples else ""))
        if items:
            lines.append(f"    placeholders: {{{', '.join(items)}}}  # " + "; ".join(notes))
        else:
            lines.append("    # placeholders: " + "; ".join(notes))
    if p.ttl == "required":
        low, high = leaf.ttl_low / 1000, leaf.ttl_high / 1000
        missing = f"; {p.without_ttl:,} without (outliers)" if p.without_ttl else ""
        lines.append(f"    ttl: {{max: {p.max_ttl}}}  # {leaf.with_ttl:,} keys have a TTL, {approximately(low)} to "
                     f"{approximately(high)} left when read{missing}")
    elif p.ttl == "none":
        lines.append("    ttl: none  # no key has a TTL")
    else:
        lines.append(f"    ttl: none  # MIXED: {leaf.with_ttl:,} of {p.count:,} keys have a TTL: choose one practice")
    if p.traffic is not None:
        count, ttl_writes, low, high, plain = p.traffic
        ttls = f"{ttl_writes:,} set a TTL ({approximately(low)} to {approximately(high)})" if ttl_writes else \
            "none set a TTL"
        lines.append(f"    # traffic: {count:,} commands; of the writes, {ttls}, {plain:,} set none")
    if p.limit is not None:
        unit = "bytes" if p.type == "string" else "elements"
        over = (f"; {p.oversize_count:,} over it (outliers, up to "
                f"{max(size for _, size in p.oversize):,})" if p.oversize_count else "")
        lines.append(f"    limits: {{{LIMITED[p.type]}: {p.limit}}}  # the largest seen: {p.bulk_high:,} {unit}{over}")
    lines.append(f"    description: {_q(f'inferred from {_keys(p.count)}')}")
    return lines


def outliers(draft: Draft) -> list[tuple[str, str, int, list[str]]]:
    """(what, pattern, keys, examples) for every group of outliers, the largest first."""
    found = []
    for p in draft.patterns:
        leaf = p.leaf
        if not p.rule:
            kinds = ", ".join(sorted(leaf.types))
            examples = [shown(k) for kind in sorted(leaf.type_examples) for k in leaf.type_examples[kind]]
            found.append((f"a rare pattern ({kinds}): no rule made of it", p.text, p.count, examples[:EXAMPLES]))
            continue
        for kind, count in sorted(p.wrong_type.items()):
            found.append((f"{kind} where the pattern holds {p.type}", p.text, count,
                          [shown(k) for k in leaf.type_examples[kind]]))
        if p.without_ttl:
            found.append((f"no TTL where {leaf.with_ttl:,} keys have one", p.text, p.without_ttl,
                          [shown(k) for k in leaf.no_ttl_examples.get(p.type, ())]))
        if p.oversize_count:
            unit = "bytes" if p.type == "string" else "elements"
            found.append((f"over {p.limit:,} {unit} (the rest at most {p.bulk_high:,})", p.text, p.oversize_count,
                          [f"{shown(k)} ({size:,})" for k, size in p.oversize[:EXAMPLES]]))
    found.sort(key=lambda item: -item[2])
    return found


def _outlier_lines(draft: Draft) -> list[str]:
    found = outliers(draft)
    if not found:
        return ["", "# Outliers: none: every key scanned follows a pattern above."]
    lines = ["", f"# Outliers: {draft.outlier_keys:,} keys the draft does not accept, to look at before enforcing",
             "# (`redis-guard audit --policy` on this draft lists them all):"]
    for what, pattern, count, examples in found:
        lines.append(f"#   {pattern}: {count:,} key{'s' if count != 1 else ''}, {what}: {', '.join(examples)}")
    return lines


def report(draft: Draft) -> str:
    """The terminal summary."""
    rules = draft.rules
    lines = [f"policy infer: {draft.keys:,} keys, {len(draft.patterns)} patterns found: {len(rules)} rules, "
             f"{len(draft.rare)} rare",
             f"  the draft accepts {draft.accepted:,} of {draft.keys:,} keys ({_share(draft.accepted, draft.keys)})"]
    for p in rules[:20]:
        ttl = (f"TTL <= {duration(p.max_ttl)}" if p.ttl == "required"
               else "TTL mixed" if p.ttl == "mixed" else "no TTL")
        limit = f", <= {p.limit:,} {'bytes' if p.type == 'string' else 'elements'}" if p.limit else ""
        lines.append(f"  {p.count:>10,}  {p.text}  {p.type}, {ttl}{limit}")
    if len(rules) > 20:
        lines.append(f"  ... and {len(rules) - 20} more patterns (see the draft)")
    found = outliers(draft)
    if found:
        lines.append(f"outliers ({draft.outlier_keys:,} keys):")
        for what, pattern, count, examples in found[:30]:
            lines.append(f"  {count:>10,}  {pattern}: {what}: {', '.join(examples)}")
    return "\n".join(lines) + "\n"


# -- fixtures -------------------------------------------------------------------------------------


def _fixture_key(key: bytes) -> str | None:
    try:
        text = key.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return text if text.isprintable() else None


def _case(command: list[str], expect, comment: str, then=None) -> list[str]:
    lines = [f"  # {comment}", f"  - command: [{', '.join(_q(word) for word in command)}]"]
    if then:
        lines.append(f"    then: [[{', '.join(_q(word) for word in then)}]]")
    lines.append(f"    expect: {expect}")
    return lines


def fixtures(draft: Draft, policy_path: str) -> str:
    """`policy test` fixtures: a read and a write of a real key of every pattern (allowed), and
    the commands that would write each outlier as it is (rejected)."""
    lines = ["# Fixtures drafted by `redis-guard policy infer` from the keys scanned: run `redis-guard policy test`",
             f"policy: {_q(policy_path)}", "cases:"]
    for p in draft.rules:
        examples = [k for k in p.leaf.type_examples[p.type] if _fixture_key(k) is not None]
        if not examples or p.type not in READS:
            continue
        key = _fixture_key(examples[0])
        read = READS[p.type]
        lines += _case([read[0], key, *read[1:]], "allow", f"{p.text}: a {p.type} read ({_keys(p.count)})")
        write = WRITES.get(p.type)
        if write is None:
            continue
        if p.ttl == "required":
            seconds = str(max(1, min(p.max_ttl, int(p.leaf.ttl_high / 1000) or 1)))
            if p.type == "string":
                lines += _case(["SET", key, "v", "EX", seconds], "allow", f"{p.text}: written with a TTL")
            else:
                lines += _case([write[0], key, *write[1:]], "allow", f"{p.text}: written, then given a TTL",
                               then=["EXPIRE", key, seconds])
                lines += _case([write[0], key, *write[1:]], "{reject: T1}", f"{p.text}: written without a TTL")
        else:
            lines += _case([write[0], key, *write[1:]], "allow", f"{p.text}: written (no TTL, as its keys)")
    for p in draft.patterns:
        leaf = p.leaf
        if not p.rule:
            for kind in sorted(leaf.type_examples):
                for raw in leaf.type_examples[kind][:1]:
                    key = _fixture_key(raw)
                    if key is not None and kind in READS:
                        read = READS[kind]
                        lines += _case([read[0], key, *read[1:]], "{reject: [K10, K1, K2, K3, K4, K5]}",
                                       f"outlier: {p.text} is a rare pattern ({_keys(p.count)})")
            continue
        for kind in sorted(p.wrong_type):
            key = _fixture_key(leaf.type_examples[kind][0])
            if key is not None and kind in READS:
                read = READS[kind]
                lines += _case([read[0], key, *read[1:]], "{reject: K10}",
                               f"outlier: a {kind} under {p.text}, whose keys are {p.type} keys")
        if p.without_ttl and p.type in WRITES:
            examples = leaf.no_ttl_examples.get(p.type)
            key = _fixture_key(examples[0]) if examples else None
            if key is not None:
                write = WRITES[p.type]
                lines += _case([write[0], key, *write[1:]], "{reject: T1}",
                               f"outlier: written without a TTL under {p.text}")
        if p.oversize_count and p.type == "string" and p.limit < FIXTURE_VALUE_MAX:
            key = _fixture_key(p.oversize[0][0])
            if key is not None:
                seconds = str(p.max_ttl) if p.ttl == "required" else None
                command = ["SET", key, "x" * (p.limit + 1)] + (["EX", seconds] if seconds else [])
                lines += _case(command, "{reject: V1}", f"outlier: a value over {p.limit:,} bytes under {p.text}")
    return "\n".join(lines) + "\n"

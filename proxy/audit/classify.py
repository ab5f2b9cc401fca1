"""One key's facts against the policy: its findings, at most one per rule.

Which rules the audit checks, and with which thresholds, is decided once when an `Auditor` is
made from the loaded policy (rules that are `off` count as absent):

- key names (K1-K5, K8, K9, K11): the engine's one compiled match (`Engine.key_ok`); for a
  failing name, each rule's own pattern says which rules fail, and their own explanation
  (`check_key`) is asked only for the offenders the report shows (`NameFinding`);
- K6: the key's type words against what TYPE says it holds (`TypeWords.check_stored`);
- K10: the key schema, when the policy has one (`policy.schema.match(key)`): a key matching no
  pattern, of another type than its pattern declares, over the pattern's `max_bytes` /
  `max_elements`, or without a TTL when the pattern declares a `ttl`;
- T1: no TTL, outside the rule's `persistent` patterns; T3: a TTL left above `max_ttl`;
- V4: a JSON object stored as a string (`JsonStrings.check_value` on the value's first bytes);
- always, policy or not: O1 (a key without a TTL that T1 does not report: a key is counted
  under one of the two; not a key whose schema pattern says `ttl: none`: persistent by design)
  and big keys: V1 (strings over a size,
  in bytes) and V2 (collections over a number of elements). Their thresholds are, in order: the
  command line's, the policy's V1 / V2 (with its `per_type` caps), or the defaults below.

Not checkable on stored keys, and listed as such in the report: the command rules (C1-C6), T2
(jitter is not visible in a TTL), V3 (it would mean reading every element), K7 (not in the
policy language).
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import errors
from ..policy.base import OFF, Finding
from ..policy.rules._durations import approximately
from ..policy.rules._keyshape import fullmatcher, text
from .facts import KeyFacts

DEFAULT_STRING_BYTES = 10240  # rule V1 (docs/rules.md): 10 KB (conventions 001, 002, 003)
DEFAULT_ELEMENTS = 5000  # rule V2 (docs/rules.md): 5,000 elements (convention 003)
COLLECTIONS = ("hash", "list", "set", "zset", "stream")

# Rules of docs/rules.md with the reason the audit does not check them on stored keys.
UNCHECKABLE = {
    "C1": "a command rule", "C2": "a command rule", "C3": "a command rule", "C4": "a command rule",
    "C5": "a command rule", "C6": "a command rule",
    "K7": "not in the policy language",
    "T2": "jitter is not visible in a stored TTL",
    "V3": "would need every element read",
}
NAME_RULES = ("K1", "K2", "K3", "K4", "K5", "K8", "K9", "K11")


@dataclass(frozen=True)
class Thresholds:
    """Command-line overrides of the big-key thresholds (None: the policy's, else the default)."""

    string_bytes: int | None = None
    elements: int | None = None


@dataclass(frozen=True)
class Checked:
    """One rule the audit checks: its id, title and what exactly it looks for."""

    rule: str
    title: str
    what: str


class Auditor:
    def __init__(self, policy=None, engine=None, thresholds: Thresholds = Thresholds()):
        def active(rule_id):
            rule = policy.rule(rule_id) if policy is not None else None
            return rule if rule is not None and rule.mode != OFF else None

        self.checked: list[Checked] = []
        self.not_checked: dict[str, str] = {}
        self.key_ok = None
        self.name_rules = []
        if engine is not None and engine.key_match is not None:
            self.key_ok = engine.key_ok
            for rule in engine.key_rules:
                if rule.id == "K10":  # the schema check below says more: the pattern, type, sizes
                    continue
                self.checked.append(Checked(rule.id, rule.title, rule.describe()))
                if rule.pattern:
                    self.name_rules.append((rule, fullmatcher(rule.pattern)))
        self.k6 = active("K6")
        if self.k6 is not None:
            self.checked.append(Checked("K6", self.k6.title, "type words against the stored type"))
        self.schema = getattr(policy, "schema", None)
        if self.schema is not None:
            self.checked.append(Checked("K10", errors.AUDIT_TITLES["K10"],
                                        "a pattern of the schema, its type, sizes and TTL"))
        self.checked.append(Checked("O1", errors.AUDIT_TITLES["O1"],
                                    "keys without a TTL that T1 does not report (always)"))
        self.t1 = active("T1")
        if self.t1 is not None:
            exempt = f", except {', '.join(self.t1.persistent)}" if self.t1.persistent else ""
            self.checked.append(Checked("T1", self.t1.title, f"keys without a TTL{exempt}"))
        self.t3 = active("T3")
        if self.t3 is not None:
            self.checked.append(Checked("T3", self.t3.title, f"a TTL left above {approximately(self.t3.max_ttl)}"))
        self.v4 = active("V4")
        if self.v4 is not None:
            self.checked.append(Checked("V4", self.v4.title,
                                        f"JSON objects in strings (first {self.v4.sample_bytes} bytes read)"))
        v1, v2 = active("V1"), active("V2")
        if thresholds.string_bytes is not None:
            self.string_bytes, source = thresholds.string_bytes, "command line"
        elif v1 is not None:
            self.string_bytes, source = v1.max_bytes, "policy"
        else:
            self.string_bytes, source = DEFAULT_STRING_BYTES, "default"
        self.checked.append(Checked("V1", errors.AUDIT_TITLES["V1"],
                                    f"strings over {self.string_bytes} bytes ({source})"))
        if thresholds.elements is not None:
            self.elements = dict.fromkeys(COLLECTIONS, thresholds.elements)
            source = "command line"
        elif v2 is not None:
            self.elements = {kind: v2.caps.get(kind, v2.max_elements) for kind in COLLECTIONS}
            source = "policy"
        else:
            self.elements = dict.fromkeys(COLLECTIONS, DEFAULT_ELEMENTS)
            source = "default"
        caps = sorted(set(self.elements.values()))
        special = ", ".join(f"{kind} {cap}" for kind, cap in self.elements.items() if cap != caps[-1])
        self.checked.append(Checked("V2", errors.AUDIT_TITLES["V2"],
                                    f"collections over {caps[-1]} elements" +
                                    (f" ({special})" if special else "") + f" ({source})"))
        checked = {item.rule for item in self.checked}
        for rule_id in (*NAME_RULES, "K6", "K10", "T1", "T3", "V4"):
            if rule_id not in checked:
                rule = policy.rule(rule_id) if policy is not None else None
                self.not_checked[rule_id] = "off in the policy" if rule is not None else "not in the policy"
        self.not_checked.update(UNCHECKABLE)
        self.sample_bytes = self.v4.sample_bytes if self.v4 is not None else 0

    def classify(self, facts: KeyFacts) -> list[Finding]:
        key = facts.key
        found: list[Finding] = []
        if self.key_ok is not None and not self.key_ok(key):
            found.extend(NameFinding(rule, key) for rule, full in self.name_rules if full(key) is None)
        kind = facts.type
        if self.k6 is not None:
            finding = self.k6.check_stored(key, kind)
            if finding is not None:
                found.append(finding)
        ttl_ms = facts.ttl_ms
        t1 = self.t1
        # A key without a TTL is T1's when the policy requires it one, else O1's: not both
        requires_ttl = (ttl_ms == -1 and t1 is not None and (t1.exempt is None or not t1.exempt(key))
                        and not self._persistent_pattern(key))
        if self.schema is not None:
            finding = self._schema(facts, requires_ttl)
            if finding is not None:
                found.append(finding)
        if requires_ttl:
            found.append(t1.finding(f"key '{text(key)}'", errors.audit_ttl_required()))
        elif ttl_ms == -1 and not self._persistent_pattern(key):
            found.append(_finding("O1", key, errors.audit_no_ttl()))
        elif self.t3 is not None and ttl_ms > self.t3.max_ttl * 1000:
            t3 = self.t3
            if t3.exempt is None or not t3.exempt(key):
                advice = errors.audit_ttl_above(approximately(ttl_ms / 1000), approximately(t3.max_ttl))
                found.append(t3.finding(f"key '{text(key)}'", advice))
        length = facts.length
        if length is not None:
            if kind == "string":
                if length > self.string_bytes:
                    found.append(_finding("V1", key, errors.audit_big_string(length, self.string_bytes)))
                if self.v4 is not None and facts.sample:
                    finding = self.v4.check_value(key, facts.sample, length)
                    if finding is not None:
                        found.append(finding)
            else:
                cap = self.elements.get(kind)
                if cap is not None and length > cap:
                    found.append(_finding("V2", key, errors.audit_big_collection(kind, length, cap)))
        return found

    def _schema(self, facts: KeyFacts, t1_fires: bool = False) -> Finding | None:
        """K10's finding; a missing TTL the pattern declares is left to T1 when T1 reports it."""
        key = facts.key
        pattern = self.schema.match(key)
        if pattern is None:
            return _finding("K10", key, errors.audit_schema_unmatched())
        name = pattern.pattern
        if pattern.type != facts.type:
            return _finding("K10", key, errors.audit_schema_type(name, pattern.type, facts.type))
        length = facts.length
        if length is not None:
            limit, unit = ((getattr(pattern, "max_bytes", None), "bytes") if facts.type == "string"
                           else (getattr(pattern, "max_elements", None), "elements"))
            if limit is not None and length > limit:
                return _finding("K10", key, errors.audit_schema_size(name, length, limit, unit))
        ttl = pattern.ttl
        if facts.ttl_ms == -1 and ttl is not None and ttl.required and not t1_fires:
            return _finding("K10", key, errors.audit_schema_ttl(name, ttl))
        return None

    def _persistent_pattern(self, key: bytes) -> bool:
        """The schema declares the key's pattern `ttl: none`: T1 does not apply to it."""
        pattern = self.schema.match(key) if self.schema is not None else None
        return pattern is not None and pattern.ttl is not None and not pattern.ttl.required


class NameFinding:
    """A key-name rule's finding whose subject and advice are the rule's own explanation
    (`check_key`, what `Engine._explain_key` asks too), worked out only when read: the report
    keeps the words of its top offenders only, and explaining every failing name of a large
    keyspace would cost more than the scan. Which rules fail is each rule's own `pattern`,
    which its `check_key` agrees with by construction (`rules/_keyshape.py`)."""

    __slots__ = ("rule_object", "key", "_explained")

    def __init__(self, rule_object, key: bytes):
        self.rule_object = rule_object
        self.key = key
        self._explained = None

    @property
    def rule(self) -> str:
        return self.rule_object.id

    @property
    def title(self) -> str:
        return self.rule_object.title

    def _finding(self) -> Finding:
        if self._explained is None:
            rule = self.rule_object
            self._explained = (rule.check_key(self.key.decode("utf-8", "surrogateescape"))
                               or rule.finding(f"key '{text(self.key)}'", rule.describe()))
        return self._explained

    @property
    def subject(self) -> str:
        return self._finding().subject

    @property
    def advice(self) -> str:
        return self._finding().advice


def _finding(rule: str, key: bytes, advice: str) -> Finding:
    return Finding(rule, errors.AUDIT_TITLES[rule], f"key '{text(key)}'", advice)

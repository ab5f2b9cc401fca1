"""The audit's recommendations: what to do about the findings, each with a stable code (for
tickets, dashboards and `--compare`) and the number of keys it concerns, biggest first (as
RedisInsight's database analysis does).

`GROUPS` says which rules' findings each recommendation covers; `Report` counts, per key, the
groups its findings fall in (a key breaking K1 and K2 is one key to rename), and
`recommendations(report)` turns those counts, with the TTL distribution and the report's top
offenders, into plain data. A code never changes meaning; a new kind of advice gets a new code.
"""

from __future__ import annotations

from dataclasses import dataclass

from .classify import NAME_RULES


@dataclass(frozen=True)
class Advice:
    code: str
    title: str
    rules: tuple[str, ...]
    advice: str


ADVICE = (
    Advice("set-ttls", "keys without a TTL", ("O1", "T1"),
           "give them a TTL (EXPIRE), or let the proxy add one on write (T1 action: inject); list the "
           "patterns of data that must not expire in T1's persistent (or ttl: none in the key schema)"),
    Advice("shorten-ttls", "TTLs above the policy's maximum", ("T3",),
           "set shorter TTLs with EXPIRE; T3 keeps new ones within bounds"),
    Advice("rename-keys", "key names that break the naming rules", NAME_RULES,
           "rename them (RENAME, or write new keys and let the old ones expire) after the pattern the "
           "policy's naming rules describe"),
    Advice("match-type-words", "type words that do not match the stored type", ("K6",),
           "rename the key so that its type word names what it holds, or store the type it names"),
    Advice("follow-key-schema", "keys outside the key schema or of another type", ("K10",),
           "rename them after a declared pattern, or declare their pattern under 'schema:'"),
    Advice("split-big-strings", "big strings", ("V1",),
           "split them, store their fields in a hash, or compress them; V1 refuses new big values"),
    Advice("shard-big-collections", "big collections", ("V2",),
           "shard them by a key segment (user:1000:carts:0, :1, ...); V2 caps new writes"),
    Advice("hashes-not-json", "JSON objects stored as strings", ("V4",),
           "store objects as hashes (HSET) so that one field changes without a read-modify-write"),
)
BY_CODE = {advice.code: advice for advice in ADVICE}
# rule id -> the codes whose rules it is among
GROUPS: dict[str, tuple[str, ...]] = {}
for _advice in ADVICE:
    for _rule in _advice.rules:
        GROUPS[_rule] = (*GROUPS.get(_rule, ()), _advice.code)


def recommendations(report: dict, groups: dict[str, int], examples: int = 3) -> list[dict]:
    """One entry per code with keys, biggest first (then by code): code, title, keys, rules,
    advice, and example keys (the biggest offenders of its rules)."""
    found = []
    for code, keys in groups.items():
        if not keys:
            continue
        advice = BY_CODE[code]
        rules = [rule for rule in advice.rules if rule in report["rules"]]
        shown = []
        for rule in rules:
            shown += [item["key"] for item in report["rules"][rule]["top"] if item["key"] not in shown]
        found.append({"code": code, "title": advice.title, "keys": keys, "rules": rules,
                      "advice": advice.advice, "examples": shown[:examples]})
    return sorted(found, key=lambda entry: (-entry["keys"], entry["code"]))

"""`redis-guard audit --compare PREVIOUS.json`: what got better or worse since an earlier run.

`load_previous` reads the JSON report of an earlier run (what `--json` wrote) and refuses anything
else; `compare(previous, current)` puts the two reports' counts side by side as plain data: the
totals (keys, keys with findings, memory, keys without a TTL), keys per rule, keys with findings
per namespace and per rule in it, and keys per recommendation code. Each entry has `before`,
`after` and `change` (after - before: for findings, negative is better). A comparison with a run
of another target or policy says so in `notes`. No I/O but the file read.
"""

from __future__ import annotations

import json

from .report import RULE_ORDER

NAMESPACES_SHOWN = 50  # namespaces with a change, the biggest changes first


class CompareError(Exception):
    pass


def load_previous(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except OSError as exc:
        raise CompareError(f"--compare {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise CompareError(f"--compare {path}: not JSON ({exc})") from None
    if not (isinstance(data, dict) and isinstance(data.get("keys"), dict) and isinstance(data.get("rules"), dict)
            and isinstance(data.get("namespaces"), list)):
        raise CompareError(f"--compare {path}: not the JSON report of redis-guard audit (write one with --json FILE)")
    return data


def _entry(before: int, after: int, **named) -> dict:
    return {**named, "before": before, "after": after, "change": after - before}


def _no_ttl(report: dict) -> int:
    groups = report.get("ttl_distribution") or []
    return next((group["keys"] for group in groups if group.get("ttl") == "no TTL"), 0)


def compare(previous: dict, current: dict) -> dict:
    notes = []
    for field, what in (("target", "target"), ("policy", "policy")):
        if previous.get(field) != current.get(field):
            notes.append(f"the previous run had another {what}: {previous.get(field)!r}")
    if not previous.get("complete", True):
        notes.append("the previous run was partial")
    before_keys, after_keys = previous["keys"], current["keys"]
    totals = [_entry(before_keys.get(name, 0), after_keys.get(name, 0), what=name)
              for name in ("scanned", "with_findings", "memory_bytes")]
    if "ttl_distribution" in previous:
        totals.append(_entry(_no_ttl(previous), _no_ttl(current), what="without_ttl"))
    rules = []
    for rule in sorted({*previous["rules"], *current["rules"]}, key=lambda r: RULE_ORDER.get(r, len(RULE_ORDER))):
        before, after = previous["rules"].get(rule, {}), current["rules"].get(rule, {})
        rules.append(_entry(before.get("keys", 0), after.get("keys", 0), rule=rule,
                            title=after.get("title") or before.get("title", "")))
    old_spaces = {space["namespace"]: space for space in previous["namespaces"]}
    new_spaces = {space["namespace"]: space for space in current["namespaces"]}
    namespaces = []
    for name in {*old_spaces, *new_spaces}:
        before, after = old_spaces.get(name, {}), new_spaces.get(name, {})
        old_rules, new_rules = before.get("rules", {}), after.get("rules", {})
        per_rule = {rule: [old_rules.get(rule, 0), new_rules.get(rule, 0)]
                    for rule in sorted({*old_rules, *new_rules}, key=lambda r: RULE_ORDER.get(r, len(RULE_ORDER)))
                    if old_rules.get(rule, 0) != new_rules.get(rule, 0)}
        entry = _entry(before.get("keys_with_findings", 0), after.get("keys_with_findings", 0), namespace=name,
                       rules=per_rule)
        if entry["change"] or per_rule:
            namespaces.append(entry)
    namespaces.sort(key=lambda entry: (-abs(entry["change"]), entry["namespace"]))
    old_codes = {item["code"]: item for item in previous.get("recommendations", [])}
    new_codes = {item["code"]: item for item in current.get("recommendations", [])}
    codes = [_entry(old_codes.get(code, {}).get("keys", 0), new_codes.get(code, {}).get("keys", 0), code=code,
                    title=(new_codes.get(code) or old_codes[code])["title"])
             for code in sorted({*old_codes, *new_codes})]
    return {
        "previous": {field: previous.get(field) for field in ("started", "target", "policy", "policy_file")},
        "notes": notes,
        "totals": totals,
        "rules": rules,
        "namespaces": namespaces[:NAMESPACES_SHOWN],
        "namespaces_changed": len(namespaces),
        "recommendations": codes,
    }

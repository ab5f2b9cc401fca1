"""The terminal summary of an audit report (the dict of `Report.to_dict`): what was scanned, what
changed since the run given to `--compare`, keys per rule, rules not checked, recommendations,
keys and memory per TTL group and per namespace, the namespaces with most offending keys and
their worst keys, the biggest keys, and each rule's top offenders with how to comply."""

from __future__ import annotations

from ..policy.rules._durations import approximately


def size_text(count: int | None) -> str:
    if count is None:
        return "?"
    for unit in ("B", "KB", "MB", "GB"):
        if count < 1024 or unit == "GB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    return f"{count} B"  # not reached


def ttl_text(ttl_ms: int) -> str:
    return "no TTL" if ttl_ms == -1 else f"TTL {approximately(ttl_ms / 1000)}"


def percent(part: int, whole: int) -> str:
    return f"{part / whole:.1%}" if whole else "-"


def signed(change: int) -> str:
    return f"{change:+,}" if change else "="


def _comparison(comparison: dict, top: int) -> list[str]:
    """What got better (fewer keys with findings) or worse since the previous run."""
    previous = comparison["previous"]
    started, policy = previous.get("started") or "?", previous.get("policy") or "none"
    out = ["", f"Since the previous run (started {started}, policy {policy})"]
    out += [f"  note: {note}" for note in comparison["notes"]]
    for item in comparison["totals"]:
        what = item["what"].replace("_", " ")
        if item["what"] == "memory_bytes":
            out.append(f"  memory: {size_text(item['before'])} -> {size_text(item['after'])}")
        else:
            out.append(f"  {what}: {item['before']:,} -> {item['after']:,} ({signed(item['change'])})")
    for word, picked in (("better", [r for r in comparison["rules"] if r["change"] < 0]),
                         ("worse", [r for r in comparison["rules"] if r["change"] > 0])):
        if picked:
            out.append(f"  {word}: " + "; ".join(f"{r['rule']} {r['before']:,} -> {r['after']:,} keys "
                                                  f"({signed(r['change'])})" for r in picked))
    if comparison["namespaces"]:
        out.append(f"  namespaces that changed ({comparison['namespaces_changed']:,}; keys with findings):")
        for space in comparison["namespaces"][:top]:
            rules = ", ".join(f"{rule} {b:,} -> {a:,}" for rule, (b, a) in space["rules"].items())
            out.append(f"    '{space['namespace']}': {space['before']:,} -> {space['after']:,} "
                       f"({signed(space['change'])}){': ' + rules if rules else ''}")
    return out


def render(report: dict, top: int = 10) -> str:
    keys = report["keys"]
    out = []
    state = "complete" if report.get("complete") else (
        "PARTIAL (interrupted)" if report.get("interrupted") else "PARTIAL (errors)")
    policy = f"policy '{report['policy']}'" if report.get("policy") else "no policy"
    out.append(f"Redis Guard audit of {report.get('target', '?')}, {policy}: {state}")
    seconds = report.get("seconds") or 0
    rate = f" ({keys['scanned'] / seconds:,.0f} keys/s)" if seconds else ""
    out.append(f"  {keys['scanned']:,} keys scanned in {seconds:.1f} s{rate}, "
               f"{size_text(keys['memory_bytes'])} (MEMORY USAGE)"
               + (f", {keys['vanished']:,} gone during the scan" if keys["vanished"] else ""))
    if keys["by_type"]:
        out.append("  by type: " + ", ".join(f"{kind} {n:,}" for kind, n in keys["by_type"].items()))
    share = keys["with_findings"] / keys["scanned"] if keys["scanned"] else 0
    out.append(f"  keys with findings: {keys['with_findings']:,} ({share:.1%})")
    for server in report.get("servers", ()):
        if server.get("error"):
            out.append(f"  error on {server['address']}: {server['error']}")
    if report.get("comparison"):
        out += _comparison(report["comparison"], top)
    out.append("")
    out.append("Keys per rule (checked)")
    found = report["rules"]
    for item in report.get("checked", ()):
        entry = found.get(item["rule"])
        count = entry["keys"] if entry else 0
        out.append(f"  {item['rule']:<4} {item['title']:<30} {count:>10,}   {item['what']}")
    listed = {item["rule"] for item in report.get("checked", ())}
    for rule, entry in found.items():
        if rule not in listed:
            out.append(f"  {rule:<4} {entry['title']:<30} {entry['keys']:>10,}")
    missing = report.get("not_checked", {})
    if missing:
        reasons: dict[str, list[str]] = {}
        for rule, why in missing.items():
            reasons.setdefault(why, []).append(rule)
        out.append("  not checked: " + "; ".join(f"{', '.join(rules)} ({why})" for why, rules in reasons.items()))
    if report.get("recommendations"):
        out.append("")
        out.append("Recommendations (code, keys concerned)")
        for item in report["recommendations"]:
            examples = f" (e.g. {', '.join(item['examples'])})" if item["examples"] else ""
            out.append(f"  [{item['code']}] {item['keys']:,} keys: {item['title']}: {item['advice']}{examples}")
    scanned, memory = keys["scanned"], keys["memory_bytes"]
    if report.get("ttl_distribution") and scanned:
        out.append("")
        out.append("Keys and memory by TTL left")
        for group in report["ttl_distribution"]:
            out.append(f"  {group['ttl']:<9} {group['keys']:>10,} keys ({percent(group['keys'], scanned):>6})  "
                       f"{size_text(group['memory']):>9} ({percent(group['memory'], memory)})")
    if report["namespaces"]:
        out.append("")
        out.append("Namespaces by memory (keys, memory)")
        by_memory = sorted(report["namespaces"], key=lambda space: (-space["memory"], -space["keys"]))[:top]
        for space in by_memory:
            out.append(f"  {space['namespace']:<24} {space['keys']:>10,} keys "
                       f"({percent(space['keys'], scanned):>6})  {size_text(space['memory']):>9} "
                       f"({percent(space['memory'], memory)})")
    spaces = [space for space in report["namespaces"] if space["keys_with_findings"]][:top]
    if spaces:
        out.append("")
        out.append("Namespaces with most offending keys")
        for space in spaces:
            rules = ", ".join(f"{rule} {n:,}" for rule, n in space["rules"].items())
            out.append(f"  '{space['namespace']}': {space['keys_with_findings']:,} of {space['keys']:,} keys "
                       f"({size_text(space['memory'])}): {rules}")
            for item in space["top"][:3]:
                out.append(f"      {item['key']}  {size_text(item['size'])}  {', '.join(item['rules'])}")
    if report["biggest"]:
        out.append("")
        out.append("Biggest keys (MEMORY USAGE)")
        for item in report["biggest"][:top]:
            length = "" if item["length"] is None else (
                f", {item['length']:,} bytes" if item["type"] == "string" else f", {item['length']:,} elements")
            out.append(f"  {size_text(item['memory']):>9}  {item['type']:<6} {item['key']}{length}, "
                       f"{ttl_text(item['ttl_ms'])}")
    for rule, entry in report["rules"].items():
        out.append("")
        out.append(f"{rule} {entry['title']}: {entry['keys']:,} keys; the biggest:")
        for item in entry["top"][:top]:
            out.append(f"  {item['key']}  {size_text(item['size'])}: {item['detail']}")
    return "\n".join(out) + "\n"

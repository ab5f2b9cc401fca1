"""The terminal summary of an audit report (the dict of `Report.to_dict`): what was scanned,
keys per rule, rules not checked, the namespaces with most offending keys and their worst keys,
the biggest keys, and each rule's top offenders with how to comply."""

from __future__ import annotations


def size_text(count: int | None) -> str:
    if count is None:
        return "?"
    for unit in ("B", "KB", "MB", "GB"):
        if count < 1024 or unit == "GB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    return f"{count} B"  # not reached


def _ttl(ttl_ms: int) -> str:
    return "no TTL" if ttl_ms == -1 else f"TTL {ttl_ms / 1000:.0f} s"


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
            out.append(f"  {size_text(item['memory']):>9}  {item['type']:<6} {item['key']}{length}, {_ttl(item['ttl_ms'])}")
    for rule, entry in report["rules"].items():
        out.append("")
        out.append(f"{rule} {entry['title']}: {entry['keys']:,} keys; the biggest:")
        for item in entry["top"][:top]:
            out.append(f"  {item['key']}  {size_text(item['size'])}: {item['detail']}")
    return "\n".join(out) + "\n"

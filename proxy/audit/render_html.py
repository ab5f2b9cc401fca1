"""The audit report as one self-contained HTML page for a team lead: the summary, a chart of
findings per namespace and one of the key-size distribution (inline SVG, drawn here: no
JavaScript, no fonts or styles fetched from anywhere), and the tables of the terminal summary
(the comparison with a previous run, recommendations, TTL groups, namespaces by memory). Every
text from the keyspace is escaped. Chart labels never overlap: columns are as wide as their
longest label (`CHAR_W` per character at the 12 px font), legends wrap."""

from __future__ import annotations

from html import escape

from .render_text import percent, signed, size_text, ttl_text

CHAR_W = 7.5  # px per character of the charts' 12 px text, generous for digits and letters

PALETTE = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
           "#9c755f", "#bab0ac", "#1f77b4", "#8c564b", "#17becf", "#bcbd22", "#7f7f7f"]

STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222;padding:0 1em}
h1{font-size:1.5em}h2{font-size:1.15em;margin-top:2em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.5em 0}td,th{padding:.2em .7em;border-bottom:1px solid #eee;text-align:left}
td.n{text-align:right;font-variant-numeric:tabular-nums}code{font-size:.92em;word-break:break-all}
.partial{color:#b00;font-weight:bold}.muted{color:#777}svg text{font:12px system-ui,sans-serif}
"""


def _colors(names) -> dict[str, str]:
    return {name: PALETTE[at % len(PALETTE)] for at, name in enumerate(names)}


def text_width(text: str) -> float:
    return CHAR_W * len(text)


def _legend(colors: dict[str, str], x: int, y: int, width: float) -> tuple[list[str], int]:
    """Swatches and names from (x, y), wrapping before `width`; (parts, the height used)."""
    parts = []
    left, row = x, 0
    for name, color in colors.items():
        step = 16 + text_width(name) + 14
        if left > x and left + step > x + width:
            left, row = x, row + 1
        top = y + row * 18
        parts.append(f'<rect x="{left:.0f}" y="{top}" width="12" height="12" fill="{color}"/>'
                     f'<text x="{left + 16:.0f}" y="{top + 11}">{escape(name)}</text>')
        left += step
    return parts, (row + 1) * 18


def bytes_label(count: int) -> str:
    """A bucket's lower bound, short: 0, 512B, 1K, 64K, 1M (the bounds are powers of two)."""
    for unit in ("B", "K", "M", "G"):
        if count < 1024 or unit == "G":
            return f"{count:g}{unit}" if count else "0"
        count /= 1024
    return str(count)  # not reached


def namespace_chart(namespaces: list[dict], limit: int = 20) -> str:
    """Horizontal bars: per namespace, its keys breaking each rule, stacked."""
    rows = [space for space in namespaces if space["keys_with_findings"]][:limit]
    if not rows:
        return '<p class="muted">No findings.</p>'
    rules = list(dict.fromkeys(rule for space in rows for rule in space["rules"]))
    colors = _colors(rules)
    widest = max(sum(space["rules"].values()) for space in rows)
    label_w, bar_w, row_h = 220, 640, 22
    legend, legend_h = _legend(colors, label_w, row_h * len(rows) + 20, bar_w)
    height = row_h * len(rows) + 26 + legend_h
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{label_w + bar_w + 90}" height="{height}" '
             'role="img" aria-label="findings per namespace">']
    for at, space in enumerate(rows):
        y = 10 + at * row_h
        name = space["namespace"]
        shown = name if len(name) <= 30 else name[:29] + "…"
        parts.append(f'<text x="{label_w - 6}" y="{y + 14}" text-anchor="end">{escape(shown)}</text>')
        x = label_w
        for rule, count in space["rules"].items():
            width = bar_w * count / widest
            parts.append(f'<rect x="{x:.1f}" y="{y}" width="{width:.1f}" height="{row_h - 6}" '
                         f'fill="{colors[rule]}"><title>{escape(name)}: {rule} {count:,} keys</title></rect>')
            x += width
        parts.append(f'<text x="{x + 6:.1f}" y="{y + 14}">{sum(space["rules"].values()):,}</text>')
    parts += legend
    parts.append("</svg>")
    return "".join(parts)


def size_chart(histogram: list[dict]) -> str:
    """Vertical bars: keys per MEMORY USAGE bucket (powers of two), stacked by type."""
    if not histogram:
        return '<p class="muted">No sizes (MEMORY USAGE not available).</p>'
    histogram = _contiguous(histogram)
    types = sorted({kind for bucket in histogram for kind in bucket["keys"]})
    colors = _colors(types)
    tallest = max(sum(bucket["keys"].values()) for bucket in histogram)
    labels = [bytes_label(bucket["min_bytes"]) for bucket in histogram]
    col_w = max(44, max(text_width(label) for label in labels) + 10)  # a label never reaches the next
    plot_h, left = 220, 60
    width = max(left + col_w * len(histogram) + 20, 500)
    legend, legend_h = _legend(colors, left, plot_h + 50, width - left - 10)
    svg = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{plot_h + 56 + legend_h}" '
           'role="img" aria-label="key size distribution">')
    parts = [svg,
             f'<text x="{left - 6}" y="16" text-anchor="end">{tallest:,}</text>',
             f'<text x="{left - 6}" y="{plot_h + 10}" text-anchor="end">0</text>']
    for at, bucket in enumerate(histogram):
        x = left + at * col_w
        y = plot_h + 10
        for kind in types:
            count = bucket["keys"].get(kind, 0)
            if not count:
                continue
            height = plot_h * count / tallest
            y -= height
            parts.append(f'<rect x="{x + 4}" y="{y:.1f}" width="{col_w - 8}" height="{height:.1f}" '
                         f'fill="{colors[kind]}"><title>{kind}, {size_text(bucket["min_bytes"])}–'
                         f'{size_text(bucket["max_bytes"])}: {count:,} keys</title></rect>')
        parts.append(f'<text x="{x + col_w / 2:.1f}" y="{plot_h + 26}" text-anchor="middle">{labels[at]}</text>')
    parts += legend
    parts.append("</svg>")
    return "".join(parts)


def _contiguous(histogram: list[dict]) -> list[dict]:
    """The buckets from the smallest to the largest present, empty ones included, so the x axis
    doubles at every step."""
    present = {bucket["max_bytes"]: bucket for bucket in histogram}
    top = histogram[-1]["max_bytes"]
    low = histogram[0]["min_bytes"]
    filled = []
    while True:
        high = 2 * low - 1 if low else 0
        filled.append(present.get(high, {"min_bytes": low, "max_bytes": high, "keys": {}}))
        if high >= top:
            return filled
        low = high + 1


def _table(head: list[str], rows: list[list], numeric=()) -> str:
    cells = "".join(f"<th>{escape(h)}</th>" for h in head)
    body = []
    for row in rows:
        body.append("<tr>" + "".join(
            f'<td class="n">{value:,}</td>' if at in numeric and isinstance(value, int)
            else f"<td>{value}</td>" for at, value in enumerate(row)) + "</tr>")
    return f"<table><tr>{cells}</tr>{''.join(body)}</table>"


def _comparison(comparison: dict) -> list[str]:
    previous = comparison["previous"]
    started, policy = escape(str(previous.get("started") or "?")), escape(str(previous.get("policy") or "none"))
    out = [f"<h2>Since the previous run</h2><p>Started {started}, policy <b>{policy}</b>. "
           "A negative change is fewer keys.</p>"]
    out += [f'<p class="partial">{escape(note)}</p>' for note in comparison["notes"]]
    rows = [[escape(item["what"].replace("_", " ")), item["before"], item["after"], escape(signed(item["change"]))]
            for item in comparison["totals"]]
    rows += [[f"{escape(item['rule'])} {escape(item['title'])}", item["before"], item["after"],
              escape(signed(item["change"]))] for item in comparison["rules"]]
    rows += [[f"<code>{escape(item['code'])}</code>", item["before"], item["after"], escape(signed(item["change"]))]
             for item in comparison["recommendations"]]
    out.append(_table(["", "before", "after", "change"], rows, numeric=(1, 2)))
    if comparison["namespaces"]:
        out.append(_table(["namespace", "keys with findings before", "after", "change", "per rule"], [
            [f"<code>{escape(space['namespace'])}</code>", space["before"], space["after"],
             escape(signed(space["change"])),
             escape(", ".join(f"{rule} {b:,} → {a:,}" for rule, (b, a) in space["rules"].items()))]
            for space in comparison["namespaces"]], numeric=(1, 2)))
    return out


def render(report: dict, top: int = 10) -> str:
    keys = report["keys"]
    complete = report.get("complete")
    state = "complete" if complete else ("partial: interrupted" if report.get("interrupted") else "partial: errors")
    policy = escape(report.get("policy") or "no policy")
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           f"<title>Redis Guard audit: {escape(str(report.get('target', '')))}</title>",
           f"<style>{STYLE}</style></head><body>",
           "<h1>Redis Guard keyspace audit</h1>",
           f"<p>{escape(str(report.get('target', '')))}, policy <b>{policy}</b>, "
           f"started {escape(str(report.get('started', '')))}, "
           f"<span class=\"{'' if complete else 'partial'}\">{state}</span>.</p>",
           _table(["", ""], [
               ["keys scanned", keys["scanned"]],
               ["keys with findings", keys["with_findings"]],
               ["memory (MEMORY USAGE)", escape(size_text(keys["memory_bytes"]))],
               ["seconds", escape(f"{report.get('seconds') or 0:.1f}")],
               *[[f"type {escape(kind)}", n] for kind, n in keys["by_type"].items()],
           ], numeric=(1,))]
    if report.get("comparison"):
        out += _comparison(report["comparison"])
    out.append("<h2>Keys per rule</h2>")
    out.append(_table(["rule", "title", "keys"],
                      [[escape(rule), escape(entry["title"]), entry["keys"]]
                       for rule, entry in report["rules"].items()],
                      numeric=(2,)))
    checked = report.get("checked", [])
    out.append("<p>Checked: " + "; ".join(f"<b>{escape(c['rule'])}</b> {escape(c['what'])}" for c in checked) + "</p>")
    missing = report.get("not_checked", {})
    if missing:
        out.append('<p class="muted">Not checked: ' + "; ".join(
            f"{escape(rule)} ({escape(why)})" for rule, why in missing.items()) + "</p>")
    if report.get("recommendations"):
        out.append("<h2>Recommendations</h2>")
        out.append(_table(["code", "keys", "what", "advice", "for example"], [
            [f"<code>{escape(item['code'])}</code>", item["keys"], escape(item["title"]), escape(item["advice"]),
             "<br>".join(f"<code>{escape(key)}</code>" for key in item["examples"])]
            for item in report["recommendations"]], numeric=(1,)))
    scanned, memory = keys["scanned"], keys["memory_bytes"]
    if report.get("ttl_distribution"):
        out.append("<h2>Keys and memory by TTL left</h2>")
        out.append(_table(["TTL left", "keys", "share", "memory", "share"], [
            [escape(group["ttl"]), group["keys"], percent(group["keys"], scanned),
             escape(size_text(group["memory"])), percent(group["memory"], memory)]
            for group in report["ttl_distribution"]], numeric=(1,)))
    if report["namespaces"]:
        out.append("<h2>Namespaces by memory</h2>")
        by_memory = sorted(report["namespaces"], key=lambda space: (-space["memory"], -space["keys"]))[:top]
        out.append(_table(["namespace", "keys", "share", "memory", "share", "keys with findings"], [
            [f"<code>{escape(space['namespace'])}</code>", space["keys"], percent(space["keys"], scanned),
             escape(size_text(space["memory"])), percent(space["memory"], memory), space["keys_with_findings"]]
            for space in by_memory], numeric=(1, 5)))
    out.append("<h2>Findings per namespace</h2>")
    out.append('<p class="muted">Per namespace (the first key segment), the keys breaking each rule, '
               'stacked: a key breaking two rules is in two bars.</p>')
    out.append(namespace_chart(report["namespaces"]))
    out.append(_table(["namespace", "keys", "with findings", "rules", "worst keys"], [
        [f"<code>{escape(space['namespace'])}</code>", space["keys"], space["keys_with_findings"],
         escape(", ".join(f"{rule} {n:,}" for rule, n in space["rules"].items())),
         "<br>".join(f"<code>{escape(item['key'])}</code> {escape(', '.join(item['rules']))}"
                     for item in space["top"][:3])]
        for space in report["namespaces"][:top * 3] if space["keys_with_findings"]], numeric=(1, 2)))
    out.append("<h2>Key size distribution</h2>")
    out.append('<p class="muted">Keys per MEMORY USAGE, in buckets that double, stacked by type.</p>')
    out.append(size_chart(report["size_histogram"]))
    out.append("<h2>Biggest keys</h2>")
    out.append(_table(["key", "type", "memory", "length", "TTL"], [
        [f"<code>{escape(item['key'])}</code>", escape(item["type"]), escape(size_text(item["memory"])),
         "" if item["length"] is None else item["length"],
         escape(ttl_text(item["ttl_ms"]))]
        for item in report["biggest"][:top]], numeric=(3,)))
    for rule, entry in report["rules"].items():
        out.append(f"<h2>{escape(rule)} {escape(entry['title'])}: {entry['keys']:,} keys</h2>")
        out.append(_table(["key", "size", "finding"], [
            [f"<code>{escape(item['key'])}</code>", escape(size_text(item["size"])), escape(item["detail"])]
            for item in entry["top"][:top]]))
    out.append("</body></html>")
    return "\n".join(out) + "\n"

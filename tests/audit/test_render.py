"""The terminal and HTML renderings of one report: the numbers are there, the HTML is one
self-contained page with two SVG charts and no script, chart labels that do not overlap, and key
names are escaped."""

import itertools
import re
from html.parser import HTMLParser

import pytest

from proxy.audit import render_html, render_text
from proxy.audit.classify import Auditor
from proxy.audit.facts import KeyFacts
from proxy.audit.report import Report


def sample_report() -> dict:
    audit = Auditor()
    report = Report(top=5, meta={"target": "redis://h:1/0", "policy": None,
                                 "checked": [vars(c) for c in audit.checked], "not_checked": audit.not_checked})
    keys = [KeyFacts(f"user:{i}".encode(), "string", -1, 64 + i, 20000 + i) for i in range(7)]
    keys += [KeyFacts(b"cart:<script>alert(1)</script>", "hash", 5000, 4000, 6000)]
    keys += [KeyFacts(f"ok:{i}".encode(), "set", 5000, 100, 3) for i in range(4)]
    for facts in keys:
        report.add(facts, audit.classify(facts))
    data = report.to_dict()
    data.update(complete=True, interrupted=False, seconds=2.0, servers=[{"address": "h:1"}])
    return data


class Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[str] = []
        self.text: list[str] = []
        self.links: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.links += [value for name, value in attrs if name in ("src", "href") and value]

    def handle_data(self, data):
        self.text.append(data)


def test_text():
    out = render_text.render(sample_report())
    assert "12 keys scanned in 2.0 s (6 keys/s)" in out
    assert "keys with findings: 8 (66.7%)" in out
    lines = {line.split()[0]: line for line in out.splitlines() if line.startswith("  ") and line.split()}
    assert lines["O1"].split()[4] == "7"  # O1 keys without TTL: 7
    assert lines["V1"].split()[3] == "7" and lines["V2"].split()[3] == "1"
    assert "not checked:" in out and "V4" in out
    assert "'user': 7 of 7 keys" in out


def test_html_is_self_contained_with_two_charts():
    data = sample_report()
    page = Page()
    html = render_html.render(data)
    page.feed(html)
    assert page.tags.count("svg") == 2
    assert "script" not in page.tags and page.links == []
    text = " ".join(page.text)
    assert "cart:<script>alert(1)</script>" in text  # shown as text, not markup
    for rule, entry in data["rules"].items():
        assert f"{rule} {entry['title']}: {entry['keys']:,} keys" in text
    assert "user: V1 7" in text or "user: O1 7" in text  # a bar's tooltip per namespace and rule


def test_html_without_findings_or_sizes():
    data = sample_report()
    data.update(rules={}, namespaces=[], size_histogram=[], biggest=[])
    page = Page()
    page.feed(render_html.render(data))
    assert "No findings." in " ".join(page.text) and "svg" not in page.tags


def test_size_chart_has_every_bucket_between_the_smallest_and_the_largest():
    histogram = [{"min_bytes": 64, "max_bytes": 127, "keys": {"string": 3}},
                 {"min_bytes": 1024, "max_bytes": 2047, "keys": {"hash": 1}}]
    svg = render_html.size_chart(histogram)
    labels = [label for label in ("64B", "128B", "256B", "512B", "1K") if f">{label}</text>" in svg]
    assert labels == ["64B", "128B", "256B", "512B", "1K"]
    assert svg.count("<rect") == 2 + 2  # two bars, two legend swatches
    assert render_html._contiguous([{"min_bytes": 0, "max_bytes": 0, "keys": {"string": 1}},
                                    {"min_bytes": 2, "max_bytes": 3, "keys": {}}])[1]["max_bytes"] == 1


def _boxes(svg: str, anchor: str):
    """(left, right, y) of each text of the chart anchored so, its width estimated as drawn."""
    boxes = []
    for x, y, extra, text in re.findall(r'<text x="([\d.]+)" y="([\d.]+)"([^>]*)>([^<]*)</text>', svg):
        if ("middle" in extra) != (anchor == "middle") or "end" in extra:
            continue
        width = render_html.text_width(text)
        left = float(x) - width / 2 if anchor == "middle" else float(x)
        boxes.append((left, left + width, float(y)))
    return boxes


def _overlaps(boxes) -> list:
    return [(a, b) for a, b in itertools.pairwise(boxes) if a[2] == b[2] and b[0] < a[1]]


@pytest.mark.parametrize("low, high", [(1, 1 << 12), (1 << 20, 1 << 40), (0, 1 << 30)])
def test_size_chart_labels_do_not_overlap(low, high):
    histogram, size = [], max(low, 1)
    while size <= high:
        histogram.append({"min_bytes": size, "max_bytes": 2 * size - 1, "keys": {"string": 1, "hash": 2}})
        size *= 2
    svg = render_html.size_chart(histogram)
    labels = _boxes(svg, "middle")
    assert len(labels) == len(histogram) and _overlaps(labels) == []
    assert _overlaps(sorted(_boxes(svg, "start"), key=lambda box: (box[2], box[0]))) == []  # the legend


def test_legends_wrap_instead_of_overlapping():
    spaces = [{"namespace": f"ns{i}", "keys": 10, "keys_with_findings": 10,
               "rules": {rule: 1 for rule in ("O1", "K1", "K2", "K3", "K4", "K5", "K6", "K8", "K9", "K10", "K11",
                                              "T1", "T3", "V1", "V2", "V4")}} for i in range(3)]
    svg = render_html.namespace_chart(spaces)
    legend = sorted(_boxes(svg, "start"), key=lambda box: (box[2], box[0]))
    width = float(re.search(r'<svg[^>]* width="([\d.]+)"', svg)[1])
    assert _overlaps(legend) == [] and max(box[1] for box in legend) <= width
    assert len({box[2] for box in legend if box[0] >= 220}) > 1  # wrapped onto more rows


def test_recommendations_ttl_groups_and_namespaces_by_memory():
    data = sample_report()
    text = render_text.render(data)
    assert "[set-ttls] 7 keys: keys without a TTL" in text
    assert "[split-big-strings] 7 keys" in text and "[shard-big-collections] 1 keys" in text
    assert re.search(r"no TTL +7 keys \( 58\.3%\)", text) and re.search(r"< 1 h +5 keys", text)
    assert text.index("  cart ") < text.index("  user ") < text.index("  ok ")  # by memory
    assert "TTL 5 s" in text  # durations in words
    page = Page()
    page.feed(render_html.render(data))
    html = " ".join(page.text)
    assert "set-ttls" in html and "Keys and memory by TTL left" in html and "Namespaces by memory" in html


def test_the_comparison_is_rendered():
    from proxy.audit.compare import compare

    before = sample_report()
    after = sample_report()
    after["rules"]["V1"]["keys"] = 3
    after["namespaces"][0]["keys_with_findings"] -= 4
    data = dict(after, comparison=compare(before, after))
    text = render_text.render(data)
    assert "Since the previous run" in text and "better: V1 7 -> 3 keys (-4)" in text
    assert "'user': 7 -> 3 (-4)" in text
    page = Page()
    page.feed(render_html.render(data))
    assert "Since the previous run" in " ".join(page.text)

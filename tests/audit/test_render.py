"""The terminal and HTML renderings of one report: the numbers are there, the HTML is one
self-contained page with two SVG charts and no script, and key names are escaped."""

from html.parser import HTMLParser

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
    labels = [label for label in ("64B", "128B", "256B", "512B", "1.0KB") if f">{label}</text>" in svg]
    assert labels == ["64B", "128B", "256B", "512B", "1.0KB"]
    assert svg.count("<rect") == 2 + 2  # two bars, two legend swatches
    assert render_html._contiguous([{"min_bytes": 0, "max_bytes": 0, "keys": {"string": 1}},
                                    {"min_bytes": 2, "max_bytes": 3, "keys": {}}])[1]["max_bytes"] == 1

"""The documentation stands alone and follows the code: docs/rules.md has a section for every
registered rule naming each of its settings, docs/conventions.md lists every line of a convention
that a preset or a fixture cites, and no document, config or test names a path outside the
repository."""

from __future__ import annotations

import glob
import os
import re
import subprocess

import pytest
import yaml

from proxy.policy import json_schema
from proxy.policy.base import REGISTRY
from tests.servers import REPO

RULES = os.path.join(REPO, "docs", "rules.md")
CONVENTIONS = os.path.join(REPO, "docs", "conventions.md")
PRESETS = sorted(glob.glob(os.path.join(REPO, "configs", "policies", "*.yaml")))
FIXTURES = sorted(glob.glob(os.path.join(REPO, "configs", "policies", "tests", "*.yaml")))


def _sections(path: str) -> dict[str, str]:
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    parts = re.split(r'<a id="([a-z0-9]+)"></a>', text)
    return {anchor: body for anchor, body in zip(parts[1::2], parts[2::2])}


@pytest.mark.parametrize("rule_id", sorted(REGISTRY))
def test_rules_md_describes_every_rule_and_setting(rule_id):
    section = _sections(RULES).get(rule_id.lower())
    assert section is not None, f"docs/rules.md has no section <a id=\"{rule_id.lower()}\"></a>"
    assert section.startswith(f"{rule_id} — ")
    assert re.search(r"^From (all five conventions|conventions? \d{3}|no convention)", section, re.MULTILINE), "its source"
    recorder = json_schema.Recorder(rule_id)
    REGISTRY[rule_id].from_settings(recorder)
    for setting in set(recorder.read) - {"mode"}:
        assert f"`{setting}:" in section, f"{rule_id}: setting '{setting}' is not described"
    with open(RULES, encoding="utf-8") as handle:
        assert f"[{rule_id}](#{rule_id.lower()})" in handle.read()


def _covered() -> dict[str, set[int]]:
    """Convention number -> the lines its table in docs/conventions.md lists."""
    covered: dict[str, set[int]] = {}
    with open(CONVENTIONS, encoding="utf-8") as handle:
        current = None
        for line in handle:
            heading = re.match(r"## Convention (\d{3}) ", line)
            if heading:
                current = covered.setdefault(heading[1], set())
            elif line.startswith("## "):
                current = None
            elif current is not None and re.match(r"\| [\d, -]+ \|", line):
                for low, high in re.findall(r"(\d+)(?:-(\d+))?", line.split("|")[1]):
                    current.update(range(int(low), int(high or low) + 1))
    return covered


def _cited(path: str) -> list[tuple[str, int]]:
    """(convention, line) of every "line N" a preset or fixture cites."""
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    policy = path if "/tests/" not in path else os.path.join(os.path.dirname(path), yaml.safe_load(text)["policy"])
    with open(policy, encoding="utf-8") as handle:
        seed = str(yaml.safe_load(handle)["seed"])
    found = []
    for comment in re.findall(r"#.*", text):
        ranges = r"\d+(?:[-/]\d+)*"
        cited = rf"(?:(\d{{3}}) )?lines? ({ranges}(?:(?:, | and | against (?:line )?){ranges})*)"
        for convention, numbers in re.findall(cited, comment):
            for low, high in re.findall(r"(\d+)(?:-(\d+))?", numbers):
                found += [(convention or seed, n) for n in range(int(low), int(high or low) + 1)]
    return found


@pytest.mark.parametrize("path", PRESETS + FIXTURES, ids=lambda p: os.path.relpath(p, REPO))
def test_every_line_cited_is_summarized_in_conventions_md(path):
    covered = _covered()
    cited = _cited(path)
    assert cited, "cites its convention's lines"
    missing = sorted({(convention, line) for convention, line in cited if line not in covered.get(convention, ())})
    assert missing == [], f"docs/conventions.md does not list {missing}"


# A machine's directories (of the workspace, and of documents shared beside the repository),
# spelled in two pieces so that this file does not name them itself.
OUTSIDE = ("/" + "work/", "shared" + "/")


def test_nothing_points_outside_the_repository():
    found = subprocess.run(["git", "grep", "-n", "-e", OUTSIDE[0], "-e", OUTSIDE[1]], cwd=REPO,
                           capture_output=True, text=True, check=False)
    assert found.returncode in (0, 1) and found.stdout == "", found.stdout


@pytest.mark.parametrize("doc, heading", [("docs/policy.md", "## Testing a policy"),
                                          ("docs/policy-workflow.md", "**Policy as code.**")])
def test_the_documented_fixture_passes(tmp_path, doc, heading):
    import io

    from proxy.policy.fixtures import run

    with open(os.path.join(REPO, doc), encoding="utf-8") as handle:
        section = handle.read().split(heading, 1)[1]
    example = re.search(r"```yaml\n(.*?)```", section, re.DOTALL)[1]
    example = "\n".join(line[2:] if line.startswith("  ") and doc == "docs/policy-workflow.md" else line
                        for line in example.splitlines())
    fixture = yaml.safe_load(example)
    fixture["policy"] = os.path.join(REPO, "configs", "policies", "strict-dotted.yaml")
    fixture.pop("app", None)  # the example's application is not strict-dotted's
    path = tmp_path / "example.yaml"
    path.write_text(yaml.safe_dump(fixture))
    out = io.StringIO()
    assert run([str(path)], out) == 0, out.getvalue()


# A Markdown link (not an image's, not a URL) and its target: a path relative to the document,
# then an optional #anchor.
LINK = re.compile(r"(?<!!)\[[^\]\n]*\]\(([^)\s]+)\)")


def _anchors(path: str) -> set[str]:
    """The anchors a Markdown file offers: its headings as GitHub spells them, and <a id> tags."""
    with open(path, encoding="utf-8") as handle:
        text = re.sub(r"```.*?```", "", handle.read(), flags=re.DOTALL)
    found = set(re.findall(r'<a id="([^"]+)"></a>', text))
    for heading in re.findall(r"^#+ +(.+?) *$", text, re.MULTILINE):
        slug = re.sub(r"[^\w\- ]", "", re.sub(r"<[^>]+>", "", heading).lower()).replace(" ", "-")
        found.add(slug)
    return found


def test_relative_links_resolve():
    """Every relative link of the repository's documents names a file that exists, and an anchor
    its target has (docs/notes/ are drafts folded into the documents at merge)."""
    listed = subprocess.run(["git", "ls-files", "*.md"], cwd=REPO, capture_output=True, text=True, check=True)
    broken = []
    for doc in listed.stdout.split():
        if doc.startswith("docs/notes/"):
            continue
        with open(os.path.join(REPO, doc), encoding="utf-8") as handle:
            text = re.sub(r"```.*?```", "", handle.read(), flags=re.DOTALL)
        for target in LINK.findall(text):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            resolved = os.path.normpath(os.path.join(REPO, os.path.dirname(doc), path)) if path else os.path.join(REPO, doc)
            if not resolved.startswith(REPO + os.sep) or not os.path.exists(resolved):
                broken.append(f"{doc}: {target} (no such file)")
            elif anchor and resolved.endswith(".md") and anchor not in _anchors(resolved):
                broken.append(f"{doc}: {target} (no such anchor)")
    assert broken == [], "\n".join(broken)

"""The docs stay what a newcomer can use: a short README whose first block is the two commands
(.ci/run reads its second line), links that lead somewhere, and references that match the code."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from job import api
from job.cli.reference import reference

ROOT = Path(__file__).resolve().parents[2]
README_MAX_LINES = 150

_FENCE = re.compile(r"^```.*?^```", re.S | re.M)
_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^#{1,6} (.+)$", re.M)


def _pages(root: Path) -> list[Path]:
    return [root / "README.md", root / "bench" / "README.md", *sorted((root / "docs").rglob("*.md"))]


def _first_block(text: str) -> list[str]:
    return _FENCE.search(text).group(0).splitlines()[1:-1]


def _slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    found: set[str] = set()
    for heading in _HEADING.findall(_FENCE.sub("", page.read_text())):
        slug, n = _slug(heading), 1
        while slug in found:  # a repeated heading gets -1, -2, ...
            slug, n = f"{_slug(heading)}-{n}", n + 1
        found.add(slug)
    return found


def _broken_links(root: Path) -> list[str]:
    """Every relative link of the README, bench/README.md and docs/ whose file, or whose anchor in
    it, does not exist; links to the web are not followed."""
    broken = []
    for page in _pages(root):
        for target in _LINK.findall(_FENCE.sub("", page.read_text())):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            linked = (page.parent / path).resolve() if path else page
            where = f"{page.relative_to(root)}: {target}"
            if not linked.exists():
                broken.append(f"{where} (no such file)")
            elif anchor and linked.suffix == ".md" and anchor not in _anchors(linked):
                broken.append(f"{where} (no such heading)")
    return broken


def test_the_readme_is_short():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; the rest belongs in docs/"


def test_the_readmes_first_block_is_the_demo_then_the_tests():
    """.ci/run runs line 2 of this block as the test command."""
    install, tests = _first_block((ROOT / "README.md").read_text())
    assert install == "python -m pip install -e '.[test]' && python -m job demo"
    assert tests.startswith("apt-get update -qq && apt-get install -y -qq --no-install-recommends chromium prometheus")
    assert tests.endswith(" && python -m pip install -e '.[test]' && python -m pytest -n 2")


def test_every_relative_link_leads_somewhere():
    assert _broken_links(ROOT) == []


def test_a_link_to_a_missing_file_or_heading_is_found(tmp_path):
    md = ".md"  # the pages' names spelled apart, or tests/package/test_lint.py would look for them
    (tmp_path / "docs" / "guides").mkdir(parents=True)
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / f"README{md}").write_text("# Benchmarks\n\n## The gateway: `bench/gateway.py`\n")
    (tmp_path / f"README{md}").write_text(f"[a](docs/guides/gone{md}) [b](bench/README{md}#the-gateway-benchgatewaypy)\n"
                                          f"```\n[in a block](not/followed{md})\n```\n[web](https://example.com/x{md})\n")
    (tmp_path / "docs" / "guides" / f"page{md}").write_text(f"# A\n\n## A\n\n[c](../../bench/README{md}#gateway) [d](#a-1)"
                                                           " [e](#a-2)\n")
    assert _broken_links(tmp_path) == [f"README{md}: docs/guides/gone{md} (no such file)",
                                       f"docs/guides/page{md}: ../../bench/README{md}#gateway (no such heading)",
                                       f"docs/guides/page{md}: #a-2 (no such heading)"]


def test_the_cli_reference_is_the_parsers():
    """docs/reference/cli.md is made by `python -m job.cli.reference docs/reference/cli.md`."""
    assert (ROOT / "docs/reference/cli.md").read_text() == reference(), (
        "docs/reference/cli.md is out of date: run python -m job.cli.reference docs/reference/cli.md")


@pytest.mark.parametrize("function", [api.submit, api.cancel])
def test_the_python_api_reference_names_every_keyword(function):
    page = (ROOT / "docs/reference/python-api.md").read_text()
    missing = [name for name in inspect.signature(function).parameters if f"`{name}`" not in page]
    assert missing == [], f"docs/reference/python-api.md does not name {missing} of {function.__name__}"

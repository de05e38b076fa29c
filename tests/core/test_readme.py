"""The README's Python examples run as written (in a scratch directory)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)


@pytest.mark.parametrize("code", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_a_readme_example_runs(code: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # "./memory", "trace.jsonl" land here
    exec(compile(code, str(README), "exec"), {"__name__": "readme_example"})  # noqa: S102 - our own docs


def test_the_readme_has_examples() -> None:
    assert len(BLOCKS) >= 2


# -- what users get: every doc named, no internal references -------------------

REPO = README.parent
DOCS = REPO / "docs"
PACKAGE = REPO / "gliding_actors"

#: an internal tracker reference: "issue 9", "Issue #11", "issues 8, 9", "issue_11"
ISSUE_NUMBER = re.compile(r"\bissues?[ _#-]*\d+", re.IGNORECASE)
#: the same number without the word, as the benchmarks page once rendered it: "(#9)", "| #9 |"
BARE_NUMBER = re.compile(r"\(#\d+\)|\| #\d+ \|")


def _documentation_section() -> str:
    text = README.read_text(encoding="utf-8")
    assert "\n## Documentation\n" in text, "README.md has a Documentation section"
    return text.split("\n## Documentation\n", 1)[1].split("\n## ", 1)[0]


def _text_files(*roots: Path) -> list[tuple[Path, str]]:
    """Every file under ``roots`` (a file root is itself) that is UTF-8 text, with its text."""
    found: list[tuple[Path, str]] = []
    for root in roots:
        paths = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
        for path in paths:
            if "__pycache__" in path.parts or path.suffix == ".tmp":
                continue
            try:
                found.append((path, path.read_text(encoding="utf-8")))
            except UnicodeDecodeError:  # images, model weights
                continue
    return found


def _hits(pattern: re.Pattern[str], files: list[tuple[Path, str]]) -> list[str]:
    return [
        f"{path.relative_to(REPO)}:{text.count(chr(10), 0, match.start()) + 1}: {match.group(0)!r}"
        for path, text in files
        for match in pattern.finditer(text)
    ]


def test_the_documentation_section_names_every_doc() -> None:
    section = _documentation_section()
    named = set(re.findall(r"docs/([\w.-]+\.md)", section))
    missing = sorted(p.name for p in DOCS.glob("*.md") if p.name not in named)
    assert not missing, f"README.md's Documentation section does not name: {missing}"


def test_no_internal_issue_numbers_reach_users() -> None:
    """Nor the tests: they ship in the repository and say what they pin, not where it was asked for."""
    tests = [(path, text) for path, text in _text_files(REPO / "tests") if path != Path(__file__)]
    files = _text_files(PACKAGE, DOCS, README) + tests
    assert any(path.suffix == ".py" for path, _ in files) and any(path.parent == DOCS for path, _ in files)
    assert any(path.parent.name == "l0" for path, _ in tests)
    hits = _hits(ISSUE_NUMBER, files) + _hits(BARE_NUMBER, files)
    assert not hits, "internal issue numbers (say what is or is not guaranteed instead):\n" + "\n".join(hits)


def test_no_user_facing_file_points_at_the_developers_shared_folder() -> None:
    files = _text_files(README, *sorted(DOCS.glob("*.md")), DOCS / "benchmarks", DOCS / "benchmarks.json", PACKAGE)
    hits = [f"{path.relative_to(REPO)}" for path, text in files if "../shared" in text]
    assert not hits, f"'../shared' is only on the developers' machines; found in {hits}"

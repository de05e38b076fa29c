"""docs/SCENARIO_FORMAT.md documents exactly the ops the loader registers.

The convention the doc follows, and that these tests rely on: inside the
level-2 section ``## Ops``, every op has exactly one level-3 heading holding
only its name in backticks (``### `write` ``), and that section names each of
the op's arguments and result keys in backticks. No other level-3 heading in
``## Ops`` is allowed, and no op heading appears outside it. An op this build
cannot run carries the line ``**Not implemented by this build.**`` in its
section. The ``## Ops`` preamble's index table lists every op once, as
``| `NAME` | ...``.

The set of ops is read from the live registry (``_opspecs.op_names()``) at
test time, after every layer's op module is imported, so registering an op
without documenting it (or documenting one that does not exist) fails here.
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from pathlib import Path

import pytest

from gliding_actors.scenario._opspecs import get_op_spec, op_names
from gliding_actors.scenario._ops import implementation, implemented_ops

DOC = Path(__file__).resolve().parents[2] / "docs" / "SCENARIO_FORMAT.md"

OPS_SECTION = "Ops"
NOT_IMPLEMENTED = "**Not implemented by this build.**"

_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_OP_HEADING = re.compile(r"^`([^`\s]+)`$")
_INDEX_ROW = re.compile(r"^\|\s*`([^`\s]+)`\s*\|")
_FENCE = re.compile(r"^\s*(```|~~~)")


@dataclasses.dataclass(frozen=True)
class ParsedDoc:
    """What the tests need from the doc."""

    #: op name -> its section's text (heading excluded), in document order;
    #: a name whose heading appears twice is in ``duplicates``
    sections: dict[str, str]
    duplicates: list[str]
    #: level-3 headings inside ``## Ops`` that are not op headings
    stray_headings: list[str]
    #: op headings found outside ``## Ops``
    misplaced: list[str]
    #: op names in the index table of the ``## Ops`` preamble
    index: list[str]
    has_ops_section: bool


def _lines_outside_fences(text: str) -> list[tuple[str, bool]]:
    """Each line with a flag: True when it is outside a fenced code block."""
    out: list[tuple[str, bool]] = []
    fenced = False
    for line in text.splitlines():
        if _FENCE.match(line):
            out.append((line, False))
            fenced = not fenced
            continue
        out.append((line, not fenced))
    return out


def parse_doc(text: str) -> ParsedDoc:
    """Parse the format reference by the convention in the module docstring."""
    sections: dict[str, list[str]] = {}
    names: list[str] = []
    stray: list[str] = []
    misplaced: list[str] = []
    index: list[str] = []
    in_ops = False
    seen_ops = False
    current: str | None = None
    for line, live in _lines_outside_fences(text):
        heading = _HEADING.match(line) if live else None
        if heading is not None:
            level, title = len(heading.group(1)), heading.group(2)
            if level <= 2:
                in_ops = level == 2 and title == OPS_SECTION
                seen_ops = seen_ops or in_ops
                current = None
                continue
            if level == 3:
                op = _OP_HEADING.match(title)
                if not in_ops:
                    if op is not None:
                        misplaced.append(op.group(1))
                    current = None
                    continue
                if op is None:
                    stray.append(title)
                    current = None
                    continue
                current = op.group(1)
                names.append(current)
                sections.setdefault(current, [])
                continue
            # deeper headings belong to the section they are in
        if in_ops and current is None and live:
            row = _INDEX_ROW.match(line)
            if row is not None:
                index.append(row.group(1))
        if current is not None:
            sections[current].append(line)
    duplicates = sorted(name for name, n in Counter(names).items() if n > 1)
    return ParsedDoc(
        sections={name: "\n".join(body) for name, body in sections.items()},
        duplicates=duplicates,
        stray_headings=stray,
        misplaced=misplaced,
        index=index,
        has_ops_section=seen_ops,
    )


def registered_ops() -> set[str]:
    """Every op the loader accepts, with every layer's op module imported first."""
    implemented_ops()  # imports the layers' op modules, as a replay does
    return set(op_names())


@pytest.fixture(scope="module")
def doc() -> ParsedDoc:
    assert DOC.is_file(), f"{DOC} is missing"
    return parse_doc(DOC.read_text(encoding="utf-8"))


def test_the_doc_has_an_ops_section_following_the_convention(doc: ParsedDoc) -> None:
    assert doc.has_ops_section, f"no '## {OPS_SECTION}' section in {DOC.name}"
    assert doc.stray_headings == [], (
        f"level-3 headings in '## {OPS_SECTION}' must be exactly one op name in backticks: "
        f"{doc.stray_headings}"
    )
    assert doc.misplaced == [], f"op headings outside '## {OPS_SECTION}': {doc.misplaced}"
    assert doc.duplicates == [], f"ops documented twice: {doc.duplicates}"


def test_every_registered_op_is_documented(doc: ParsedDoc) -> None:
    missing = sorted(registered_ops() - set(doc.sections))
    assert missing == [], f"registered ops without a '### `NAME`' section in {DOC.name}: {missing}"


def test_every_documented_op_is_registered(doc: ParsedDoc) -> None:
    unknown = sorted(set(doc.sections) - registered_ops())
    assert unknown == [], f"{DOC.name} documents ops the loader does not register: {unknown}"


def test_the_index_table_lists_every_op_once(doc: ParsedDoc) -> None:
    assert sorted(doc.index) == sorted(registered_ops()), (
        f"the op index table of '## {OPS_SECTION}' differs from the registry: "
        f"missing {sorted(registered_ops() - set(doc.index))}, "
        f"unknown {sorted(set(doc.index) - registered_ops())}, "
        f"twice {sorted(n for n, c in Counter(doc.index).items() if c > 1)}"
    )


def test_each_op_section_names_its_arguments_and_result_keys(doc: ParsedDoc) -> None:
    problems = []
    for name in sorted(registered_ops() & set(doc.sections)):
        spec = get_op_spec(name)
        body = doc.sections[name]
        absent = [k for k in (*spec.arg_names, *spec.result_keys) if f"`{k}`" not in body]
        if absent:
            problems.append(f"{name}: {absent}")
    assert problems == [], (
        f"op sections of {DOC.name} that do not name these args/result keys: {problems}"
    )


def test_the_not_implemented_marker_matches_this_build(doc: ParsedDoc) -> None:
    wrong = []
    for name in sorted(registered_ops() & set(doc.sections)):
        runnable = get_op_spec(name).control or implementation(name) is not None
        marked = NOT_IMPLEMENTED in doc.sections[name]
        if runnable and marked:
            wrong.append(f"{name}: implemented, but marked")
        elif not runnable and not marked:
            wrong.append(f"{name}: not implemented, and not marked")
    assert wrong == [], f"{NOT_IMPLEMENTED!r} in {DOC.name} disagrees with the build: {wrong}"


# -- the parser itself ------------------------------------------------------------

SAMPLE = """\
# Title

## Steps

### Not an op heading

## Ops

| op | what |
|---|---|
| `read` | reads |
| `write` | writes |

### `read`

Takes `iri`.

```yaml
### `inside a fence` is not a heading
```

### `write`

#### Example

Text.

## Invariants
"""


def test_parser_reads_the_convention() -> None:
    parsed = parse_doc(SAMPLE)
    assert parsed.has_ops_section
    assert list(parsed.sections) == ["read", "write"]
    assert "Takes `iri`." in parsed.sections["read"]
    assert "Text." in parsed.sections["write"]
    assert parsed.index == ["read", "write"]
    assert parsed.stray_headings == parsed.misplaced == parsed.duplicates == []


def test_parser_sees_missing_extra_stray_and_misplaced_sections() -> None:
    without_write = SAMPLE.replace("### `write`\n", "")
    assert "write" not in parse_doc(without_write).sections
    with_bogus = SAMPLE.replace("## Invariants", "### `bogus.op`\n\n## Invariants")
    assert "bogus.op" in parse_doc(with_bogus).sections
    twice = SAMPLE.replace("## Invariants", "### `read`\n\n## Invariants")
    assert parse_doc(twice).duplicates == ["read"]
    stray = SAMPLE.replace("### `write`", "### write")
    assert parse_doc(stray).stray_headings == ["write"]
    misplaced = SAMPLE.replace("### Not an op heading", "### `lost`")
    assert parse_doc(misplaced).misplaced == ["lost"]

"""Standard SKILL.md files (front matter name and description, a free Markdown body) import as skills."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from skill_support import KEYRING, LEAD

from gliding_actors.cli import main
from gliding_actors.errors import InvalidInput
from gliding_actors.skills import (
    load_skill_file,
    parse_markdown,
    render_markdown,
    sign_skill,
    verify_skill,
)
from gliding_actors.system import MemorySystem

PDF = """\
---
name: pdf-processing
description: Extract text and tables from PDF files and fill forms. Use when the user works with PDF files.
license: Apache-2.0
allowed-tools: [Read, Bash]
metadata:
  author: example-org
  version: "1.0"
---

# PDF processing

Use pdfplumber for text, pypdf for forms.

## Quick start

```python
import pdfplumber
## a comment in the code, not a section
with pdfplumber.open("doc.pdf") as pdf:
    text = pdf.pages[0].extract_text()
```

## Forms

See FORMS.md for the field names.

### Checkbox fields

Set them to "/Yes".
"""


def test_a_standard_skill_md_imports_with_its_body_as_steps(tmp_path: Path) -> None:
    path = tmp_path / "SKILL.md"
    path.write_text(PDF, encoding="utf-8")
    node = load_skill_file(path)
    assert node["@id"] == "skill:pdf-processing" and node["name"] == "PDF processing"
    assert node["what"] == node["trigger"] == (
        "Extract text and tables from PDF files and fill forms. Use when the user works with PDF files.")
    assert [(s["order"], s["title"]) for s in node["steps"]] == [(1, "Overview"), (2, "Quick start"), (3, "Forms")]
    assert "## a comment in the code, not a section" in node["steps"][1]["instructions"]  # fenced: code
    assert node["steps"][2]["instructions"].endswith('### Checkbox fields\n\nSet them to "/Yes".')
    assert node["metadata"]["@value"] == {
        "license": "Apache-2.0", "allowed-tools": ["Read", "Bash"], "metadata": {"author": "example-org", "version": "1.0"}}


def test_a_skill_md_goes_back_as_a_skill_md_and_signs(tmp_path: Path) -> None:
    node = parse_markdown(PDF, "SKILL.md")
    text = render_markdown(node)
    assert text.startswith("---\nname: pdf-processing\ndescription: Extract text")
    assert parse_markdown(text) == node and render_markdown(parse_markdown(text)) == text
    signed = sign_skill(node, LEAD, "lead")
    back = parse_markdown(render_markdown(signed))
    assert back == signed and verify_skill(back, KEYRING) == "lead"


def test_the_cli_imports_a_skill_md_into_a_memory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "SKILL.md"
    path.write_text(PDF, encoding="utf-8")
    memory = tmp_path / "mem"
    assert main(["skill", "import", str(path), "--memory", str(memory), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["stored"][0]["iri"] == "skill:pdf-processing"
    with MemorySystem.open(memory, runtime="sim") as m:
        stored = m.agent("da", "DA").read("skill:pdf-processing")["value"]
        assert stored["metadata"]["@value"]["license"] == "Apache-2.0"


@pytest.mark.parametrize(
    ("front", "line", "message"),
    [
        ("name: PDF Processing\ndescription: x", 2, "lowercase letters"),
        ("name: -pdf\ndescription: x", 2, "lowercase letters"),
        ("name: pdf\n", 1, "description is non-empty"),
        ("name: pdf\ndescription: '   '", 3, "description is non-empty"),
        ("name: pdf\ndescription: [unclosed", 3, "not YAML"),
        ("name: pdf\ndescription: x\nsigned-by: lead", 2, "come together"),
    ],
)
def test_a_bad_skill_md_is_refused_naming_the_line(tmp_path: Path, front: str, line: int, message: str) -> None:
    path = tmp_path / "SKILL.md"
    path.write_text(f"---\n{front}\n---\n\n## Do it\n\nSteps.\n", encoding="utf-8")
    with pytest.raises(InvalidInput, match=message) as caught:
        load_skill_file(path)
    assert caught.value.path[0] == str(path) and isinstance(caught.value.path[1], int)
    memory = tmp_path / "mem"
    assert main(["skill", "import", str(path), "--memory", str(memory)]) == 2
    with MemorySystem.open(memory, runtime="sim") as m:  # refused: nothing stored
        assert m.agent("da", "DA").search("", 10)["iris"] == []


def test_a_skill_md_without_a_body_or_with_an_id_is_not_taken_for_one(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="has a body"):
        parse_markdown("---\nname: pdf\ndescription: read PDFs\n---\n", "SKILL.md")
    with pytest.raises(InvalidInput, match="unknown front matter key 'name'"):  # the project's format, then
        parse_markdown("---\nid: skill:x\nname: pdf\n---\n", "x.md")

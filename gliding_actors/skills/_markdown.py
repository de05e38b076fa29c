"""Markdown skill files ⇄ skill nodes.

The file format (docs/SKILLS.md has the full grammar and an example)::

    ---
    id: skill:rotate-signing-keys
    type: atomic                      # or composite
    signed-by: team-lead              # optional, with signature:
    signature: <base64url>
    metadata: {"license": "MIT"}      # optional: one line of JSON (an object)
    ---

    # Rotate signing keys             → name

    Description paragraphs.           → what

    ## Trigger                        → trigger
    ## Steps                          → 1. **Title** instructions (continuation lines indented)
    ## Parameters                     → a table: name | type | required | description
    ## Input schema                   → or a fenced ```json block (any JSON Schema)
    ## Links                          → - prerequisite: IRI / - alternative: IRI / - composed of: IRI

**Errors name the line.** Anything that cannot be converted is an
:class:`InvalidInput` whose message starts ``FILE:LINE:`` and whose ``path``
is ``(FILE, LINE)``; a problem found in the assembled node (a composite skill
without parts, an invalid schema) is reported at the line its value came from.

A standard ``SKILL.md`` (front matter ``name`` and ``description``, a free
Markdown body; no ``id``) is read by :mod:`gliding_actors.skills._skill_md`
instead: :func:`parse_markdown` tells the two apart by the front matter.

**Round trip.** :func:`render_markdown` writes a node in the *canonical* form
(sections in the order above, one blank line between blocks, a table when the
schema is one a table means, else the JSON block). Two promises, both tested:

* node → Markdown → node gives the same node, for every node rendering
  accepts; rendering refuses (``InvalidInput`` naming the field) a node whose
  text Markdown cannot carry unchanged (a title with ``**``, a description
  line that would read as a heading...), rather than lose it;
* Markdown in canonical form → node → Markdown gives the same bytes; every
  file in ``scenarios/skills/`` is in canonical form. A file in another
  layout (blank lines between steps, sections in another order, a JSON block
  for a table-shaped schema) imports to the same node as its canonical form.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Final

from gliding_actors.errors import InvalidInput, show
from gliding_actors.l0 import is_valid_iri
from gliding_actors.skills._model import (
    ATOMIC,
    COMPOSITE,
    KINDS,
    LINK_KEYS,
    NO_INPUT,
    SIGNATURE_ALGORITHM,
    STEP_TYPE,
    Skill,
)
from gliding_actors.skills._skill_md import (
    is_skill_md,
    is_skill_md_node,
    parse_skill_md,
    render_skill_md,
)

__all__ = ["TABLE_TYPES", "parse_markdown", "render_markdown"]

#: the JSON types a parameters table may name
TABLE_TYPES: Final = ("string", "integer", "number", "boolean", "array", "object")
_SECTIONS: Final = {
    "trigger": "Trigger",
    "steps": "Steps",
    "parameters": "Parameters",
    "input schema": "Input schema",
    "links": "Links",
}
_LINK_WORDS: Final = {"prerequisite": "prerequisite", "alternative": "alternative", "composed of": "composedOf"}
_LINK_LABEL: Final = {v: k for k, v in _LINK_WORDS.items()}
_TABLE_HEADER: Final = ["name", "type", "required", "description"]
_STEP = re.compile(r"(\d+)\. (.*)\Z")
_TITLE = re.compile(r"\*\*(.+?)\*\*(?: (.*))?\Z")
_FRONT_KEY = re.compile(r"([a-z-]+):(?: (.*))?\Z")
_LINK = re.compile(r"- ([a-z ]+?): (.*)\Z")
_SEPARATOR = re.compile(r"\|(?:\s*:?-{3,}:?\s*\|){4}\Z")


@dataclass
class _Parsed:
    """What the parser gathered, and the line each value came from."""

    file: str
    front: dict[str, str] = field(default_factory=dict)
    name: str | None = None
    what: list[str] = field(default_factory=list)
    sections: dict[str, tuple[int, list[tuple[int, str]]]] = field(default_factory=dict)
    origin: dict[str, int] = field(default_factory=dict)
    metadata: Any = None

    def error(self, line: int, message: str) -> InvalidInput:
        return InvalidInput(f"{self.file}:{line}: {message}", path=(self.file, line))


def parse_markdown(text: str, file: str = "<skill>") -> dict[str, Any]:
    """The skill node a Markdown skill file describes; ``InvalidInput`` ``FILE:LINE: ...`` otherwise."""
    if not isinstance(text, str):
        raise InvalidInput(f"{file}: a skill file is text, not {type(text).__name__}")
    lines = [line.removesuffix("\r") for line in text.split("\n")]
    if lines and lines[-1] == "":
        lines.pop()
    if is_skill_md(lines):
        return parse_skill_md(lines, file)
    parsed = _Parsed(file)
    at = _front_matter(lines, parsed)
    _body(lines, at, parsed)
    node = _assemble(parsed)
    try:
        Skill.from_node(node)
    except InvalidInput as exc:
        key = str(exc.path[0]) if exc.path else "@id"
        # a composite skill without parts has no links line: its type line is what is wrong
        line = parsed.origin.get(key) or parsed.origin.get("@type") or parsed.origin.get("@id", 1)
        raise parsed.error(line, exc.message) from None
    return node


def _front_matter(lines: list[str], parsed: _Parsed) -> int:
    if not lines or lines[0].strip() != "---":
        raise parsed.error(
            1,
            "a skill file starts with front matter: '---', 'id: <iri>', 'type: atomic', '---' "
            "(or, for a standard SKILL.md, 'name:' and 'description:')",
        )
    for number in range(2, len(lines) + 1):
        line = lines[number - 1]
        if line.strip() == "---":
            if "id" not in parsed.front:
                raise parsed.error(number, "the front matter needs 'id: <iri>'")
            if ("signed-by" in parsed.front) != ("signature" in parsed.front):
                raise parsed.error(number, "'signed-by' and 'signature' come together")
            return number
        match = _FRONT_KEY.match(line.strip())
        if match is None:
            raise parsed.error(number, f"expected 'key: value' in the front matter, not {line!r}")
        key, value = match.group(1), (match.group(2) or "").strip()
        if key not in ("id", "type", "signed-by", "signature", "metadata"):
            raise parsed.error(number, f"unknown front matter key {key!r} (id, type, signed-by, signature, metadata)")
        if key in parsed.front:
            raise parsed.error(number, f"{key!r} is given twice")
        if not value:
            raise parsed.error(number, f"{key!r} needs a value")
        if key == "id" and not is_valid_iri(value):
            raise parsed.error(number, f"the id is an IRI (scheme:rest, no spaces), not {value!r}")
        if key == "type" and value not in KINDS:
            raise parsed.error(number, f"the type is {ATOMIC!r} or {COMPOSITE!r}, not {value!r}")
        if key == "metadata":
            try:
                parsed.metadata = json.loads(value)
            except ValueError as exc:
                raise parsed.error(number, f"metadata is one line of JSON: {exc}") from None
        parsed.front[key] = value
        parsed.origin[
            {"id": "@id", "type": "@type", "signed-by": "signature", "signature": "signature", "metadata": "metadata"}[key]
        ] = number
    raise parsed.error(len(lines), "the front matter is never closed with '---'")


def _body(lines: list[str], after: int, parsed: _Parsed) -> None:
    current: list[tuple[int, str]] | None = None
    for number in range(after + 1, len(lines) + 1):
        line = lines[number - 1]
        if line.startswith("# "):
            if parsed.name is not None:
                raise parsed.error(number, "a skill file has one '# name' heading; sections are '## ...'")
            parsed.name = line[2:].strip()
            parsed.origin["name"] = number
            if not parsed.name:
                raise parsed.error(number, "the '# name' heading is empty")
            continue
        if line.startswith("## "):
            if parsed.name is None:
                raise parsed.error(number, "the '# name' heading comes before any section")
            title = line[3:].strip()
            key = title.lower()
            if key not in _SECTIONS:
                raise parsed.error(number, f"unknown section {title!r} (sections: {', '.join(_SECTIONS.values())})")
            if key in parsed.sections:
                raise parsed.error(number, f"section {title!r} appears twice")
            current = []
            parsed.sections[key] = (number, current)
            continue
        if line.startswith("#"):
            raise parsed.error(number, "headings are '# name' once, then '## Section'")
        if current is not None:
            current.append((number, line))
        elif parsed.name is None:
            if line.strip():
                raise parsed.error(number, "expected the skill's '# name' heading after the front matter")
        else:
            if line.strip() and "what" not in parsed.origin:
                parsed.origin["what"] = number
            parsed.what.append(line)
    if parsed.name is None:
        raise parsed.error(max(after, 1), "a skill file needs a '# name' heading")


def _paragraphs(lines: list[str]) -> str:
    """Lines as text: blank lines at both ends dropped, runs of blank lines made one."""
    out: list[str] = []
    for line in lines:
        line = line.rstrip()
        if not line and (not out or not out[-1]):
            continue
        out.append(line)
    while out and not out[-1]:
        out.pop()
    return "\n".join(out)


def _assemble(parsed: _Parsed) -> dict[str, Any]:
    front = parsed.front
    kind = front.get("type", ATOMIC)
    node: dict[str, Any] = {"@id": front["id"], "@type": list(KINDS[kind]), "name": parsed.name}
    node["what"] = _paragraphs(parsed.what)
    if not node["what"]:
        raise parsed.error(parsed.origin["name"], "the '# name' heading is followed by a description paragraph")
    for key in ("trigger", "steps"):
        if key not in parsed.sections:
            raise parsed.error(parsed.origin["name"], f"a skill needs a '## {_SECTIONS[key]}' section")
    start, body = parsed.sections["trigger"]
    node["trigger"] = _paragraphs([line for _, line in body])
    parsed.origin["trigger"] = start
    if not node["trigger"]:
        raise parsed.error(start, "the Trigger section is empty")
    node["steps"] = _steps(parsed)
    node["inputSchema"] = {"@type": "@json", "@value": _schema(parsed)}
    links = _links(parsed)
    for key in LINK_KEYS:
        if links[key]:
            node[key] = [{"@id": target} for target in links[key]]
    if "metadata" in front:
        node["metadata"] = {"@type": "@json", "@value": parsed.metadata}
    if "signature" in front:
        node["signature"] = {"algorithm": SIGNATURE_ALGORITHM, "keyId": front["signed-by"], "value": front["signature"]}
    return node


def _steps(parsed: _Parsed) -> list[dict[str, Any]]:
    start, body = parsed.sections["steps"]
    parsed.origin["steps"] = start
    steps: list[dict[str, Any]] = []
    lines: list[str] = []
    for number, line in body:
        if not line.strip():
            continue
        match = _STEP.match(line)
        if match is None:
            if steps and line[:1].isspace():
                lines.append(line.strip())
                steps[-1]["instructions"] = "\n".join(lines)
                continue
            raise parsed.error(number, "expected a numbered step '1. **Title** instructions' (continuation lines indented)")
        if int(match.group(1)) != len(steps) + 1:
            raise parsed.error(number, f"step numbered {match.group(1)}, expected {len(steps) + 1}")
        item = _TITLE.match(match.group(2))
        if item is None or not item.group(1).strip():
            raise parsed.error(number, "a step starts with its title in bold: '**Title**', then the instructions")
        title = item.group(1)
        if title != title.strip():
            raise parsed.error(number, "a step's title has no spaces inside the ** marks")
        lines = [item.group(2).strip()] if item.group(2) and item.group(2).strip() else []
        steps.append({"@type": STEP_TYPE, "order": len(steps) + 1, "title": title, "instructions": "\n".join(lines)})
    if not steps:
        raise parsed.error(start, "the Steps section lists at least one step")
    return steps


def _schema(parsed: _Parsed) -> dict[str, Any]:
    table, block = parsed.sections.get("parameters"), parsed.sections.get("input schema")
    if table is not None and block is not None:
        raise parsed.error(block[0], "give the input as a Parameters table or an Input schema block, not both")
    if table is not None:
        parsed.origin["inputSchema"] = table[0]
        return _table(parsed, *table)
    if block is not None:
        parsed.origin["inputSchema"] = block[0]
        return _json_block(parsed, *block)
    return dict(NO_INPUT)


def _cells(row: str) -> list[str]:
    """The cells of ``| a | b |``; ``\\|`` is a literal bar."""
    inner = row.strip()[1:-1]
    cells, cell, escaped = [], [], False
    for char in inner:
        if escaped:
            cell.append(char if char == "|" else "\\" + char)
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == "|":
            cells.append("".join(cell).strip())
            cell = []
        else:
            cell.append(char)
    if escaped:
        cell.append("\\")
    cells.append("".join(cell).strip())
    return cells


def _table(parsed: _Parsed, start: int, body: list[tuple[int, str]]) -> dict[str, Any]:
    rows = [(n, line) for n, line in body if line.strip()]
    if len(rows) < 2:
        raise parsed.error(start, "the Parameters section is a table: '| name | type | required | description |'")
    for number, line in rows:
        if not (line.strip().startswith("|") and line.strip().endswith("|")):
            raise parsed.error(number, "each line of the Parameters table starts and ends with '|'")
    (head_line, head), (sep_line, sep) = rows[0], rows[1]
    if [c.lower() for c in _cells(head)] != _TABLE_HEADER:
        raise parsed.error(head_line, f"the table's columns are {' | '.join(_TABLE_HEADER)}")
    if _SEPARATOR.match(sep.strip().replace(" ", "")) is None:
        raise parsed.error(sep_line, "the second line of the table is '| --- | --- | --- | --- |'")
    properties: dict[str, Any] = {}
    required: list[str] = []
    for number, line in rows[2:]:
        cells = _cells(line)
        if len(cells) != 4:
            raise parsed.error(number, f"a parameter row has 4 cells, not {len(cells)}")
        name, kind, needed, description = cells
        if not name:
            raise parsed.error(number, "a parameter needs a name")
        if name in properties:
            raise parsed.error(number, f"parameter {name!r} is listed twice")
        if kind not in TABLE_TYPES:
            raise parsed.error(number, f"parameter {name!r}: type is one of {', '.join(TABLE_TYPES)}, not {kind!r}")
        if needed not in ("yes", "no"):
            raise parsed.error(number, f"parameter {name!r}: required is 'yes' or 'no', not {needed!r}")
        properties[name] = {"type": kind, "description": description} if description else {"type": kind}
        if needed == "yes":
            required.append(name)
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


def _json_block(parsed: _Parsed, start: int, body: list[tuple[int, str]]) -> dict[str, Any]:
    rows = [(n, line) for n, line in body if line.strip()]
    if not rows or rows[0][1].strip() != "```json":
        raise parsed.error(rows[0][0] if rows else start, "the Input schema section is one fenced ```json block")
    open_line = rows[0][0]
    closing = next((i for i, (_, line) in enumerate(body) if line.strip() == "```" and body[i][0] > open_line), None)
    if closing is None:
        raise parsed.error(open_line, "the ```json block is never closed with ```")
    inside = [line for n, line in body[:closing] if n > open_line]
    after = [(n, line) for n, line in body[closing + 1 :] if line.strip()]
    if after:
        raise parsed.error(after[0][0], "nothing follows the ```json block in the Input schema section")
    try:
        schema = json.loads("\n".join(inside))
    except ValueError as exc:
        line = open_line + getattr(exc, "lineno", 1)
        raise parsed.error(line, f"the input schema is not JSON: {getattr(exc, 'msg', exc)}") from None
    if not isinstance(schema, dict):
        raise parsed.error(open_line + 1, "the input schema is a JSON object")
    return schema


def _links(parsed: _Parsed) -> dict[str, list[str]]:
    links: dict[str, list[str]] = {key: [] for key in LINK_KEYS}
    section = parsed.sections.get("links")
    if section is None:
        return links
    for number, line in section[1]:
        if not line.strip():
            continue
        match = _LINK.match(line.rstrip())
        if match is None or match.group(1) not in _LINK_WORDS:
            raise parsed.error(number, "a link is '- prerequisite: IRI', '- alternative: IRI' or '- composed of: IRI'")
        key, target = _LINK_WORDS[match.group(1)], match.group(2).strip()
        if not is_valid_iri(target):
            raise parsed.error(number, f"{target!r} is not an IRI (scheme:rest, no spaces)")
        if target in links[key]:
            raise parsed.error(number, f"{_LINK_LABEL[key]} {target} is listed twice")
        links[key].append(target)
        parsed.origin.setdefault(key, number)
    return links


# -- rendering ----------------------------------------------------------------------


def _escape_cell(text: str) -> str:
    return text.replace("|", "\\|")


def _table_text(schema: dict[str, Any]) -> list[str] | None:
    """The schema as a parameters table, or None when a table cannot mean exactly it."""
    if set(schema) != {"type", "properties", "required", "additionalProperties"}:
        return None
    if schema["type"] != "object" or schema["additionalProperties"] is not False:
        return None
    properties, required = schema["properties"], schema["required"]
    if not isinstance(properties, dict) or not isinstance(required, list):
        return None
    if required != [name for name in properties if name in required]:
        return None  # a table lists required parameters in the parameters' order
    rows = ["| " + " | ".join(_TABLE_HEADER) + " |", "| --- | --- | --- | --- |"]
    for name, spec in properties.items():
        if not isinstance(spec, dict) or not set(spec) <= {"type", "description"} or spec.get("type") not in TABLE_TYPES:
            return None
        description = spec.get("description", "")
        if not isinstance(description, str) or ("description" in spec and not description):
            return None
        needed = "yes" if name in required else "no"
        rows.append("| " + " | ".join((_escape_cell(name), spec["type"], needed, _escape_cell(description))) + " |")
    return rows


def _render(skill: Skill, *, table: bool) -> str:
    node = skill.node
    out = ["---", f"id: {skill.iri}", f"type: {skill.kind}"]
    if "signature" in node:
        out += [f"signed-by: {node['signature']['keyId']}", f"signature: {node['signature']['value']}"]
    if skill.metadata:
        out.append("metadata: " + json.dumps(skill.metadata, ensure_ascii=False))
    out += ["---", "", f"# {skill.name}", "", skill.what, "", "## Trigger", "", skill.trigger, "", "## Steps", ""]
    for step in skill.steps:
        first, *rest = step.instructions.split("\n") if step.instructions else [""]
        out.append(f"{step.order}. **{step.title}**" + (f" {first}" if first else ""))
        out += [f"   {line}" for line in rest]
    schema = skill.input_schema
    rows = _table_text(schema) if table else None
    if rows is not None:
        out += ["", "## Parameters", "", *rows]
    elif schema != NO_INPUT:
        out += ["", "## Input schema", "", "```json", json.dumps(schema, indent=2, ensure_ascii=False), "```"]
    link_lines = [
        f"- {_LINK_LABEL[key]}: {target}"
        for key, targets in zip(LINK_KEYS, (skill.prerequisites, skill.alternatives, skill.components), strict=True)
        for target in targets
    ]
    if link_lines:
        out += ["", "## Links", "", *link_lines]
    return "\n".join(out) + "\n"


def _prose_problem(text: str) -> str | None:
    """Why ``text`` would not come back unchanged as Markdown paragraphs (None: it would)."""
    if "\r" in text:
        return "a carriage return"
    if _paragraphs(text.split("\n")) != text:
        return "spaces at a line end, or blank lines at the ends or two in a row"
    if any(line.startswith("#") for line in text.split("\n")):
        return "a line starting with '#' (a heading)"
    return None


def _check_representable(skill: Skill) -> None:
    """Name the first field Markdown cannot carry unchanged."""
    problems: list[tuple[tuple[str | int, ...], str | None]] = [
        (("name",), "spaces at its ends" if skill.name != skill.name.strip() else None),
        (("what",), _prose_problem(skill.what)),
        (("trigger",), _prose_problem(skill.trigger)),
    ]
    for i, step in enumerate(skill.steps):
        title_problem = None
        if step.title != step.title.strip():
            title_problem = "spaces at its ends"
        elif "**" in step.title:
            title_problem = "'**' (the title's own bold marks)"
        problems.append((("steps", i, "title"), title_problem))
        lines = step.instructions.split("\n")
        bad = step.instructions and any(not line or line != line.strip() for line in lines)
        problems.append((("steps", i, "instructions"), "blank lines or spaces at a line's ends" if bad else None))
    for path, problem in problems:
        if problem is not None:
            shown = ".".join(str(p) for p in path)
            raise InvalidInput(
                f"skill {skill.iri}: field {show(shown)} cannot be written as Markdown without changing it: {problem}",
                path=path,
            )


def render_markdown(node: dict[str, Any]) -> str:
    """The canonical Markdown of a skill node; ``InvalidInput`` naming the field Markdown cannot carry.

    A SKILL.md-shaped node (:func:`~gliding_actors.skills._skill_md.is_skill_md_node`) is written as
    a standard SKILL.md; any other in this module's format.

    The text is parsed back before it is returned: a node that would not come
    back unchanged is refused, never silently altered.
    """
    skill = Skill.from_node(node)
    if is_skill_md_node(node):  # what a SKILL.md gave goes back as one
        return render_skill_md(node)
    _check_representable(skill)
    text = _render(skill, table=True)
    back = _try_parse(text, skill.iri)
    if isinstance(back, dict) and back.get("inputSchema") != node["inputSchema"]:
        # a table could not carry the schema as it is (a name with '\\', a
        # description with spaces at its ends): the JSON block always can
        text = _render(skill, table=False)
        back = _try_parse(text, skill.iri)
    if isinstance(back, InvalidInput):
        raise InvalidInput(
            f"skill {skill.iri} cannot be written as Markdown: its rendering does not read back ({back.message})"
        )
    if back != node:
        key = next(k for k in (*node, *back) if node.get(k) != back.get(k))
        raise InvalidInput(
            f"skill {skill.iri}: field {show(key)} cannot be written as Markdown without changing it", path=(key,)
        )
    return text


def _try_parse(text: str, iri: str) -> dict[str, Any] | InvalidInput:
    try:
        return parse_markdown(text, f"<{iri}>")
    except InvalidInput as exc:
        return exc

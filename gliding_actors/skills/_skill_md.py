"""Standard ``SKILL.md`` files — the format agent frameworks share — read as skill nodes.

::

    ---
    name: pdf-processing            → @id skill:pdf-processing (required)
    description: Extract text ...   → what, and trigger: it says what the skill does and
                                      when to use it (required)
    license: Apache-2.0             → any other key is kept in the node's metadata
    allowed-tools: [Read, Bash]
    signed-by: team-lead            → the node's signature (optional, together: what
    signature: <base64url>            `gliding-actors skill sign` writes)
    ---

    # PDF processing                → name (optional: else the front matter's name)

    Text before the first section.  → a first step, "Overview" (when there is any)

    ## Quick start                  → one step per section: the heading is its title,
    ...                               everything up to the next section its instructions
                                      (sub-headings and code blocks included, verbatim)

The front matter is YAML (read with ruamel.yaml's safe loader). ``name`` is
what the standard allows: 1–64 lowercase letters, digits and single hyphens,
neither first nor last; ``description`` is non-empty text of at most 1,024
characters. A SKILL.md takes no declared input (its schema is
:data:`~gliding_actors.skills._model.NO_INPUT`). A ``## `` line inside a
fenced code block is code, not a section. Errors are
:class:`~gliding_actors.errors.InvalidInput` ``FILE:LINE: ...``, like the
project's own skill files.

:func:`render_skill_md` writes such a node back as a SKILL.md (front matter
in the order name, description, the metadata's keys, the signature; the
title when it differs from the name; the "Overview" step as the text before
the first section), and parses it back before answering: a node that would
not come back unchanged is refused. :func:`is_skill_md_node` says whether a
node has the shape a SKILL.md gives (what the Markdown renderer checks to
choose this format).
"""

from __future__ import annotations

import datetime
import io
import re
from typing import Any, Final

from ruamel.yaml import YAML
from ruamel.yaml.error import MarkedYAMLError, YAMLError

from gliding_actors.errors import InvalidInput
from gliding_actors.l0._canonical import JSON_ERRORS, canonical
from gliding_actors.skills._model import (
    ATOMIC,
    KINDS,
    NO_INPUT,
    SIGNATURE_ALGORITHM,
    STEP_TYPE,
    Skill,
)

__all__ = ["is_skill_md", "is_skill_md_node", "parse_skill_md", "render_skill_md"]

_NAME: Final = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*\Z")
_FENCE: Final = re.compile(r"\s{0,3}(`{3,}|~{3,})")
_MAX_NAME: Final = 64
_MAX_DESCRIPTION: Final = 1024


def _front_lines(lines: list[str]) -> list[str] | None:
    """The front matter's lines (between the first two ``---``), or None when there is none."""
    if not lines or lines[0].strip() != "---":
        return None
    for number in range(1, len(lines)):
        if lines[number].strip() == "---":
            return lines[1:number]
    return None


def is_skill_md(lines: list[str]) -> bool:
    """True when the front matter is a standard SKILL.md's: a ``name:`` key and no ``id:`` key."""
    front = _front_lines(lines)
    if front is None:
        return False
    keys = {line.split(":", 1)[0].strip() for line in front if ":" in line and not line[:1].isspace()}
    return "name" in keys and "id" not in keys


def _error(file: str, line: int, message: str) -> InvalidInput:
    return InvalidInput(f"{file}:{line}: {message}", path=(file, line))


def _plain(value: Any) -> Any:
    """YAML's values as JSON: dates become ISO text (YAML reads ``2025-01-31`` as a date)."""
    if isinstance(value, (datetime.date, datetime.datetime)):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _front_matter(lines: list[str], file: str) -> tuple[dict[str, Any], int]:
    front = _front_lines(lines)
    if front is None:
        raise _error(file, 1, "the front matter is never closed with '---'")
    end = len(front) + 2  # the closing '---' line
    try:
        data = YAML(typ="safe", pure=True).load("\n".join(front))
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = 2 + (mark.line if mark is not None else 0)
        raise _error(file, line, f"the front matter is not YAML: {exc.problem or exc}") from None
    except YAMLError as exc:
        raise _error(file, 2, f"the front matter is not YAML: {exc}") from None
    if not isinstance(data, dict):
        raise _error(file, 2, "the front matter is a mapping of keys to values")
    data = _plain(data)
    try:
        canonical(data)
    except JSON_ERRORS as exc:
        raise _error(file, 2, f"the front matter holds a value JSON cannot: {exc}") from None

    def line_of(key: str) -> int:
        return next((2 + i for i, line in enumerate(front) if line.startswith(f"{key}:")), 2)

    name, description = data.get("name"), data.get("description")
    if not isinstance(name, str) or len(name) > _MAX_NAME or _NAME.match(name) is None:
        raise _error(
            file, line_of("name"),
            f"name is 1-{_MAX_NAME} lowercase letters, digits and single hyphens (not first or last), not {name!r}",
        )
    if not isinstance(description, str) or not description.strip() or len(description) > _MAX_DESCRIPTION:
        raise _error(
            file, line_of("description"), f"description is non-empty text of at most {_MAX_DESCRIPTION} characters"
        )
    return data, end


def _sections(lines: list[str], start: int) -> tuple[str | None, list[tuple[str, list[str], int]]]:
    """The ``# title`` (if any) and the body cut at ``## `` headings outside code blocks.

    The text before the first section comes first, titled ``Overview``.
    """
    title: str | None = None
    sections: list[tuple[str, list[str], int]] = [("Overview", [], start + 1)]
    fence: str | None = None
    for number in range(start + 1, len(lines) + 1):
        line = lines[number - 1]
        opened = _FENCE.match(line)
        if opened is not None:
            marker = opened.group(1)
            if fence is None:
                fence = marker[0] * len(marker)
            elif marker.startswith(fence):
                fence = None
        elif fence is None and line.startswith("## "):
            sections.append((line[3:].strip(), [], number))
            continue
        elif (
            fence is None and title is None and line.startswith("# ") and len(sections) == 1
            and not "".join(sections[0][1]).strip()
        ):
            title = line[2:].strip()  # the title: a '# ' heading before any text
            continue
        sections[-1][1].append(line)
    return title, sections


def _text(lines: list[str]) -> str:
    """Lines as they are, blank lines at both ends and spaces at line ends dropped."""
    out = [line.rstrip() for line in lines]
    while out and not out[0]:
        out.pop(0)
    while out and not out[-1]:
        out.pop()
    return "\n".join(out)


def parse_skill_md(lines: list[str], file: str = "<SKILL.md>") -> dict[str, Any]:
    """The skill node a standard SKILL.md describes (module docstring); ``InvalidInput`` otherwise."""
    data, end = _front_matter(lines, file)
    title, sections = _sections(lines, end)
    steps: list[dict[str, Any]] = []
    for heading, body, number in sections:
        text = _text(body)
        if heading == "Overview" and number == end + 1 and not text:
            continue  # nothing before the first section
        if not heading:
            raise _error(file, number, "a '## ' section needs a heading")
        steps.append({"@type": STEP_TYPE, "order": len(steps) + 1, "title": heading, "instructions": text})
    if not steps:
        raise _error(file, end, "a SKILL.md has a body: its instructions become the skill's steps")
    description = data["description"].strip()
    node: dict[str, Any] = {
        "@id": f"skill:{data['name']}",
        "@type": list(KINDS[ATOMIC]),
        "name": title or data["name"],
        "what": description,
        "trigger": description,
        "steps": steps,
        "inputSchema": {"@type": "@json", "@value": dict(NO_INPUT)},
    }
    rest = {k: v for k, v in data.items() if k not in ("name", "description", "signed-by", "signature")}
    if rest:
        node["metadata"] = {"@type": "@json", "@value": rest}
    if ("signed-by" in data) != ("signature" in data):
        raise _error(file, 2, "'signed-by' and 'signature' come together")
    if "signature" in data:
        node["signature"] = {"algorithm": SIGNATURE_ALGORITHM, "keyId": data["signed-by"], "value": data["signature"]}
    try:
        Skill.from_node(node)
    except InvalidInput as exc:
        raise _error(file, 1, exc.message) from None
    return node


def is_skill_md_node(node: dict[str, Any]) -> bool:
    """True when ``node`` has the shape a SKILL.md gives: an atomic skill ``skill:<name>`` whose
    description is both its what and its trigger, with no declared input and no links."""
    iri = node.get("@id")
    return (
        isinstance(iri, str)
        and iri.startswith("skill:")
        and _NAME.match(iri[len("skill:"):]) is not None
        and node.get("@type") == KINDS[ATOMIC]
        and node.get("what") == node.get("trigger")
        and node.get("inputSchema") == {"@type": "@json", "@value": NO_INPUT}
        and not ({"prerequisite", "alternative", "composedOf"} & set(node))
    )


def render_skill_md(node: dict[str, Any]) -> str:
    """``node`` as a SKILL.md; :class:`InvalidInput` when it is not SKILL.md-shaped or would not read back."""
    skill = Skill.from_node(node)
    if not is_skill_md_node(node):
        raise InvalidInput(f"skill {skill.iri} is not SKILL.md-shaped (skill:<name>, what = trigger, no input, no links)")
    slug = skill.iri[len("skill:"):]
    front: dict[str, Any] = {"name": slug, "description": skill.what, **skill.metadata}
    if "signature" in node:
        front["signed-by"] = node["signature"]["keyId"]
        front["signature"] = node["signature"]["value"]
    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    yaml.sort_base_mapping_type_on_output = False  # type: ignore[assignment]
    yaml.width = 4096
    buffer = io.StringIO()
    yaml.dump(front, buffer)
    out = ["---", *buffer.getvalue().rstrip("\n").split("\n"), "---", ""]
    if skill.name != slug:
        out += [f"# {skill.name}", ""]
    steps = list(skill.steps)
    if steps and steps[0].title == "Overview":
        out += [steps.pop(0).instructions, ""]
    for step in steps:
        out += [f"## {step.title}", ""]
        if step.instructions:
            out += [step.instructions, ""]
    text = "\n".join(out).rstrip("\n") + "\n"
    try:
        back = parse_skill_md(text.split("\n")[:-1], f"<{skill.iri}>")
    except InvalidInput as exc:
        raise InvalidInput(f"skill {skill.iri} cannot be written as a SKILL.md: it does not read back ({exc.message})") from None
    if back != node:
        key = next(k for k in (*node, *back) if node.get(k) != back.get(k))
        raise InvalidInput(f"skill {skill.iri}: field {key!r} cannot be written as a SKILL.md without changing it",
                           path=(key,))
    return text

"""Skills are memory too: signed JSON-LD skill nodes, found, projected and checked before use.

A skill is a JSON-LD node (``@type`` ``Skill`` + ``AtomicSkill`` or
``CompositeSkill``) with what it does, when to use it, its steps, an input
JSON Schema and links to prerequisites, alternatives and parts, stored as a
line through an :class:`~gliding_actors.Agent` like every other memory. It
carries an Ed25519 signature over a canonical JSON of itself; before a skill is
handed over for use, the guard verifies that signature against keys the
caller trusts and validates the input against the schema. See docs/SKILLS.md.

The pieces: :mod:`._model` (the node's shape), :mod:`._signing` (canonical
form, keys, sign/verify), :mod:`._markdown` (Markdown skill files ⇄ nodes),
:mod:`._project` (SA/PA/DA projections within token budgets),
:mod:`._guard` (the invocation guard), :mod:`._memory` (store, discover and
use through an agent).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gliding_actors.errors import InvalidInput
from gliding_actors.skills._guard import Invocation, check_invocation, json_path, validate_input
from gliding_actors.skills._markdown import parse_markdown, render_markdown
from gliding_actors.skills._memory import (
    SKILL_GRAPH,
    SKILL_TAG,
    alternatives,
    components,
    invoke_skill,
    list_skills,
    prerequisites,
    read_skill,
    similar_skills,
    skill_view,
    store_skill,
    use_skill,
)
from gliding_actors.skills._model import ATOMIC, COMPOSITE, NO_INPUT, Skill, SkillStep, skill_node
from gliding_actors.skills._project import BUDGETS, ROLE_LEVELS, project_skill
from gliding_actors.skills._signing import (
    Keyring,
    load_private_key,
    public_key_text,
    sign_skill,
    signing_payload,
    verify_skill,
)

__all__ = [
    "ATOMIC",
    "BUDGETS",
    "COMPOSITE",
    "NO_INPUT",
    "ROLE_LEVELS",
    "SKILL_GRAPH",
    "SKILL_TAG",
    "Invocation",
    "Keyring",
    "Skill",
    "SkillStep",
    "alternatives",
    "check_invocation",
    "components",
    "invoke_skill",
    "json_path",
    "list_skills",
    "load_private_key",
    "load_skill_file",
    "parse_markdown",
    "prerequisites",
    "project_skill",
    "public_key_text",
    "read_skill",
    "render_markdown",
    "sign_skill",
    "signing_payload",
    "similar_skills",
    "skill_node",
    "skill_view",
    "store_skill",
    "use_skill",
    "validate_input",
    "verify_skill",
]


def load_skill_file(path: str | Path) -> dict[str, Any]:
    """The skill node in a file: Markdown (``.md``, converted) or a JSON node (anything else), checked.

    Errors are :class:`InvalidInput`: ``FILE:LINE: ...`` for Markdown, the
    file and the JSON problem or the node path otherwise.
    """
    where = Path(path)
    try:
        text = where.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInput(f"{path}: cannot read: {exc}") from None
    if where.suffix.lower() in (".md", ".markdown"):
        return parse_markdown(text, str(path))
    try:
        node = json.loads(text)
    except ValueError as exc:
        raise InvalidInput(f"{path}: not JSON: {exc}") from None
    try:
        Skill.from_node(node)
    except InvalidInput as exc:
        where_in = json_path(exc.path) if exc.path else "$"
        raise InvalidInput(f"{path}: {where_in}: {exc.message}", path=exc.path) from None
    if not isinstance(node, dict):  # pragma: no cover - from_node refused it
        raise InvalidInput(f"{path}: not a skill node")
    return node

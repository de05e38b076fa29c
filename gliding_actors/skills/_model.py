"""What a skill node is: the one JSON-LD shape, checked field by field.

A skill is stored like every other memory, as a JSON-LD node read with the
default context (``@vocab`` = ``https://gliding-actors.dev/ns#``), so SPARQL
sees ``?s a ga:Skill`` and follows ``ga:prerequisite`` links. The shape is
strict — each meaning has exactly one spelling — because the signature covers
the node's exact JSON: two spellings of one skill would be two signatures, and
a Markdown export could not promise to give the same node back.

Keys, in canonical order (see docs/SKILLS.md)::

    @id           the skill's IRI
    @type         ["Skill", "AtomicSkill"] or ["Skill", "CompositeSkill"]
    name          one line
    what          what the skill does (prose, may span lines)
    trigger       when to use it
    steps         [{"@type": "SkillStep", "order": 1.., "title", "instructions"}]
    inputSchema   {"@type": "@json", "@value": <JSON Schema, draft 2020-12>}
    prerequisite  [{"@id"}]   optional, never empty
    alternative   [{"@id"}]   optional, never empty
    composedOf    [{"@id"}]   composite skills only, at least one
    metadata      {"@type": "@json", "@value": {...}}   optional: what a SKILL.md's front
                  matter says besides name and description (license, allowed-tools, ...)
    signature     {"algorithm": "Ed25519", "keyId", "value"}   optional

The input schema is a ``@json`` literal: a schema's keys (``properties``,
``$ref``, a property named ``@id``) are data, not JSON-LD, and must not put
triples anywhere.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from gliding_actors.errors import InvalidInput, show
from gliding_actors.l0 import is_valid_iri
from gliding_actors.l0._canonical import JSON_ERRORS, canonical

__all__ = [
    "ATOMIC",
    "COMPOSITE",
    "KINDS",
    "LINK_KEYS",
    "NO_INPUT",
    "SIGNATURE_ALGORITHM",
    "SKILL_KEYS",
    "SKILL_TYPE",
    "STEP_TYPE",
    "Skill",
    "SkillStep",
    "check_key_id",
    "skill_node",
]

SKILL_TYPE: Final = "Skill"
STEP_TYPE: Final = "SkillStep"
ATOMIC: Final = "atomic"
COMPOSITE: Final = "composite"
#: kind → the node's ``@type``
KINDS: Final[dict[str, list[str]]] = {
    ATOMIC: [SKILL_TYPE, "AtomicSkill"],
    COMPOSITE: [SKILL_TYPE, "CompositeSkill"],
}
#: the link properties, in canonical order
LINK_KEYS: Final = ("prerequisite", "alternative", "composedOf")
SKILL_KEYS: Final = (
    "@id",
    "@type",
    "name",
    "what",
    "trigger",
    "steps",
    "inputSchema",
    *LINK_KEYS,
    "metadata",
    "signature",
)
_REQUIRED: Final = frozenset(("@id", "@type", "name", "what", "trigger", "steps", "inputSchema"))
_STEP_KEYS: Final = frozenset(("@type", "order", "title", "instructions"))
SIGNATURE_ALGORITHM: Final = "Ed25519"
#: the schema of a skill that takes no input (an empty object)
NO_INPUT: Final[dict[str, Any]] = {"type": "object", "additionalProperties": False}
_KEY_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@/+-]{0,127}\Z")


def check_key_id(key_id: object) -> str:
    """A key id: 1–128 characters from ``A-Za-z0-9._:@/+-``, starting alphanumeric.

    Narrow on purpose: it is printed in error messages and CLI tables, and it
    must not be able to carry a newline or a control character into them.
    """
    if type(key_id) is not str or _KEY_ID.match(key_id) is None:
        raise InvalidInput(
            f"a key id is 1-128 characters of A-Za-z0-9._:@/+- starting with a letter or digit, not {show(key_id)}",
            path=("signature", "keyId"),
        )
    return key_id


@dataclass(frozen=True)
class SkillStep:
    """One step: its 1-based position, a one-line title, the instructions (may be empty)."""

    order: int
    title: str
    instructions: str


@dataclass(frozen=True)
class Skill:
    """A checked skill node, with typed access to its parts.

    ``node`` is the node exactly as given (and as signed); the other fields
    are read from it. Build one with :meth:`from_node`, which refuses
    anything that is not a skill with :class:`InvalidInput` naming the path.
    """

    node: dict[str, Any]
    iri: str
    kind: str
    name: str
    what: str
    trigger: str
    steps: tuple[SkillStep, ...]
    input_schema: dict[str, Any]
    prerequisites: tuple[str, ...]
    alternatives: tuple[str, ...]
    components: tuple[str, ...]
    key_id: str | None
    #: free-form facts about the skill (a SKILL.md's other front matter keys); {} when absent
    metadata: dict[str, Any]

    @classmethod
    def from_node(cls, node: object) -> Skill:
        """Check ``node`` against the skill shape (module docstring); raise at the first problem."""
        if not isinstance(node, dict):
            raise InvalidInput(f"a skill is a JSON object, not {type(node).__name__}")
        try:
            canonical(node)
        except JSON_ERRORS as exc:
            raise InvalidInput(f"a skill must be plain JSON: {exc}") from None
        unknown = sorted(set(node) - set(SKILL_KEYS), key=str)
        if unknown:
            raise InvalidInput(
                f"a skill has no key {show(unknown[0])} (keys: {', '.join(SKILL_KEYS)})", path=(str(unknown[0]),)
            )
        missing = [key for key in SKILL_KEYS if key in _REQUIRED and key not in node]
        if missing:
            raise InvalidInput(f"a skill needs {show(missing[0])}", path=(missing[0],))
        iri = node["@id"]
        if type(iri) is not str or not is_valid_iri(iri):
            raise InvalidInput(f"a skill's @id is an IRI (scheme:rest), not {show(iri)}", path=("@id",))
        kind = next((k for k, types in KINDS.items() if node["@type"] == types), None)
        if kind is None:
            raise InvalidInput(
                f"skill {iri}: @type is {show(KINDS[ATOMIC])} or {show(KINDS[COMPOSITE])}, not {show(node['@type'])}",
                path=("@type",),
            )
        name = _text(node, "name", iri, one_line=True)
        what = _text(node, "what", iri)
        trigger = _text(node, "trigger", iri)
        steps = _steps(node["steps"], iri)
        schema = _schema(node["inputSchema"], iri)
        links = {key: _links(node, key, iri) for key in LINK_KEYS}
        if kind == COMPOSITE and not links["composedOf"]:
            raise InvalidInput(f"skill {iri}: a composite skill names its parts in composedOf", path=("composedOf",))
        if kind == ATOMIC and links["composedOf"]:
            raise InvalidInput(f"skill {iri}: an atomic skill has no composedOf", path=("composedOf",))
        key_id = _signature(node.get("signature"), iri) if "signature" in node else None
        metadata = _metadata(node["metadata"], iri) if "metadata" in node else {}
        return cls(
            node=node,
            iri=iri,
            kind=kind,
            name=name,
            what=what,
            trigger=trigger,
            steps=steps,
            input_schema=schema,
            prerequisites=links["prerequisite"],
            alternatives=links["alternative"],
            components=links["composedOf"],
            key_id=key_id,
            metadata=metadata,
        )


def skill_node(
    iri: str,
    *,
    name: str,
    what: str,
    trigger: str,
    steps: list[tuple[str, str]],
    input_schema: dict[str, Any] | None = None,
    kind: str = ATOMIC,
    prerequisites: list[str] | None = None,
    alternatives: list[str] | None = None,
    components: list[str] | None = None,
) -> dict[str, Any]:
    """Build an unsigned skill node in canonical key order (checked: raises ``InvalidInput``).

    ``steps`` are ``(title, instructions)`` pairs; ``input_schema`` None means
    the skill takes no input (:data:`NO_INPUT`).
    """
    if kind not in KINDS:
        raise InvalidInput(f"a skill's kind is {show(ATOMIC)} or {show(COMPOSITE)}, not {show(kind)}", path=("@type",))
    node: dict[str, Any] = {
        "@id": iri,
        "@type": list(KINDS[kind]),
        "name": name,
        "what": what,
        "trigger": trigger,
        "steps": [
            {"@type": STEP_TYPE, "order": i, "title": title, "instructions": instructions}
            for i, (title, instructions) in enumerate(steps, 1)
        ],
        "inputSchema": {"@type": "@json", "@value": dict(NO_INPUT) if input_schema is None else input_schema},
    }
    for key, iris in zip(LINK_KEYS, (prerequisites, alternatives, components), strict=True):
        if iris:
            node[key] = [{"@id": target} for target in iris]
    Skill.from_node(node)
    return node


# -- the checks ---------------------------------------------------------------------


def _text(node: dict[str, Any], key: str, iri: str, *, one_line: bool = False) -> str:
    value = node[key]
    if type(value) is not str or not value.strip():
        raise InvalidInput(f"skill {iri}: {key} is non-empty text, not {show(value)}", path=(key,))
    if one_line and ("\n" in value or "\r" in value):
        raise InvalidInput(f"skill {iri}: {key} is one line", path=(key,))
    return value


def _steps(raw: object, iri: str) -> tuple[SkillStep, ...]:
    if type(raw) is not list or not raw:
        raise InvalidInput(f"skill {iri}: steps is a non-empty list", path=("steps",))
    steps = []
    for i, step in enumerate(raw):
        where: tuple[str | int, ...] = ("steps", i)
        if type(step) is not dict or set(step) != _STEP_KEYS:
            raise InvalidInput(
                f"skill {iri}: step {i + 1} is an object with exactly {sorted(_STEP_KEYS)}", path=where
            )
        if step["@type"] != STEP_TYPE:
            raise InvalidInput(f"skill {iri}: step {i + 1} has @type {show(STEP_TYPE)}", path=(*where, "@type"))
        if type(step["order"]) is not int or step["order"] != i + 1:
            raise InvalidInput(
                f"skill {iri}: step {i + 1} has order {i + 1}, not {show(step['order'])}", path=(*where, "order")
            )
        title, instructions = step["title"], step["instructions"]
        if type(title) is not str or not title.strip() or "\n" in title or "\r" in title:
            raise InvalidInput(f"skill {iri}: step {i + 1}'s title is one non-empty line", path=(*where, "title"))
        if type(instructions) is not str:
            raise InvalidInput(
                f"skill {iri}: step {i + 1}'s instructions are text", path=(*where, "instructions")
            )
        steps.append(SkillStep(i + 1, title, instructions))
    return tuple(steps)


def _schema(raw: object, iri: str) -> dict[str, Any]:
    if type(raw) is not dict or set(raw) != {"@type", "@value"} or raw["@type"] != "@json":
        raise InvalidInput(
            f"skill {iri}: inputSchema is a JSON literal {{'@type': '@json', '@value': <schema>}}",
            path=("inputSchema",),
        )
    schema = raw["@value"]
    if type(schema) is not dict:
        raise InvalidInput(f"skill {iri}: the input schema is a JSON object", path=("inputSchema", "@value"))
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        where = "/".join(str(p) for p in exc.absolute_path)
        raise InvalidInput(
            f"skill {iri}: the input schema is not a valid JSON Schema (draft 2020-12) at '/{where}': {exc.message}",
            path=("inputSchema", "@value", *exc.absolute_path),
        ) from None
    return schema


def _links(node: dict[str, Any], key: str, iri: str) -> tuple[str, ...]:
    if key not in node:
        return ()
    raw = node[key]
    if type(raw) is not list or not raw:
        raise InvalidInput(f"skill {iri}: {key} is a non-empty list of {{'@id': iri}} (omit it when empty)", path=(key,))
    out: list[str] = []
    for i, link in enumerate(raw):
        target = link.get("@id") if type(link) is dict and set(link) == {"@id"} else None
        if type(target) is not str or not is_valid_iri(target):
            raise InvalidInput(f"skill {iri}: {key}[{i}] is {{'@id': iri}}, not {show(link)}", path=(key, i))
        if target in out:
            raise InvalidInput(f"skill {iri}: {key} names {target} twice", path=(key, i))
        out.append(target)
    return tuple(out)


def _metadata(raw: object, iri: str) -> dict[str, Any]:
    if type(raw) is not dict or set(raw) != {"@type", "@value"} or raw["@type"] != "@json":
        raise InvalidInput(
            f"skill {iri}: metadata is a JSON literal {{'@type': '@json', '@value': {{...}}}}", path=("metadata",)
        )
    value = raw["@value"]
    if type(value) is not dict or not value:
        raise InvalidInput(f"skill {iri}: metadata holds a non-empty JSON object (omit it when empty)",
                           path=("metadata", "@value"))
    return value


def _signature(raw: object, iri: str) -> str:
    if type(raw) is not dict or set(raw) != {"algorithm", "keyId", "value"}:
        raise InvalidInput(
            f"skill {iri}: signature is {{'algorithm', 'keyId', 'value'}}", path=("signature",)
        )
    if raw["algorithm"] != SIGNATURE_ALGORITHM:
        raise InvalidInput(
            f"skill {iri}: the signature algorithm is {SIGNATURE_ALGORITHM}, not {show(raw['algorithm'])}",
            path=("signature", "algorithm"),
        )
    if type(raw["value"]) is not str:
        raise InvalidInput(f"skill {iri}: the signature value is text", path=("signature", "value"))
    return check_key_id(raw["keyId"])

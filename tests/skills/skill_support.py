"""Shared helpers of the skill tests: keys, example files and hypothesis strategies."""

from __future__ import annotations

import string
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import strategies as st

from gliding_actors.skills import Keyring, skill_node
from gliding_actors.skills._markdown import TABLE_TYPES

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((REPO / "scenarios" / "skills").glob("*.md"))

# Fixed seeds, so a failure names the same signature every run.
LEAD = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
OTHER = Ed25519PrivateKey.from_private_bytes(bytes(range(1, 33)))
KEYRING = Keyring({"lead": LEAD.public_key(), "other": OTHER.public_key()})


def rotate_node() -> dict[str, Any]:
    """A small skill with every kind of field (schema, links)."""
    return skill_node(
        "skill:rotate",
        name="Rotate keys",
        what="Rotate the signing keys.\nWithout downtime.",
        trigger="A key is older than 90 days.",
        steps=[("Generate", "Make a new pair."), ("Publish", "Add it to the JWKS.\nWait max-age."), ("Switch", "")],
        input_schema={
            "type": "object",
            "properties": {
                "service": {"type": "string", "minLength": 1},
                "ttl": {"type": "number", "minimum": 0.5},
                "tags": {"type": "array", "items": {"type": "string"}},
                "dry_run": {"type": "boolean"},
            },
            "required": ["service"],
            "additionalProperties": False,
        },
        prerequisites=["skill:keygen"],
        alternatives=["skill:revoke", "skill:reissue"],
    )


# -- strategies: Markdown-friendly skills ------------------------------------------

_WORDS = string.ascii_letters + string.digits + " .,;:()'-/"
line = st.text(_WORDS, min_size=1, max_size=30).map(str.strip).filter(bool)
text = st.lists(line, min_size=1, max_size=3).map("\n".join)
prose = st.lists(text, min_size=1, max_size=2).map("\n\n".join)
_LOWER = string.ascii_lowercase
iri = st.builds("skill:{}{}".format, st.sampled_from(_LOWER), st.text(_LOWER + string.digits + "-", max_size=12))
name = st.builds("{}{}".format, st.sampled_from(_LOWER), st.text(_LOWER + string.digits + "_", max_size=10))


@st.composite
def table_schemas(draw: st.DrawFn) -> dict[str, Any]:
    names = draw(st.lists(name, unique=True, max_size=4))
    properties: dict[str, Any] = {}
    for n in names:
        spec: dict[str, Any] = {"type": draw(st.sampled_from(TABLE_TYPES))}
        if draw(st.booleans()):
            spec["description"] = draw(line)
        properties[n] = spec
    required = [n for n in names if draw(st.booleans())]
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


block_schemas = st.fixed_dictionaries(
    {"type": st.just("object"), "properties": st.dictionaries(name, st.fixed_dictionaries(
        {"type": st.sampled_from(("string", "integer")), "maximum": st.integers(0, 10**6)}), max_size=3)},
    optional={"minProperties": st.integers(0, 3)},
)


@st.composite
def skills(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(("atomic", "composite")))
    links = draw(st.lists(iri, unique=True, max_size=6))
    cut1, cut2 = sorted(draw(st.lists(st.integers(0, len(links)), min_size=2, max_size=2)))
    prerequisites, alternatives, parts = links[:cut1], links[cut1:cut2], links[cut2:]
    if kind == "composite" and not parts:
        parts = ["skill:part"] if "skill:part" not in links else ["skill:part-2"]
    if kind == "atomic":
        parts = []
    schema = draw(st.one_of(st.none(), table_schemas(), block_schemas))
    steps = draw(st.lists(st.tuples(line, st.one_of(st.just(""), text)), min_size=1, max_size=5))
    return skill_node(
        draw(iri),
        name=draw(line),
        what=draw(prose),
        trigger=draw(prose),
        steps=steps,
        input_schema=schema,
        kind=kind,
        prerequisites=prerequisites,
        alternatives=alternatives,
        components=parts,
    )

"""The invocation guard: a skill is handed over for use only when it is signed
by a trusted key, well-formed, and the input fits its schema.

The order matters. The signature is checked first, over the node exactly as
stored: until it holds, nothing in the node — its schema included — may be
believed, so validating input against an unverified schema would be checking
against whatever an attacker wrote. Then the node's shape, then the input.
Every refusal is a typed error raised before anything runs: a
:class:`SignatureError` naming the key, an :class:`InvalidInput` whose
``path`` and message name the failing JSON path of the input (``$.targets[2]``).
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError, best_match

from gliding_actors.errors import InvalidInput
from gliding_actors.l0._canonical import JSON_ERRORS, canonical
from gliding_actors.skills._model import Skill
from gliding_actors.skills._signing import Keyring, verify_skill

__all__ = ["Invocation", "check_invocation", "json_path", "validate_input"]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


@dataclass(frozen=True)
class Invocation:
    """A skill cleared for use: the checked skill, a private copy of the input, and who signed it."""

    skill: Skill
    inputs: Any
    key_id: str


def json_path(path: tuple[str | int, ...]) -> str:
    """``("a", 0, "b c")`` → ``$.a[0]["b c"]`` (JSONPath, as jsonschema prints it)."""
    out = "$"
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _NAME.match(part):
            out += f".{part}"
        else:
            out += f"[{json.dumps(part, ensure_ascii=False)}]"
    return out


def _where(error: ValidationError) -> tuple[str | int, ...]:
    """The input path an error is about; for a missing or unexpected key, that key's own path."""
    path: tuple[str | int, ...] = tuple(error.absolute_path)
    instance = error.instance
    if error.validator == "required" and isinstance(instance, dict) and isinstance(error.validator_value, list):
        missing = [name for name in error.validator_value if name not in instance]
        if missing:
            return (*path, str(missing[0]))
    if error.validator == "additionalProperties" and isinstance(instance, dict) and isinstance(error.schema, dict):
        known = error.schema.get("properties", {})
        patterns = error.schema.get("patternProperties", {})
        extra = sorted(
            key for key in instance
            if key not in known and not any(re.search(p, key) for p in patterns)
        )
        if extra:
            return (*path, extra[0])
    return path


def validate_input(skill: Skill, inputs: object) -> None:
    """Raise :class:`InvalidInput` naming the failing JSON path unless ``inputs`` fits the skill's schema."""
    try:
        canonical(inputs)
    except JSON_ERRORS as exc:
        raise InvalidInput(f"skill {skill.iri}: the input is not plain JSON: {exc}") from None
    validator = Draft202012Validator(skill.input_schema, format_checker=Draft202012Validator.FORMAT_CHECKER)
    error = best_match(validator.iter_errors(inputs))
    if error is None:
        return
    path = _where(error)
    raise InvalidInput(f"skill {skill.iri}: input {json_path(path)}: {error.message}", path=path)


def check_invocation(node: object, inputs: object, keyring: Keyring) -> Invocation:
    """Signature (trusted key, matching content), then shape, then input; an :class:`Invocation` or a typed error."""
    key_id = verify_skill(node, keyring)
    skill = Skill.from_node(node)
    validate_input(skill, inputs)
    return Invocation(skill, copy.deepcopy(inputs), key_id)

"""The JSON Schema (Draft 2020-12) of a scenario file, built from the op table.

The schema is derived, never hand-maintained: each op's arguments and ``expect``
keys come from :mod:`._opspecs`, so registering an op extends the format without
touching this module. It is rebuilt when the registry changes.

The shape favours precise error messages over compactness: a step dispatches on
``parallel`` with ``if``/``then``/``else`` and on ``op`` with one ``if``/``then``
per op (never ``oneOf``/``anyOf``, whose failures say only "not valid under any
of the given schemas"), and every mapping is closed with
``additionalProperties: false`` because the spec makes unknown keys an error.
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
from collections.abc import Mapping
from typing import Any

import jsonschema
from jsonschema import Draft202012Validator

from gliding_actors import errors
from gliding_actors.scenario._model import FORMAT_V1
from gliding_actors.scenario._opspecs import (
    EXPECTATION_FORMS,
    ROLES,
    OpSpec,
    op_specs,
    registry_key,
)

__all__ = [
    "EXPECTATION_FORMS",
    "SCHEMA_DIALECT",
    "ScenarioValidator",
    "ScenarioValidators",
    "build_scenario_schema",
    "build_scenario_validators",
    "error_names",
    "expectation_schema",
    "op_step_schema",
    "scenario_schema",
    "scenario_validator",
    "scenario_validators",
]

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"


def _is_strict_integer(checker: Any, instance: Any) -> bool:
    # JSON Schema calls 1.0 an integer; the format's integers (versions, counts,
    # seeds) feed code that indexes and compares with ints, so 1.0 is refused.
    return isinstance(instance, int) and not isinstance(instance, bool)


#: Draft 2020-12 with ``integer`` meaning a real int (not 1.0, not a bool).
ScenarioValidator: Any = jsonschema.validators.extend(  # type: ignore[no-untyped-call]
    Draft202012Validator,
    type_checker=Draft202012Validator.TYPE_CHECKER.redefine("integer", _is_strict_integer),
)


def error_names() -> tuple[str, ...]:
    """Every error class name an ``expect: {error: NAME}`` may name.

    Taken from :mod:`gliding_actors.errors` so a new error class is accepted as
    soon as it exists, and a misspelt name is caught at load time instead of
    failing the step with a puzzling mismatch.
    """
    names = [
        name
        for name, obj in vars(errors).items()
        if inspect.isclass(obj) and issubclass(obj, errors.GlidingError)
    ]
    return tuple(sorted(names))


def _countable(fragment: Mapping[str, Any]) -> bool:
    kind = fragment.get("type")
    kinds = kind if isinstance(kind, list) else [kind]
    return any(k in ("integer", "number", "array") for k in kinds)


def expectation_schema(spec: OpSpec, *, nullable: bool = True) -> dict[str, Any]:
    """Schema of an ``expect`` mapping for ``spec``: its result keys plus the forms."""
    results = {key: copy.deepcopy(dict(frag)) for key, frag in spec.results.items()}
    forms: dict[str, Any] = {
        "error": {"type": "string", "enum": list(error_names())},
        "value_in": {"type": "array"},
        "state_in": {"type": "array", "items": {"type": "string"}},
        "contains": {"type": "array"},
        "excludes": {"type": "array"},
        "max_tokens": {"type": "integer", "minimum": 0},
        "count": {"type": "integer", "minimum": 0},
        "at_least": {
            "type": "object",
            # A number key >= N, or a list key's length >= N.
            "properties": {
                key: {"type": "number"} for key in spec.results if _countable(spec.results[key])
            },
            "additionalProperties": False,
        },
        "same_as": {"type": "string", "minLength": 1},
    }
    assert set(forms) == set(EXPECTATION_FORMS)
    return {
        "type": ["object", "null"] if nullable else "object",
        "properties": {**results, **forms},
        "additionalProperties": False,
    }


def op_step_schema(spec: OpSpec) -> dict[str, Any]:
    """Schema of one ``{op: NAME, ...}`` step: the op's args plus the step keys."""
    args = copy.deepcopy(dict(spec.args_schema))
    properties: dict[str, Any] = {"op": {"const": spec.name}}
    required = ["op"]
    if spec.takes_agent:
        properties["agent"] = {"type": "string", "minLength": 1}
        required.append("agent")
    properties.update(args.get("properties", {}))
    properties["expect"] = expectation_schema(spec)
    properties["as"] = {"type": "string", "minLength": 1}
    required.extend(args.get("required", ()))
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


def _def_name(op: str) -> str:
    return f"op:{op}"


def _agent_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "id": {"type": "string", "minLength": 1},
            "role": {"type": "string", "enum": list(ROLES)},
        },
        "required": ["id", "role"],
        "additionalProperties": False,
    }


def _parallel_step_schema(member: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "properties": {"parallel": {"type": "array", "minItems": 1, "items": dict(member)}},
        "required": ["parallel"],
        "additionalProperties": False,
    }


#: A parallel member that is itself a block would otherwise be read as an op
#: without 'op'; this lets the loader say what it really is.
_NOT_NESTED: dict[str, Any] = {"not": {"type": "object", "required": ["parallel"]}}


def _op_name_schema(table: Mapping[str, OpSpec]) -> dict[str, Any]:
    return {"required": ["op"], "properties": {"op": {"type": "string", "enum": list(table)}}}


def _document_schema(
    table: Mapping[str, OpSpec], step: Mapping[str, Any], defs: Mapping[str, Any]
) -> dict[str, Any]:
    final_lines = expectation_schema(table["inspect"], nullable=False) if "inspect" in table else {}
    final_session = (
        expectation_schema(table["session"], nullable=False) if "session" in table else {}
    )
    return {
        "$schema": SCHEMA_DIALECT,
        "$id": "https://gliding-actors.invalid/scenario@1.schema.json",
        "title": "gliding-actors scenario file, format v1",
        "type": "object",
        "properties": {
            "format": {"const": FORMAT_V1},
            "name": {"type": "string"},
            "description": {"type": ["string", "null"]},
            "seed": {"type": "integer", "minimum": 0},
            # Contents are checked by Config.from_dict, which knows the sections.
            "config": {"type": ["object", "null"]},
            "agents": {"type": "array", "items": _agent_schema()},
            "steps": {"type": "array", "items": dict(step)},
            "final": {
                "type": ["object", "null"],
                "properties": {
                    "lines": {"type": ["object", "null"], "additionalProperties": final_lines},
                    "session": {"type": ["object", "null"], "additionalProperties": final_session},
                },
                "additionalProperties": False,
            },
        },
        "required": ["format", "name", "agents", "steps"],
        "additionalProperties": False,
        "$defs": dict(defs),
    }


def build_scenario_schema(specs: Mapping[str, OpSpec] | None = None) -> dict[str, Any]:
    """The whole-file schema for the given op table (default: the registry).

    Self-contained, so it can be published for editors and other tools. The
    loader applies the same rules piecewise (see :class:`ScenarioValidators`).
    """
    table = dict(specs if specs is not None else op_specs())
    defs: dict[str, Any] = {_def_name(name): op_step_schema(spec) for name, spec in table.items()}
    defs["op_step"] = {
        **_op_name_schema(table),
        "allOf": [
            {
                "if": {"properties": {"op": {"const": name}}, "required": ["op"]},
                "then": {"$ref": f"#/$defs/{_def_name(name)}"},
            }
            for name in table
        ],
    }
    defs["parallel_member"] = {"type": "object", **_NOT_NESTED, "$ref": "#/$defs/op_step"}
    defs["parallel_step"] = _parallel_step_schema({"$ref": "#/$defs/parallel_member"})
    defs["step"] = {
        "type": "object",
        "if": {"required": ["parallel"]},
        "then": {"$ref": "#/$defs/parallel_step"},
        "else": {"$ref": "#/$defs/op_step"},
    }
    return _document_schema(table, {"$ref": "#/$defs/step"}, defs)


@dataclasses.dataclass(frozen=True)
class ScenarioValidators:
    """The whole-file rules, split so the loader can dispatch on ``op`` itself.

    In the whole-file schema every step is tried against one ``if``/``then`` per
    op, which jsonschema evaluates one by one (about 5 ms a step with the v1
    table). The loader instead validates the document with each step only
    checked to be a mapping, then each step against its own op's schema; the
    rules are the same, the cost is one schema per step.
    """

    #: The file, with each step only checked to be a mapping.
    document: Any
    #: A ``{parallel: [...]}`` step, with each member only checked to be a
    #: mapping that is not itself a block.
    parallel: Any
    #: Op name -> the validator of a step with that op.
    ops: Mapping[str, Any]
    #: A step whose ``op`` is missing or not a known op name.
    op_name: Any


def build_scenario_validators(specs: Mapping[str, OpSpec] | None = None) -> ScenarioValidators:
    """Piecewise validators for the given op table (default: the registry)."""
    table = dict(specs if specs is not None else op_specs())

    def make(schema: dict[str, Any]) -> Any:
        schema = {"$schema": SCHEMA_DIALECT, **schema}
        ScenarioValidator.check_schema(schema)
        return ScenarioValidator(schema)

    return ScenarioValidators(
        document=make(_document_schema(table, {"type": "object"}, {})),
        parallel=make(_parallel_step_schema({"type": "object", **_NOT_NESTED})),
        ops={name: make(op_step_schema(spec)) for name, spec in table.items()},
        op_name=make(_op_name_schema(table)),
    )


_CACHE: dict[str, Any] = {}


def scenario_schema() -> dict[str, Any]:
    """The whole-file schema for the current registry (rebuilt after ``register_op_spec``).

    Returns a fresh copy: callers may keep or mutate it without affecting loads.
    """
    return copy.deepcopy(_cached("schema"))


def scenario_validator() -> Any:
    """A validator of the whole-file schema for the current registry."""
    return _cached("validator")


def scenario_validators() -> ScenarioValidators:
    """The loader's piecewise validators for the current registry, reused between loads."""
    found: ScenarioValidators = _cached("validators")
    return found


def _cached(what: str) -> Any:
    key = registry_key()
    if _CACHE.get("key") != key:
        _CACHE.clear()
        _CACHE["key"] = key
    if what not in _CACHE:
        if what == "validators":
            _CACHE[what] = build_scenario_validators()
        else:
            schema = _CACHE.get("schema") or build_scenario_schema()
            ScenarioValidator.check_schema(schema)
            _CACHE["schema"] = schema
            _CACHE["validator"] = ScenarioValidator(schema)
    return _CACHE[what]

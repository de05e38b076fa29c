"""Steps 2 and 3 of :mod:`._loader`: check a parsed document's structure, config and meaning.

Each check returns every positioned issue it finds; the loader raises the first in file order.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from gliding_actors.config import Config
from gliding_actors.errors import ConfigError
from gliding_actors.scenario._opspecs import get_op_spec, op_names
from gliding_actors.scenario._paths import (
    LineCol,
    PathT,
    _did_you_mean,
    _get,
    _Issue,
    _issue,
    _mapping_issue,
    _name,
    _Positions,
    _show,
    _step_op,
    _step_path,
    _where,
)
from gliding_actors.scenario._schema import scenario_validators

# --------------------------------------------------------------------------- structure


def _schema_issues(data: dict[str, Any], pos: _Positions) -> list[_Issue]:
    """Every schema error, dispatching each step to its own op's validator."""
    validators = scenario_validators()
    issues: list[_Issue] = []

    def check(validator: Any, instance: Any, prefix: PathT) -> None:
        for error in validator.iter_errors(instance):
            issues.extend(_translate(error, prefix, data, pos))

    def check_op(step: dict[str, Any], prefix: PathT) -> None:
        op = step.get("op")
        validator = validators.ops.get(op) if isinstance(op, str) else None
        check(validator if validator is not None else validators.op_name, step, prefix)

    check(validators.document, data, ())
    steps = data.get("steps")
    for index, step in enumerate(steps if isinstance(steps, list) else ()):
        if not isinstance(step, dict):
            continue  # reported by the document validator
        if "parallel" in step:
            check(validators.parallel, step, ("steps", index))
            members = step["parallel"]
            for member, op in enumerate(members if isinstance(members, list) else ()):
                if isinstance(op, dict):
                    check_op(op, ("steps", index, "parallel", member))
        else:
            check_op(step, ("steps", index))
    return issues


def _translate(error: Any, prefix: PathT, data: Any, pos: _Positions) -> Iterator[_Issue]:
    """Turn one jsonschema error (on the instance at ``prefix``) into positioned issues."""
    path: PathT = (*prefix, *error.absolute_path)
    kind = error.validator
    instance = error.instance
    schema = error.schema if isinstance(error.schema, Mapping) else {}
    name = _name(path)

    if kind == "additionalProperties" and isinstance(instance, Mapping):
        allowed = sorted(schema.get("properties", {}))
        for key in instance:
            if key not in allowed:
                yield _issue(
                    pos, (*path, key), _unknown_key_message(key, path, allowed, data), at_key=True
                )
        return
    if kind == "required" and isinstance(instance, Mapping):
        for rank, key in enumerate(error.validator_value):
            if key not in instance:
                yield _mapping_issue(
                    pos, path, _missing_key_message(key, path, instance, data), rank
                )
        return
    if kind == "type":
        expected = error.validator_value
        types = expected if isinstance(expected, list) else [expected]
        wanted = " or ".join(_TYPE_WORDS.get(str(t), str(t)) for t in types)
        # rank -1: when a value has the wrong type, say that before what it should equal.
        yield _issue(pos, path, f"{name} must be {wanted}, got {_show(instance)}", rank=-1)
        return
    if kind == "enum":
        options = [str(o) for o in error.validator_value]
        if path and path[-1] == "op" and _step_path(path[:-1]) is not None:
            yield _issue(pos, path, _unknown_op_message(instance))
            return
        hint = _did_you_mean(instance, options)
        shown = ", ".join(options)
        if path and path[-1] == "error":
            yield _issue(
                pos,
                path,
                f"'error' must name an error class ({shown}), got {_show(instance)}{hint}",
            )
            return
        yield _issue(pos, path, f"{name} must be one of {shown}; got {_show(instance)}{hint}")
        return
    if kind == "const":
        yield _issue(
            pos, path, f"{name} must be {_show(error.validator_value)}, got {_show(instance)}"
        )
        return
    if kind in _RELATIONS:
        relation = _RELATIONS[kind]
        yield _issue(
            pos, path, f"{name} must be {relation} {error.validator_value}, got {_show(instance)}"
        )
        return
    if kind == "minLength":
        yield _issue(pos, path, f"{name} must not be empty")
        return
    if kind == "minItems":
        if path and path[-1] == "parallel":
            yield _issue(pos, path, "'parallel' needs at least one op")
        else:
            yield _issue(pos, path, f"{name} needs at least {error.validator_value} item(s)")
        return
    if kind == "pattern":
        described = schema.get("description") or f"a string matching {error.validator_value}"
        yield _issue(pos, path, f"{name} must be {described}, got {_show(instance)}")
        return
    if kind == "not" and isinstance(instance, Mapping) and "parallel" in instance:
        yield _issue(
            pos,
            (*path, "parallel"),
            "a 'parallel' block cannot be nested inside another",
            at_key=True,
        )
        return
    yield _issue(pos, path, f"{name}: {error.message}")


#: JSON Schema's bound keywords, as the relation the value must bear to the bound
_RELATIONS = {"minimum": ">=", "maximum": "<=", "exclusiveMinimum": ">", "exclusiveMaximum": "<"}
_TYPE_WORDS = {
    "object": "a mapping",
    "array": "a list",
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "null": "null",
}


def _unknown_key_message(key: str, path: PathT, allowed: Sequence[str], data: Any) -> str:
    step = _step_path(path)
    if step is not None:
        op = _step_op(data, path)
        if key == "agent" and op is not None and not get_op_spec(op).takes_agent:
            return f"op '{op}' takes no agent (remove 'agent')"
        if key == "op" and "parallel" in (_get(data, path) or {}):
            return f"a step is either an op or a 'parallel' block, not both (unexpected 'op' in {_name(path)})"
    hint = _did_you_mean(key, allowed).strip()
    hint = f"{hint.strip('()')}; " if hint else ""
    return f"unknown key '{key}' {_where(path, data)} ({hint}allowed: {', '.join(allowed)})"


def _missing_key_message(key: str, path: PathT, instance: Mapping[str, Any], data: Any) -> str:
    step = _step_path(path)
    if step is not None:
        if key == "op":
            inner = step[1] is not None
            return f"{_name(path)} has no 'op'" + (
                "" if inner else " (and is not a 'parallel' block)"
            )
        op = _step_op(data, path)
        if key == "agent" and op is not None:
            return f"op '{op}' needs an 'agent'"
    return f"missing required key '{key}' {_where(path, data)}"


def _unknown_op_message(op: Any) -> str:
    if not isinstance(op, str):
        return f"'op' must be an op name, got {_show(op)}"
    hint = _did_you_mean(op, op_names())
    if hint:
        return f"unknown op '{op}'{hint}"
    return f"unknown op '{op}' (known ops: {', '.join(op_names())})"


# --------------------------------------------------------------------------- config


def _config_issues(data: dict[str, Any], pos: _Positions) -> list[_Issue]:
    raw = data.get("config")
    try:
        Config.from_dict(raw)
    except ConfigError as exc:
        path = _config_path(raw, exc.path)
        message = exc.message if "config" in exc.message else f"config {exc.message}"
        at_key = bool(path) and not _config_key_known(path)  # the key is unknown, not its value bad
        return [_issue(pos, ("config", *path), message, at_key=at_key)]
    return []


def _config_path(raw: Any, path: Sequence[str | int]) -> PathT:
    """ConfigError paths name list items as strings ("0"); make them list indices."""
    out: list[str | int] = []
    node = raw
    for part in path:
        if isinstance(node, list) and isinstance(part, str) and part.isdigit():
            out.append(int(part))
        else:
            out.append(part)
        node = _get(node, (out[-1],))
    return tuple(out)


def _config_key_known(path: PathT) -> bool:
    """Is the last element of ``path`` a real config field (so the value is wrong, not the key)?"""
    cls: Any = Config
    for part in path:
        if not dataclasses.is_dataclass(cls):
            return True
        fields = {f.name for f in dataclasses.fields(cls)}
        if part not in fields:
            return False
        cls = typing.get_type_hints(cls)[part]
    return True


# --------------------------------------------------------------------------- meaning


def _semantic_issues(data: dict[str, Any], pos: _Positions) -> list[_Issue]:
    issues: list[_Issue] = []
    agents: dict[str, LineCol] = {}
    for index, agent in enumerate(data["agents"]):
        path: PathT = ("agents", index, "id")
        if agent["id"] in agents:
            first = agents[agent["id"]]
            issues.append(
                _issue(
                    pos,
                    path,
                    f"duplicate agent id '{agent['id']}' (first declared at line {first[0]})",
                )
            )
        else:
            agents[agent["id"]] = pos.value(path)

    labels: dict[str, LineCol] = {}
    later: dict[str, LineCol] = {}
    # Every label with its position, to tell "defined later" from "never defined".
    for op_path, op in _iter_ops(data):
        if isinstance(op.get("as"), str):
            later.setdefault(op["as"], pos.value((*op_path, "as")))

    def check_op(op: Mapping[str, Any], step: PathT, visible: Mapping[str, LineCol]) -> None:
        spec = get_op_spec(op["op"])
        agent = op.get("agent")
        if spec.takes_agent and isinstance(agent, str) and agent not in agents:
            issues.append(_issue(pos, (*step, "agent"), _undeclared_agent(agent, agents)))
        target = op.get("target")
        if op["op"] == "crash" and isinstance(target, str) and target.startswith(("agent:", "l1:")):
            crashed = target.split(":", 1)[1]
            if crashed not in agents:
                issues.append(_issue(pos, (*step, "target"), _undeclared_agent(crashed, agents)))
        expect = op.get("expect")
        if isinstance(expect, Mapping) and "same_as" in expect:
            issues.extend(
                _check_same_as(expect["same_as"], (*step, "expect", "same_as"), visible, later, pos)
            )

    for index, step in enumerate(data["steps"]):
        step_path: PathT = ("steps", index)
        if "parallel" in step:
            block: dict[str, LineCol] = {}
            for member, op in enumerate(step["parallel"]):
                member_path: PathT = (*step_path, "parallel", member)
                spec = get_op_spec(op["op"])
                if spec.control:
                    issues.append(
                        _issue(
                            pos,
                            (*member_path, "op"),
                            f"control op '{op['op']}' cannot run inside 'parallel' "
                            "(advance, quiesce and check act on the whole run; put it before or after the block)",
                        )
                    )
                check_op(op, member_path, labels)
                _add_label(op, member_path, {**labels, **block}, block, pos, issues)
            labels.update(block)
        else:
            check_op(step, step_path, labels)
            _add_label(step, step_path, labels, labels, pos, issues)

    final = data.get("final") or {}
    for agent in final.get("session") or {}:
        if agent not in agents:
            issues.append(
                _issue(
                    pos, ("final", "session", agent), _undeclared_agent(agent, agents), at_key=True
                )
            )
    for section in ("lines", "session"):
        for key, expect in (final.get(section) or {}).items():
            if isinstance(expect, Mapping) and "same_as" in expect:
                where: PathT = ("final", section, key, "same_as")
                issues.extend(_check_same_as(expect["same_as"], where, labels, later, pos))
    return issues


def _iter_ops(data: Mapping[str, Any]) -> Iterator[tuple[PathT, Mapping[str, Any]]]:
    for index, step in enumerate(data["steps"]):
        if "parallel" in step:
            for member, op in enumerate(step["parallel"]):
                yield ("steps", index, "parallel", member), op
        else:
            yield ("steps", index), step


def _add_label(
    op: Mapping[str, Any],
    step: PathT,
    visible: Mapping[str, LineCol],
    into: dict[str, LineCol],
    pos: _Positions,
    issues: list[_Issue],
) -> None:
    label = op.get("as")
    if not isinstance(label, str):
        return
    path = (*step, "as")
    if label in visible:
        first = visible[label]
        issues.append(
            _issue(
                pos, path, f"duplicate label '{label}' (first defined with 'as' at line {first[0]})"
            )
        )
    else:
        into[label] = pos.value(path)


def _check_same_as(
    label: Any,
    path: PathT,
    visible: Mapping[str, LineCol],
    everywhere: Mapping[str, LineCol],
    pos: _Positions,
) -> list[_Issue]:
    if not isinstance(label, str) or label in visible:
        return []
    if label in everywhere:
        line = everywhere[label][0]
        message = (
            f"same_as names '{label}', which is defined only at line {line}; "
            "it must name the 'as' of an earlier step"
        )
    else:
        hint = _did_you_mean(label, list(visible))
        known = f" (labels so far: {', '.join(visible)})" if visible and not hint else ""
        message = f"same_as names '{label}', but no earlier step has 'as: {label}'{hint}{known}"
    return [_issue(pos, path, message)]


def _undeclared_agent(agent: str, agents: Mapping[str, LineCol]) -> str:
    hint = _did_you_mean(agent, list(agents))
    declared = ", ".join(agents) or "none"
    return f"agent '{agent}' is not declared in 'agents'{hint} (declared: {declared})"

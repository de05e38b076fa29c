"""Load a scenario file (format v1) into a :class:`Scenario`, or say exactly what is wrong.

Scenario files are written by hand, so every refusal is a
:class:`~gliding_actors.errors.ScenarioFormatError` pointing at ``FILE:LINE:COL``
of the offending key or value, with a message a person can act on.

How it works, and why:

1. Parse. YAML goes through ruamel.yaml's round-trip loader in YAML 1.2 mode
   (the spec says YAML 1.2, where ``yes``/``no``/``on`` are strings; PyYAML is
   1.1), because it is the one parser that keeps every key's and item's line and
   column. JSON goes through :mod:`json` (so JSON means exactly JSON) and a small
   scanner over the already-validated text records the same positions. Either way
   the result is plain ``dict``/``list``/``str``/``int``/``float``/``bool``/``None``
   plus a map from each data path to its position; no parser types leak out.
2. Structure. The data is validated against the JSON Schema built from the op
   table (:mod:`._schema`). Every schema error is turned into a human message and
   placed on the key or value at fault; the first one in file order is raised, so
   the same file always gets the same error. The ``config`` block is checked by
   :meth:`Config.from_dict`, whose key path is mapped back to a position.
3. Meaning. Checks no schema can express: declared agents, unique ids and labels,
   ``same_as`` pointing backwards, control ops outside ``parallel``.
4. Build the frozen :mod:`._model` objects with 1-based positions.
"""

from __future__ import annotations

import bisect
import dataclasses
import difflib
import functools
import json
import math
import re
import typing
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from gliding_actors.config import Config
from gliding_actors.errors import ConfigError, ScenarioFormatError
from gliding_actors.scenario._model import (
    AgentSpec,
    OpStep,
    ParallelStep,
    Position,
    Scenario,
    Step,
)
from gliding_actors.scenario._opspecs import get_op_spec, op_names, op_specs
from gliding_actors.scenario._schema import scenario_validators

__all__ = ["SCENARIO_SUFFIXES", "load_scenario", "load_scenario_text"]

#: File name endings the loader accepts (case-insensitive), and how each is parsed.
SCENARIO_SUFFIXES: Mapping[str, str] = {".yaml": "yaml", ".yml": "yaml", ".json": "json"}

#: Most nodes a file may expand to. Only reachable through YAML aliases used as an
#: exponential "billion laughs"; a hand-written or recorded scenario is far below.
_MAX_NODES = 2_000_000

PathT = tuple[str | int, ...]
LineCol = tuple[int, int]
_END: LineCol = (1 << 62, 1 << 62)  # sorts after every real position


# =========================================================================== public API


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate the scenario file at ``path``.

    ``.yaml``/``.yml`` files are YAML 1.2 and ``.json`` files are JSON; any other
    ending is refused, because guessing the syntax of a file would turn a typo in
    its name into a confusing parse error. A file that cannot be read at all is
    also reported as a :class:`ScenarioFormatError` (at 1:1), so a command line
    has one error to catch for "this scenario cannot be used".
    """
    file = str(path)
    suffix = Path(file).suffix.lower()
    if Path(file).is_dir():
        raise ScenarioFormatError(
            "this is a directory, not a scenario file", file=file, line=1, col=1
        )
    if suffix not in SCENARIO_SUFFIXES:
        known = ", ".join(SCENARIO_SUFFIXES)
        raise ScenarioFormatError(
            f"unsupported scenario file type {suffix or '(none)'!r}: use one of {known}",
            file=file,
            line=1,
            col=1,
        )
    try:
        raw = Path(file).read_bytes()
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise ScenarioFormatError(
            f"cannot read scenario file: {reason}", file=file, line=1, col=1
        ) from exc
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line, col = _line_col_of_byte(raw, exc.start)
        raise ScenarioFormatError(
            f"the file is not valid UTF-8 (byte 0x{raw[exc.start]:02x})",
            file=file,
            line=line,
            col=col,
        ) from exc
    return _load(text, file, SCENARIO_SUFFIXES[suffix])


def load_scenario_text(text: str, file: str, *, syntax: str | None = None) -> Scenario:
    """Validate scenario ``text``; ``file`` is only used to name it in errors.

    ``syntax`` is ``"yaml"`` or ``"json"``; by default it follows ``file``'s
    ending, and anything that is not ``.json`` is read as YAML (a JSON document
    is also valid YAML 1.2, so this only costs precision in JSON error messages).
    """
    if syntax is None:
        syntax = SCENARIO_SUFFIXES.get(Path(file).suffix.lower(), "yaml")
    if syntax not in ("yaml", "json"):
        raise ValueError(f"syntax must be 'yaml' or 'json', not {syntax!r}")
    return _load(text.removeprefix("\ufeff"), file, syntax)


# =========================================================================== pipeline


class _Fail(Exception):
    """Internal: abort with one positioned message (turned into ScenarioFormatError)."""

    def __init__(self, message: str, at: LineCol, path: PathT = ()) -> None:
        super().__init__(message)
        self.message = message
        self.at = at
        self.path = path


def _load(text: str, file: str, syntax: str) -> Scenario:
    try:
        if not text.strip():
            raise _Fail(
                "the file is empty; a scenario is a mapping with format, name, agents and steps",
                (1, 1),
            )
        try:
            if syntax == "json":
                data, pos = _parse_json(text)
            else:
                data, pos = _parse_yaml(text)
        except RecursionError:
            raise _Fail("the file is nested too deeply to read", (1, 1)) from None
        if data is None:
            raise _Fail(
                "the file is empty; a scenario is a mapping with format, name, agents and steps",
                (1, 1),
            )
        if not isinstance(data, dict):
            raise _Fail(
                f"the top level must be a mapping (format, name, agents, steps), got {_show(data)}",
                (1, 1),
            )
        issues = _schema_issues(data, pos) or _config_issues(data, pos)
        if not issues:
            issues = _semantic_issues(data, pos)
        if issues:
            first = min(issues, key=lambda i: i.order)
            raise _Fail(first.message, first.at, first.path)
        return _build(data, pos, file)
    except _Fail as fail:
        line, col = fail.at
        raise ScenarioFormatError(
            fail.message, file=file, line=line, col=col, path=fail.path
        ) from None


# =========================================================================== positions


@dataclasses.dataclass
class _Positions:
    """Where each part of the parsed data came from (1-based line, column).

    ``values[path]`` is where the value at ``path`` starts; ``keys[path]`` is
    where the mapping key naming that value starts. Lookups fall back to the
    nearest ancestor, so a position always exists (1:1 at worst).
    """

    values: dict[PathT, LineCol] = dataclasses.field(default_factory=dict)
    keys: dict[PathT, LineCol] = dataclasses.field(default_factory=dict)

    def value(self, path: PathT) -> LineCol:
        for n in range(len(path), -1, -1):
            found = self.values.get(path[:n])
            if found is not None:
                return found
        return (1, 1)

    def key(self, path: PathT) -> LineCol:
        return self.keys.get(path) or self.value(path)

    def order(self, path: PathT, last: LineCol | None = None) -> tuple[LineCol, ...]:
        """A file-order sort key: the positions along ``path``, then ``last``.

        Comparing position chains (rather than one position) keeps an error
        about a mapping as a whole (a missing key, passed as ``last=_END``) after
        the errors on keys inside it, which are what a reader sees first.
        """
        chain = [self.value(path[:n]) for n in range(len(path) + 1)]
        if last is not None:
            chain.append(last)
        return tuple(chain)


# --------------------------------------------------------------------------- YAML


@functools.cache
def _yaml_constructor() -> Any:
    """The constructor class, built once (ruamel is imported only when YAML is read)."""
    from ruamel.yaml.constructor import RoundTripConstructor

    class _Constructor(RoundTripConstructor):
        """Round-trip constructor that keeps YAML 1.2 core-schema scalars.

        ruamel resolves ``2024-01-01`` to a date even in 1.2 mode; the 1.2 core
        schema has no timestamps, so such scalars stay the strings they are.
        """

        def construct_as_text(self, node: Any) -> Any:
            return self.construct_scalar(node)

    _Constructor.add_constructor("tag:yaml.org,2002:timestamp", _Constructor.construct_as_text)
    return _Constructor


def _yaml_loader() -> Any:
    """A fresh round-trip loader per file: ruamel loaders keep per-load state."""
    from ruamel.yaml import YAML

    yaml = YAML(typ="rt", pure=True)
    yaml.Constructor = _yaml_constructor()
    yaml.allow_duplicate_keys = False
    return yaml


def _parse_yaml(text: str) -> tuple[Any, _Positions]:
    from ruamel.yaml.error import MarkedYAMLError, YAMLError

    try:
        root = _yaml_loader().load(text)
    except MarkedYAMLError as exc:
        raise _Fail(_yaml_message(exc), _yaml_mark(exc)) from None
    except YAMLError as exc:
        raise _Fail(f"invalid YAML: {exc}", (1, 1)) from None
    except RecursionError:
        raise
    except Exception as exc:  # noqa: BLE001 - a parser bug must still be a format error
        raise _Fail(f"invalid YAML: {type(exc).__name__}: {exc}", (1, 1)) from None
    pos = _Positions()
    start = _yaml_node_start(root)
    pos.values[()] = start if start is not None else (1, 1)
    data = _YamlConverter(pos).convert(root, (), [])
    return data, pos


def _yaml_mark(exc: Any) -> LineCol:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    if mark is None:
        return (1, 1)
    return (int(mark.line) + 1, int(mark.column) + 1)


def _yaml_message(exc: Any) -> str:
    from ruamel.yaml.constructor import DuplicateKeyError

    problem = str(getattr(exc, "problem", "") or "").strip()
    if isinstance(exc, DuplicateKeyError):
        found = re.match(r'found duplicate key "(.*)" with value', problem)
        key = found.group(1) if found else "?"
        first = getattr(exc, "context_mark", None)
        where = f" (the mapping starts at line {first.line + 1})" if first is not None else ""
        return f"duplicate key '{key}'{where}"
    context = str(getattr(exc, "context", "") or "").strip()
    if problem.startswith("but found another document"):
        return "a scenario file holds one YAML document, but a second one starts here"
    message = f"invalid YAML: {problem or context or type(exc).__name__}"
    context_mark = getattr(exc, "context_mark", None)
    if problem and context and context_mark is not None:
        message += f" ({context} started at line {context_mark.line + 1}, column {context_mark.column + 1})"
    return message


def _yaml_node_start(node: Any) -> LineCol | None:
    lc = getattr(node, "lc", None)
    line = getattr(lc, "line", None)
    col = getattr(lc, "col", None)
    if isinstance(line, int) and isinstance(col, int):
        return (line + 1, col + 1)
    return None


def _yaml_key_value_lc(
    node: Any, key: Any, seen: set[int] | None = None
) -> tuple[LineCol, LineCol] | None:
    """Positions of ``key`` and its value in a ruamel mapping, following ``<<`` merges."""
    data = getattr(getattr(node, "lc", None), "data", None) or {}
    entry = data.get(key) if isinstance(data, dict) else None
    if entry is not None and len(entry) >= 4:
        return (entry[0] + 1, entry[1] + 1), (entry[2] + 1, entry[3] + 1)
    seen = seen if seen is not None else set()
    seen.add(id(node))
    for source in getattr(node, "merge", None) or ():
        if isinstance(source, tuple) and len(source) == 2:
            source = source[1]
        if id(source) in seen or not isinstance(source, Mapping):
            continue
        found = _yaml_key_value_lc(source, key, seen)
        if found is not None:
            return found
    return None


class _YamlConverter:
    """Turns ruamel's round-trip tree into plain data, recording positions."""

    def __init__(self, pos: _Positions) -> None:
        self.pos = pos
        self.nodes = 0

    def convert(self, node: Any, path: PathT, stack: list[int]) -> Any:
        self.nodes += 1
        if self.nodes > _MAX_NODES:
            raise _Fail(
                f"the file expands to more than {_MAX_NODES} values (aliases?)",
                self.pos.value(path),
            )
        at = self.pos.value(path)
        if node is None or isinstance(node, bool):
            return None if node is None else bool(node)
        if isinstance(node, int):
            return int(node)
        if isinstance(node, float):
            if not math.isfinite(node):
                raise _Fail(
                    f"{_name(path)} must be a finite number, got {node!r} (JSON has no {node!r})",
                    at,
                    path,
                )
            return float(node)
        if isinstance(node, str):
            return str(node)
        self._check_tag(node, at, path)
        if id(node) in stack:
            raise _Fail("an alias refers to a collection that contains it (a cycle)", at, path)
        if isinstance(node, Mapping):
            return self._mapping(node, path, [*stack, id(node)])
        if isinstance(node, list):
            return self._sequence(node, path, [*stack, id(node)])
        what = type(node).__name__
        if isinstance(node, (bytes, bytearray)):
            what = "binary data (!!binary)"
        elif "Set" in what:
            what = "a set (!!set)"
        elif "Tagged" in what:
            what = f"a value tagged {getattr(getattr(node, 'tag', None), 'value', '?')}"
        raise _Fail(f"{_name(path)} is {what}; scenario values are plain JSON data", at, path)

    def _check_tag(self, node: Any, at: LineCol, path: PathT) -> None:
        tag = getattr(getattr(node, "tag", None), "value", None)
        if isinstance(tag, str) and not tag.startswith("tag:yaml.org,2002:"):
            raise _Fail(
                f"{_name(path)} has the tag {tag}; scenario files use no custom tags", at, path
            )

    def _mapping(self, node: Mapping[Any, Any], path: PathT, stack: list[int]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        parent_at = self.pos.value(path)
        for key, value in node.items():
            found = _yaml_key_value_lc(node, key)
            key_at, value_at = found if found is not None else (parent_at, parent_at)
            if not isinstance(key, str) or isinstance(key, bool):
                shown = (
                    _show(key)
                    if isinstance(key, (int, float, bool)) or key is None
                    else "a collection"
                )
                raise _Fail(f"mapping keys must be strings, got {shown} (quote it)", key_at, path)
            name = str(key)
            child = (*path, name)
            self.pos.keys[child] = key_at
            start = _yaml_node_start(value) if isinstance(value, (Mapping, list)) else None
            self.pos.values[child] = value_at if found is not None else (start or parent_at)
            out[name] = self.convert(value, child, stack)
        return out

    def _sequence(self, node: list[Any], path: PathT, stack: list[int]) -> list[Any]:
        out: list[Any] = []
        data = getattr(getattr(node, "lc", None), "data", None) or {}
        parent_at = self.pos.value(path)
        for index, value in enumerate(node):
            child = (*path, index)
            entry = data.get(index) if isinstance(data, dict) else None
            self.pos.values[child] = (entry[0] + 1, entry[1] + 1) if entry else parent_at
            out.append(self.convert(value, child, stack))
        return out


# --------------------------------------------------------------------------- JSON


def _parse_json(text: str) -> tuple[Any, _Positions]:
    """Parse with :mod:`json`, then scan the (now known valid) text for positions.

    The values come from :mod:`json` itself so JSON semantics are exact; the
    scanner only records where things are, and refuses duplicate keys (which
    :mod:`json` silently resolves to the last one).
    """
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _Fail(f"invalid JSON: {exc.msg}", (exc.lineno, exc.colno)) from None
    pos = _Positions()
    _JsonScanner(text, pos).scan()
    _check_finite(data, (), pos)
    return data, pos


def _check_finite(value: Any, path: PathT, pos: _Positions) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        raise _Fail(f"{_name(path)} must be a finite number, got {value!r}", pos.value(path), path)
    if isinstance(value, dict):
        for key, item in value.items():
            _check_finite(item, (*path, key), pos)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check_finite(item, (*path, index), pos)


class _JsonScanner:
    _WS = re.compile(r"[ \t\n\r]*")

    def __init__(self, text: str, pos: _Positions) -> None:
        self.text = text
        self.pos = pos
        self.decoder = json.JSONDecoder()
        self.line_starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def at(self, index: int) -> LineCol:
        line = bisect.bisect_right(self.line_starts, index)
        return (line, index - self.line_starts[line - 1] + 1)

    def skip(self, index: int) -> int:
        match = self._WS.match(self.text, index)
        return match.end() if match else index

    def scan(self) -> None:
        self.value(self.skip(0), ())

    def value(self, index: int, path: PathT) -> int:
        index = self.skip(index)
        self.pos.values[path] = self.at(index)
        char = self.text[index]
        if char == "{":
            return self.mapping(index + 1, path)
        if char == "[":
            return self.sequence(index + 1, path)
        _, end = self.decoder.raw_decode(self.text, index)
        return end

    def mapping(self, index: int, path: PathT) -> int:
        index = self.skip(index)
        if self.text[index] == "}":
            return index + 1
        seen: dict[str, LineCol] = {}
        while True:
            index = self.skip(index)
            key, end = self.decoder.raw_decode(self.text, index)
            key_at = self.at(index)
            if key in seen:
                first = seen[key]
                raise _Fail(
                    f"duplicate key '{key}' (first at line {first[0]}, column {first[1]})",
                    key_at,
                    path,
                )
            seen[key] = key_at
            self.pos.keys[(*path, key)] = key_at
            index = self.skip(end) + 1  # the ':'
            index = self.skip(self.value(index, (*path, key)))
            if self.text[index] == "}":
                return index + 1
            index += 1  # the ','

    def sequence(self, index: int, path: PathT) -> int:
        index = self.skip(index)
        if self.text[index] == "]":
            return index + 1
        item = 0
        while True:
            index = self.skip(self.value(index, (*path, item)))
            item += 1
            if self.text[index] == "]":
                return index + 1
            index += 1


def _line_col_of_byte(raw: bytes, offset: int) -> LineCol:
    before = raw[:offset]
    line = before.count(b"\n") + 1
    line_start = before.rfind(b"\n") + 1
    col = len(before[line_start:].decode("utf-8", errors="replace")) + 1
    return (line, col)


# =========================================================================== issues


@dataclasses.dataclass(frozen=True)
class _Issue:
    message: str
    at: LineCol
    order: tuple[Any, ...]
    path: PathT = ()


def _issue(
    pos: _Positions, path: PathT, message: str, *, at_key: bool = False, rank: int = 0
) -> _Issue:
    """An issue on the value at ``path`` (or on its key, for a key that is wrong)."""
    at = pos.key(path) if at_key else pos.value(path)
    last = at if at_key else None
    return _Issue(
        message, at, (pos.order(path[:-1] if at_key else path, last), rank, message), path
    )


def _mapping_issue(pos: _Positions, path: PathT, message: str, rank: int = 0) -> _Issue:
    """An issue on a whole mapping (e.g. a missing key): reported at its start, sorted after its keys."""
    return _Issue(message, pos.value(path), (pos.order(path, _END), rank, message), path)


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
    if kind in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        relation = {
            "minimum": ">=",
            "maximum": "<=",
            "exclusiveMinimum": ">",
            "exclusiveMaximum": "<",
        }[kind]
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


_TYPE_WORDS = {
    "object": "a mapping",
    "array": "a list",
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "null": "null",
}


def _step_path(path: PathT) -> tuple[int, int | None] | None:
    """``(step index, member index or None)`` when ``path`` is exactly a step."""
    if len(path) == 2 and path[0] == "steps" and isinstance(path[1], int):
        return path[1], None
    if (
        len(path) == 4
        and path[0] == "steps"
        and isinstance(path[1], int)
        and path[2] == "parallel"
        and isinstance(path[3], int)
    ):
        return path[1], path[3]
    return None


def _get(data: Any, path: PathT) -> Any:
    for part in path:
        try:
            data = data[part]
        except (KeyError, IndexError, TypeError):
            return None
    return data


def _step_op(data: Any, step: PathT) -> str | None:
    op = _get(data, (*step, "op"))
    return op if isinstance(op, str) and op in op_specs() else None


def _split_step(path: PathT) -> tuple[PathT, PathT] | None:
    """Split a path inside a step into (the step's path, the rest)."""
    for n in (4, 2):
        if len(path) >= n and _step_path(path[:n]) is not None:
            return path[:n], path[n:]
    return None


def _where(path: PathT, data: Any) -> str:
    """Where a mapping at ``path`` sits, for messages: "in op 'read'", "at the top level"…"""
    if not path:
        return "at the top level"
    split = _split_step(path)
    if split is not None:
        step, rest = split
        op = _step_op(data, step)
        owner = f"op '{op}'" if op else _name(step)
        if not rest:
            return f"in {owner}"
        return f"in '{_dotted(rest)}' of {owner}"
    if len(path) == 2 and path[0] == "agents":
        return f"in {_name(path)}"
    return f"in '{_dotted(path)}'"


def _dotted(path: PathT) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _name(path: PathT) -> str:
    """What a value at ``path`` is called in messages: "'seconds'", "step 3", "item 2 of 'tags'"."""
    if not path:
        return "the top level"
    step = _step_path(path)
    if step is not None:
        index, member = step
        return f"step {index + 1}" if member is None else f"step {index + 1}.{member + 1}"
    if len(path) == 2 and path[0] == "agents" and isinstance(path[1], int):
        return f"agent entry {path[1] + 1}"
    last = path[-1]
    if isinstance(last, int):
        parent = path[-2] if len(path) >= 2 and isinstance(path[-2], str) else None
        return f"item {last + 1} of '{parent}'" if parent else f"item {last + 1}"
    return f"'{last}'"


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


def _did_you_mean(word: Any, options: Sequence[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest option, else ``""``."""
    if not isinstance(word, str) or not options:
        return ""
    lowered = {o.lower(): o for o in options}
    match = lowered.get(word.lower())
    if match is None:
        close = difflib.get_close_matches(word.lower(), list(lowered), n=1, cutoff=0.6)
        match = lowered[close[0]] if close else None
    return f" (did you mean '{match}'?)" if match is not None and match != word else ""


def _show(value: Any) -> str:
    """A short, YAML-flavoured rendering of a value for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        text = value if len(value) <= 40 else value[:37] + "..."
        return repr(text)
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        return "a list"
    return type(value).__name__


# --------------------------------------------------------------------------- config


def _config_issues(data: dict[str, Any], pos: _Positions) -> list[_Issue]:
    raw = data.get("config")
    try:
        Config.from_dict(raw)
    except ConfigError as exc:
        path = _config_path(raw, exc.path)
        message = exc.message if "config" in exc.message else f"config {exc.message}"
        if path and not _config_key_known(path):
            return [_issue(pos, ("config", *path), message, at_key=True)]
        return [_issue(pos, ("config", *path), message)]
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


# =========================================================================== build


def _build(data: dict[str, Any], pos: _Positions, file: str) -> Scenario:
    def at(path: PathT) -> Position:
        line, col = pos.value(path)
        return Position(file, line, col)

    def op_step(op: Mapping[str, Any], path: PathT, number: int, member: int | None) -> OpStep:
        expect = op.get("expect")
        return OpStep(
            op=op["op"],
            agent=op.get("agent"),
            args={k: v for k, v in op.items() if k not in ("op", "agent", "expect", "as")},
            expect=dict(expect) if expect is not None else None,
            label=op.get("as"),
            pos=at(path),
            number=number,
            member=member,
        )

    steps: list[Step] = []
    for index, step in enumerate(data["steps"]):
        path: PathT = ("steps", index)
        if "parallel" in step:
            ops = tuple(
                op_step(op, (*path, "parallel", member), index + 1, member + 1)
                for member, op in enumerate(step["parallel"])
            )
            steps.append(ParallelStep(ops=ops, pos=at(path), number=index + 1))
        else:
            steps.append(op_step(step, path, index + 1, None))

    config_data = data.get("config") or {}
    final = data.get("final")
    return Scenario(
        path=file,
        name=data["name"],
        description=data.get("description"),
        seed=data.get("seed", 0),
        config=Config.from_dict(config_data),
        config_data=config_data,
        agents=tuple(
            AgentSpec(id=a["id"], role=a["role"], pos=at(("agents", i)))
            for i, a in enumerate(data["agents"])
        ),
        steps=tuple(steps),
        final=final,
        final_pos=Position(file, *pos.key(("final",))) if "final" in data else None,
    )

"""Step 1 of :mod:`._loader`: read YAML 1.2 or JSON text into plain data and positions.

The only module that knows a parser; a syntax error, a duplicate key or a value
JSON cannot hold is raised as a positioned ``_Fail``.
"""

from __future__ import annotations

import bisect
import functools
import json
import math
import re
from collections.abc import Mapping
from typing import Any

from gliding_actors.scenario._paths import LineCol, PathT, _Fail, _name, _Positions, _show

#: Most nodes a file may expand to. Only reachable through YAML aliases used as an
#: exponential "billion laughs"; a hand-written or recorded scenario is far below.
_MAX_NODES = 2_000_000


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

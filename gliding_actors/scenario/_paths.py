"""The scenario loader's shared vocabulary: data paths, file positions, issues and wording.

The parser (:mod:`._parse`), the checks (:mod:`._checks`) and the builder (:mod:`._loader`)
all use it, so none of them has to import another.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Mapping, Sequence
from typing import Any

from gliding_actors.scenario._opspecs import op_specs

PathT = tuple[str | int, ...]
LineCol = tuple[int, int]
_END: LineCol = (1 << 62, 1 << 62)  # sorts after every real position


class _Fail(Exception):
    """Internal: abort with one positioned message (turned into ScenarioFormatError)."""

    def __init__(self, message: str, at: LineCol, path: PathT = ()) -> None:
        super().__init__(message)
        self.message = message
        self.at = at
        self.path = path


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


# --------------------------------------------------------------------------- naming


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

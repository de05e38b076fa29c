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

Step 1 is :mod:`._parse`, steps 2 and 3 are :mod:`._checks`, and what they share
(paths, positions, issues, wording) is :mod:`._paths`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gliding_actors.config import Config
from gliding_actors.errors import ScenarioFormatError
from gliding_actors.scenario._checks import _config_issues, _schema_issues, _semantic_issues
from gliding_actors.scenario._model import AgentSpec, OpStep, ParallelStep, Position, Scenario, Step
from gliding_actors.scenario._parse import _line_col_of_byte, _parse_json, _parse_yaml
from gliding_actors.scenario._paths import PathT, _Fail, _Positions, _show

__all__ = ["SCENARIO_SUFFIXES", "load_scenario", "load_scenario_text"]

#: File name endings the loader accepts (case-insensitive), and how each is parsed.
SCENARIO_SUFFIXES: Mapping[str, str] = {".yaml": "yaml", ".yml": "yaml", ".json": "json"}
_EMPTY_FILE = "the file is empty; a scenario is a mapping with format, name, agents and steps"


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


def _load(text: str, file: str, syntax: str) -> Scenario:
    try:
        if not text.strip():
            raise _Fail(_EMPTY_FILE, (1, 1))
        try:
            if syntax == "json":
                data, pos = _parse_json(text)
            else:
                data, pos = _parse_yaml(text)
        except RecursionError:
            raise _Fail("the file is nested too deeply to read", (1, 1)) from None
        if data is None:  # only comments, or an explicit null
            raise _Fail(_EMPTY_FILE, (1, 1))
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

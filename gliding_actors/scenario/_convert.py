"""Turning a recorded trace (``_record``) into a format-v1 scenario (docs/RECORDING.md).

The rules, each chosen so the scenario replays on *any* schedule — the
simulator under every seed, or threads again — and still pins what the live
run showed:

* **Order.** Ops become sequential steps in the order they *completed* (the
  trace's ``completed`` numbers). Ops that ran concurrently on threads are
  thereby replayed one after the other, in an order that agrees with what
  each of them observed: each actor that serialises ops (a line's directory,
  the bus, the blackboard, a session) answers them in the order it applied
  them, and a completion is stamped in the answering thread before that
  thread handles anything else, so an op that saw another's effect completes
  after it. One exception is re-ordered: a ``lock`` that *waited* and was
  granted is answered by the ``unlock`` that freed it before that unlock's
  own answer, so it is placed right after that unlock. Sequential steps make
  the conversion deterministic; ``parallel`` blocks would need expectations
  true under every interleaving, which a single recorded run cannot supply.
* **Time.** On a virtual-clock trace every move of the clock between ops
  becomes an exact ``advance``. On a system-clock trace idle gaps of at least
  ``time_resolution`` seconds (default 1 s) become ``advance`` steps and
  shorter ones are dropped, so keys that depend on sub-second timing are not
  expected (below).
* **Expectations** are the recorded results, restricted to the result keys
  the op's spec declares, minus the keys that depend on timing or on the
  schedule rather than on the sequence of ops:

  - ``messages`` (read, write, cas, evict): protocol message counts vary with
    the interleaving of background traffic;
  - ``state`` (read, write, cas, evict) of an op that overlapped another op:
    a read served from the agent's own copy shows a downgrade that another
    agent's still-running read caused, so its state may precede that read's
    completion; an op that ran alone keeps it;
  - ``seq`` (publish): the bus numbers the library's own ``line.changed``
    events too, which caches send after their writes, asynchronously;
  - ``cached`` (project): whether a materialised view was still valid;
  - ``events`` (inbox): ``messages`` is kept, the same items without envelope;
  - ``agents.*.stale``: kept only on virtual-clock traces;
  - L1 results after an agent's first eviction (``turn.evicted``/``tokens``,
    ``session`` keys but ``turns[].archive_iri``): kept only on virtual-clock
    traces, since phase 2 of eviction weighs turn ages;
  - ``turns[].created_at`` and every other clock reading: never.

  ``turn`` steps carry ``tokens`` = the recorded ``turn_tokens``, so session
  totals do not depend on the token counter installed where it is replayed.
  A query whose SPARQL has no ``ORDER BY`` is expected as ``count`` plus
  ``contains`` (row order is not part of its answer). An ``inspect`` is
  preceded by a ``quiesce`` and expects its directory and cache states only
  when the recorded snapshot was itself settled (the directory agreed with
  the caches); ``l0``/``l2`` are expected only then too.
* **Errors** become ``expect: {error: NAME}``.
* **Left out** (listed in the scenario's ``description``): ops without a
  scenario equivalent (``reload``, ``messages``, ``attach_to_task``,
  ``handoff``…), ops still pending when the recording closed, and ops whose
  arguments the format cannot express (the schema would refuse them).
"""

from __future__ import annotations

import collections
import json
import math
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import jsonschema

from gliding_actors.config import Config
from gliding_actors.errors import InvalidInput, show
from gliding_actors.scenario._model import FORMAT_V1
from gliding_actors.scenario._ops.coherence import line_disagreement
from gliding_actors.scenario._opspecs import get_op_spec, op_specs
from gliding_actors.scenario._record import TRACE_FORMAT

__all__ = ["ConvertOptions", "convert_trace", "read_trace", "scenario_yaml"]


class ConvertOptions:
    """Knobs of :func:`convert_trace` (see the module docstring)."""

    def __init__(self, *, name: str | None = None, time_resolution: float = 1.0) -> None:
        if time_resolution < 0:
            raise InvalidInput(f"time_resolution is >= 0 s, not {show(time_resolution)}")
        self.name = name
        self.time_resolution = time_resolution


def read_trace(path: str | Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The header and the other lines of a trace; ``InvalidInput`` naming ``FILE:LINE`` when malformed."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise InvalidInput(f"cannot read trace {path}: {exc}") from exc
    except UnicodeDecodeError as exc:  # a ValueError, not an OSError (fuzzing found it)
        raise InvalidInput(f"cannot read trace {path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    lines: list[dict[str, Any]] = []
    for number, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        try:
            data = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise InvalidInput(f"{path}:{number}: not a JSON line: {exc.msg}") from None
        if not isinstance(data, dict):
            raise InvalidInput(f"{path}:{number}: a trace line is a JSON object")
        lines.append(data)
    if not lines or lines[0].get("format") != TRACE_FORMAT:
        found = lines[0].get("format") if lines else None
        raise InvalidInput(f"{path}:1: not a trace: the header must name format {show(TRACE_FORMAT)}, found {show(found)}")
    _check_fields(path, 1, lines[0], _HEADER_FIELDS)
    for number, line in enumerate(lines[1:], 2):
        kind = line.get("kind")
        if kind == "op" and not (isinstance(line.get("issued"), int) and isinstance(line.get("args"), dict)):
            raise InvalidInput(f"{path}: op line {number} lacks 'issued' or 'args'")
        if kind not in ("op", "agent"):
            raise InvalidInput(f"{path}: line {number} has unknown kind {show(kind)}")
        _check_fields(path, number, line, _OP_FIELDS if kind == "op" else _AGENT_FIELDS)
        if kind == "op" and not line.get("pending") and not _is_int(line.get("completed")):
            raise InvalidInput(f"{path}: op line {number} lacks 'completed' (and is not pending)")
    return lines[0], lines[1:]


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # an integer too large to be a float: no time or timeout
        return False


#: The fields :func:`convert_trace` reads, and what each must be when present
#: (a hand-edited or truncated trace is refused here, by name, instead of
#: failing deep in the conversion with a KeyError or TypeError — fuzzing found those).
_HEADER_FIELDS: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "t0": ("a finite number", _is_number),
    "seed": ("an integer", _is_int),
    "clock": ("a string", lambda v: isinstance(v, str)),
    "runtime": ("a string", lambda v: isinstance(v, str)),
    "config": ("an object", lambda v: isinstance(v, dict)),
}
_AGENT_FIELDS: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "id": ("a non-empty string", lambda v: isinstance(v, str) and bool(v)),
    "role": ("a string", lambda v: isinstance(v, str)),
}
_OP_FIELDS: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "op": ("a string or null", lambda v: v is None or isinstance(v, str)),
    "call": ("a string", lambda v: isinstance(v, str)),
    "agent": ("a string or null", lambda v: v is None or isinstance(v, str)),
    "completed": ("an integer", _is_int),
    "t_issued": ("a finite number", _is_number),
    "t_completed": ("a finite number", _is_number),
    "error": ("an object with a string 'name'", lambda v: isinstance(v, dict) and isinstance(v.get("name"), str)),
    "pending": ("true or false", lambda v: isinstance(v, bool)),
}


def _check_fields(
    path: str | Path, number: int, line: Mapping[str, Any], fields: Mapping[str, tuple[str, Callable[[Any], bool]]]
) -> None:
    required = ("id", "role") if fields is _AGENT_FIELDS else ()
    for key, (what, ok) in fields.items():
        if key in line or key in required:
            if not ok(line.get(key)):
                raise InvalidInput(f"{path}: line {number}: {show(key)} must be {what}, not {line.get(key)!r}")


def has_op_spec(name: str) -> bool:
    """Whether this build has scenario op ``name`` (a trace from another build may name others)."""
    return name in op_specs()


def _result_mapping(op: str, raw: Any) -> dict[str, Any]:
    """A recorded handle result in the scenario op's result shape."""
    if op == "inbox":
        events = raw if isinstance(raw, list) else []
        return {"messages": [e.get("message") if isinstance(e, Mapping) else e for e in events]}
    if op == "flush":
        return {"flushed": raw}
    if isinstance(raw, Mapping):
        return dict(raw)
    return {}


def _expectation(
    op: str,
    agent: str | None,
    args: Mapping[str, Any],
    result: Mapping[str, Any],
    *,
    exact_time: bool,
    evicted: set[str],
    alone: bool,
) -> dict[str, Any] | None:
    spec = get_op_spec(op)
    keys = [k for k in spec.result_keys if k in result]
    out = {k: result[k] for k in keys}
    if op in ("read", "write", "cas", "evict"):
        out.pop("messages", None)
        if not alone:
            out.pop("state", None)
    elif op == "publish":
        out.pop("seq", None)
    elif op == "project":
        out.pop("cached", None)
    elif op == "agents" and not exact_time:
        out["agents"] = {
            a: {k: v for k, v in status.items() if k != "stale"} for a, status in (out.get("agents") or {}).items()
        }
    elif op == "query" and "rows" in out and not re.search(r"\border\s+by\b", str(args.get("sparql", "")), re.I):
        rows = out.pop("rows")
        out["count"] = len(rows)
        if rows:
            out["contains"] = rows
    elif op == "inspect":
        if line_disagreement("", result) is not None:  # not a settled snapshot
            return None
    elif op in ("turn", "session") and agent is not None:
        if op == "turn" and result.get("evicted"):
            evicted.add(agent)
        if agent in evicted and not exact_time:
            if op == "turn":
                return {"archive_iri": result["archive_iri"]} if "archive_iri" in result else None
            turns = result.get("turns") or []
            return {"turns": [{"archive_iri": t.get("archive_iri")} for t in turns]}
        if op == "session" and "turns" in out:
            out["turns"] = [
                {k: t[k] for k in ("summary", "archive_iri", "tokens") if k in t} for t in out["turns"]
            ]
    return out or None


def _overlapping(ops: list[dict[str, Any]]) -> set[int]:
    """The ``issued`` numbers of ops that ran while another op was in flight."""
    events = sorted([(e["issued"], 1, e["issued"]) for e in ops] + [(e["completed"], -1, e["issued"]) for e in ops])
    out: set[int] = set()
    running: set[int] = set()
    for _when, kind, op in events:
        if kind == 1:
            if running:
                out.add(op)
                out.update(running)
            running.add(op)
        else:
            running.discard(op)
    return out


def _order(ops: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Completion order, with each waited-and-granted lock moved after the unlock that freed it."""
    done = sorted(ops, key=lambda e: e["completed"])
    out: list[dict[str, Any]] = []
    deferred: list[dict[str, Any]] = []
    for entry in done:
        if (
            entry.get("op") == "lock"
            and _is_number(entry["args"].get("timeout_s"))
            and entry["args"]["timeout_s"] > 0
            and isinstance(entry.get("result"), Mapping)
            and entry["result"].get("granted")
        ):
            freer = next(
                (
                    u
                    for u in done
                    if u.get("op") == "unlock"
                    and u["args"].get("resource") == entry["args"].get("resource")
                    and u["issued"] < entry["completed"] < u["completed"]
                ),
                None,
            )
            if freer is not None:
                deferred.append({**entry, "_after": freer["issued"]})
                continue
        out.append(entry)
        for waiting in [d for d in deferred if d["_after"] == entry["issued"]]:
            deferred.remove(waiting)
            out.append({k: v for k, v in waiting.items() if k != "_after"})
    out.extend({k: v for k, v in d.items() if k != "_after"} for d in deferred)
    return out


def _config_overrides(recorded: Any) -> dict[str, Any]:
    """The recorded config's differences from the defaults (what the scenario's ``config`` needs)."""
    if not isinstance(recorded, Mapping):
        return {}
    defaults = Config().to_dict()

    def diff(have: Mapping[str, Any], base: Mapping[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in have.items():
            if key not in base:
                continue  # a key this build does not know: leave it out rather than fail the load
            if isinstance(value, Mapping) and isinstance(base[key], Mapping):
                inner = diff(value, base[key])
                if inner:
                    out[key] = inner
            elif value != base[key]:
                out[key] = value
        return out

    return diff(recorded, defaults)


def convert_trace(
    header: Mapping[str, Any], lines: Iterable[Mapping[str, Any]], options: ConvertOptions | None = None
) -> dict[str, Any]:
    """The scenario (as plain data) for a trace's header and lines (module docstring)."""
    opts = options or ConvertOptions()
    exact_time = header.get("clock") == "virtual"
    t0 = float(header.get("t0") or 0.0)
    agents: dict[str, str] = {}
    ops: list[dict[str, Any]] = []
    skipped: collections.Counter[str] = collections.Counter()  # why an op was left out -> how many
    for line in lines:
        if line.get("kind") == "agent":
            agents.setdefault(str(line["id"]), str(line["role"]))
        elif line.get("pending"):
            skipped[f"{line.get('call')} (still pending when the recording closed)"] += 1
        elif line.get("op") is None:
            skipped[f"{str(line.get('call', '?')).removeprefix('submit_')} (no scenario op)"] += 1
        elif not has_op_spec(str(line["op"])):
            skipped[f"{line['op']} (not a scenario op of this build)"] += 1
        else:
            ops.append(dict(line))

    steps: list[dict[str, Any]] = []
    now = 0.0
    evicted: set[str] = set()
    overlapping = _overlapping(ops)
    for entry in _order(ops):
        op = str(entry["op"])
        spec = get_op_spec(op)
        args = dict(entry["args"])
        result = entry.get("result")
        if op == "turn" and isinstance(result, Mapping) and "tokens" not in args and "turn_tokens" in result:
            args["tokens"] = result["turn_tokens"]
        if op == "project" and not args.get("frame") and isinstance(result, Mapping) and result.get("frame"):
            args["frame"] = result["frame"]
        args = {k: v for k, v in args.items() if k in spec.arg_names}
        try:
            jsonschema.validate(args, dict(spec.args_schema))
        except jsonschema.ValidationError:
            skipped[f"{op} (arguments the format cannot express)"] += 1
            continue
        if spec.takes_agent and entry.get("agent") not in agents:
            skipped[f"{op} (by an agent the trace never registered)"] += 1
            continue
        gap = float(entry.get("t_issued", t0)) - t0 - now
        if gap > 0 and (exact_time or gap >= opts.time_resolution):
            steps.append({"op": "advance", "seconds": round(gap, 6)})
            now += gap
        step: dict[str, Any] = {"op": op}
        if spec.takes_agent:
            step["agent"] = entry["agent"]
        step.update(args)
        if "error" in entry:
            step["expect"] = {"error": str(entry["error"]["name"])}
        else:
            try:
                expect = _expectation(
                    op,
                    entry.get("agent"),
                    args,
                    _result_mapping(op, result),
                    exact_time=exact_time,
                    evicted=evicted,
                    alone=entry["issued"] not in overlapping,
                )
            except (TypeError, AttributeError, KeyError) as exc:
                # The recorded answer is foreign data: in a hand-edited trace it may
                # not have the shape this op answers (fuzzing found len() of an int).
                raise InvalidInput(
                    f"op {entry['issued']} ({op}): the recorded result is not the shape {op} answers: {show(exc)}"
                ) from None
            if expect:
                step["expect"] = expect
        if op == "inspect":
            steps.append({"op": "quiesce"})
        steps.append(step)
        if exact_time:
            now = max(now, float(entry.get("t_completed", t0)) - t0)

    description = (
        f"Converted from a trace recorded on the {header.get('runtime', '?')} runtime "
        f"({'virtual' if exact_time else 'system'} clock) by gliding-actors {header.get('library', '?')}."
    )
    if skipped:
        description += " Not converted: " + "; ".join(f"{n} × {why}" for why, n in sorted(skipped.items())) + "."
    scenario: dict[str, Any] = {
        "format": FORMAT_V1,
        "name": opts.name or "recorded trace",
        "description": description,
        "seed": int(header.get("seed") or 0),
    }
    config = _config_overrides(header.get("config"))
    if config:
        scenario["config"] = config
    scenario["agents"] = [{"id": a, "role": r} for a, r in agents.items()]
    scenario["steps"] = steps
    return scenario


def scenario_yaml(scenario: Mapping[str, Any]) -> str:
    """YAML 1.2 text of a converted scenario: one flow-style mapping per step."""
    import io

    from ruamel.yaml import YAML
    from ruamel.yaml.comments import CommentedMap, CommentedSeq

    def flow(value: Any) -> Any:
        if isinstance(value, Mapping):
            mapping = CommentedMap((k, flow(v)) for k, v in value.items())
            mapping.fa.set_flow_style()
            return mapping
        if isinstance(value, list):
            seq = CommentedSeq(flow(v) for v in value)
            seq.fa.set_flow_style()
            return seq
        return value

    document = CommentedMap()
    for key, value in scenario.items():
        if key in ("agents", "steps"):
            document[key] = CommentedSeq(flow(v) for v in value)
        elif key == "config":
            document[key] = CommentedMap((k, flow(v)) for k, v in value.items())
        else:
            document[key] = value
    yaml = YAML()
    yaml.width = 4096
    out = io.StringIO()
    yaml.dump(document, out)
    return out.getvalue()

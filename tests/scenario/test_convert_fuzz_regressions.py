"""Regressions for what fuzzing found in ``gliding-actors convert``: a bad trace exits 2, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gliding_actors.cli import EXIT_INVALID, EXIT_OK, main
from gliding_actors.scenario._record import TRACE_FORMAT

HEADER = {"format": TRACE_FORMAT, "library": "0.1.0", "runtime": "sim", "seed": 0, "clock": "virtual", "t0": 0.0}
AGENT = {"kind": "agent", "id": "pa", "role": "PA", "t": 0.0}


def _op(**fields: Any) -> dict[str, Any]:
    line = {"kind": "op", "op": "read", "call": "submit_read", "agent": "pa", "args": {"iri": "ex:a"},
            "issued": 1, "completed": 2, "t_issued": 0.0, "t_completed": 0.0,
            "result": {"value": None, "version": 0, "state": "I", "messages": 2}}
    line.update(fields)
    return line


def _convert(tmp_path: Path, text: str | bytes) -> int:
    trace = tmp_path / "t.jsonl"
    if isinstance(text, bytes):
        trace.write_bytes(text)
    else:
        trace.write_text(text, encoding="utf-8")
    return main(["convert", str(trace), "-o", str(tmp_path / "out.yaml")])


def _lines(*lines: Any) -> str:
    return "\n".join(json.dumps(line) for line in lines)


@pytest.mark.parametrize(
    "text",
    [
        json.dumps(HEADER).encode() + b"\n\xff\xfe",  # not UTF-8: UnicodeDecodeError escaped
        _lines({**HEADER, "t0": [1]}, AGENT, _op()),  # float() of a list
        _lines(HEADER, {"kind": "agent", "role": "PA"}, _op()),  # KeyError 'id'
        _lines(HEADER, AGENT, _op(t_issued="soon")),
        _lines(HEADER, AGENT, _op(t_issued=10**400)),  # math.isfinite of a huge int: OverflowError escaped
        _lines({**HEADER, "t0": -(10**400)}, AGENT, _op()),
        _lines(HEADER, AGENT, _op(completed=None)),
        _lines(HEADER, AGENT, _op(error="ConflictError")),
        _lines(HEADER, AGENT, _op(op="query", args={"sparql": "SELECT * WHERE { ?s ?p ?o }"}, result={"rows": 7})),
    ],
)
def test_a_malformed_trace_exits_invalid(tmp_path: Path, text: str | bytes, capsys: pytest.CaptureFixture[str]) -> None:
    assert _convert(tmp_path, text) == EXIT_INVALID
    assert "gliding-actors convert:" in capsys.readouterr().err
    assert not (tmp_path / "out.yaml").exists()


def test_an_op_this_build_does_not_know_is_left_out_not_a_crash(tmp_path: Path) -> None:
    """A trace recorded by another build may name ops this one lacks (KeyError 'WRITE' escaped)."""
    assert _convert(tmp_path, _lines(HEADER, AGENT, _op(op="WRITE"), _op(issued=3, completed=4))) == EXIT_OK
    scenario = (tmp_path / "out.yaml").read_text(encoding="utf-8")
    assert "WRITE (not a scenario op of this build)" in scenario and "op: read" in scenario

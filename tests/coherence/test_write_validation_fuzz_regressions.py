"""Regressions for what fuzzing (tests/reliability/test_fuzz.py) found at the agent's write path.

Each input was accepted (or crashed an actor) and then poisoned the memory: a
value, tag or IRI that L0 or the graph refuses *later*, mid-protocol, left a
write-through unanswered and every later flush hanging. Each must now be
refused up front with ``InvalidInput``, change nothing, and leave the memory
flushing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gliding_actors.agent import MAX_VALUE_DEPTH
from gliding_actors.errors import InvalidInput
from gliding_actors.system import MemorySystem
from tools.reliability._fuzz import memory_snapshot, snapshot_diff


def _nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {"leaf": 1}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


@pytest.mark.parametrize(
    ("iri", "value", "tags", "why"),
    [
        ("ex:deep", _nested(MAX_VALUE_DEPTH + 1), None, "deeper than"),  # depth 500 crashed cache:ID
        ("ex:deeper", _nested(5000), None, "deeper than"),  # RecursionError escaped the agent
        ("ex:line", {"@id": "ex:other", "p": 1}, ["confirmed_fact"], "@id"),  # L0 refused at write-down
        ("ex:line", {"@id": "_:b0", "p": 1}, None, "@id"),
        ("ex:big", {"a": "x" * 2000}, None, "max_node_bytes"),  # over l0.max_node_bytes (1000 here)
        ("ex:tagged", {"a": 1}, ["a\x00"], "tags"),  # a tag L0's label rule refuses
        ("ex:tagged", {"a": 1}, ["\ud800", "confirmed_fact"], "tags"),
    ],
)
def test_a_value_l0_would_refuse_later_is_refused_now(
    tmp_path: Path, iri: str, value: dict[str, Any], tags: list[str] | None, why: str
) -> None:
    with MemorySystem.open(tmp_path / "m", runtime="sim", config={"l0": {"max_node_bytes": 1000}}) as memory:
        sa = memory.agent("sa", "SA")
        sa.write("ex:dirty", {"held": "in M"})
        before = memory_snapshot(memory)
        with pytest.raises(InvalidInput, match=why):
            sa.write(iri, value, tags=tags)
        assert snapshot_diff(before, memory_snapshot(memory)) == []
        assert memory.flush(timeout=5) == 1  # the memory still writes down


def test_the_deepest_value_allowed_goes_through_every_layer(tmp_path: Path) -> None:
    with MemorySystem.open(tmp_path / "m", runtime="sim") as memory:
        pa = memory.agent("pa", "PA")
        value = {"@type": "Task", "summary": "deep", **_nested(MAX_VALUE_DEPTH - 1)}
        pa.write("task:deep", value, graph="plan", tags=["confirmed_fact"])
        assert memory.agent("sys", "system").read("task:deep")["value"] == value
        assert pa.query("ASK { <task:deep> a ga:Task }")["boolean"] is True
        assert memory.flush() >= 0 and memory.l0.retrieve("task:deep") is not None


@pytest.mark.parametrize("op", ["delete", "read", "evict", "write"])
def test_an_iri_the_graph_refuses_is_refused_before_the_protocol(tmp_path: Path, op: str) -> None:
    """'ex:a/%/b' passes L0's IRI shape but not pyoxigraph's: its tombstone hung the directory."""
    with MemorySystem.open(tmp_path / "m", runtime="sim") as memory:
        sa = memory.agent("sa", "SA")
        before = memory_snapshot(memory)
        calls = {
            "delete": lambda: sa.delete("ex:a/%/b"),
            "read": lambda: sa.read("ex:a/%zz"),
            "evict": lambda: sa.evict("ex:a/%/b"),
            "write": lambda: sa.write("ex:a/%/b", {"a": 1}),
        }
        with pytest.raises(InvalidInput, match="IRI"):
            calls[op]()
        assert snapshot_diff(before, memory_snapshot(memory)) == []
        assert memory.submit_recall().get(5) == 0  # the directory still answers


def test_a_read_or_flush_of_an_unhashable_iri_is_invalid_input(tmp_path: Path) -> None:
    with MemorySystem.open(tmp_path / "m", runtime="sim") as memory:
        pa = memory.agent("pa", "PA")
        with pytest.raises(InvalidInput):
            pa.read(["ex:a"])  # type: ignore[arg-type]
        with pytest.raises(InvalidInput):
            memory.submit_flush([{"@id": "ex:a"}])  # type: ignore[list-item]

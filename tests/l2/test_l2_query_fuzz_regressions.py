"""Regressions for what fuzzing found in SPARQL queries: a refused query changes nothing, bindings are typed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gliding_actors.errors import InvalidInput
from gliding_actors.l2._graph import GraphStore
from tools.reliability._fuzz import memory_snapshot, snapshot_diff
from gliding_actors.system import MemorySystem


@pytest.mark.parametrize(
    ("sparql", "bindings"),
    [
        ("CLEAR ALL", None),  # an update
        ("ASK { ?s <a <ga:Task }", None),  # malformed
        ("SELECT * WHERE { ?s ?p ?o }", "s"),  # bindings not an object (AttributeError escaped)
        ("SELECT * WHERE { ?s ?p ?o }", {"s": "\udce0"}),  # a lone surrogate (ValueError escaped)
        ("SELECT * WHERE { ?s ?p ?o }", {"o": {"@value": 1, "@language": 5}}),
        ("SELECT * WHERE { ?s ?p ?o }", {"o": {"@value": "a\ud8fb", "@type": "http://x/t"}}),  # UnicodeEncodeError
    ],
)
def test_a_refused_query_recalls_nothing(tmp_path: Path, sparql: str, bindings: Any) -> None:
    """The query is checked before the recall: a dirty line stays in its owner's cache, in M."""
    with MemorySystem.open(tmp_path / "m", runtime="sim") as memory:
        pa = memory.agent("pa", "PA")
        pa.write("plan:x", {"summary": "dirty"}, graph="plan")
        before = memory_snapshot(memory)
        with pytest.raises(InvalidInput):
            pa.query(sparql, bindings)
        assert snapshot_diff(before, memory_snapshot(memory)) == []
        assert memory.board.lookup("pa", "plan:x") is not None and memory.board.lookup("pa", "plan:x")[0] == "M"


def test_check_query_accepts_what_query_runs() -> None:
    store = GraphStore()
    store.check_query("SELECT * WHERE { ?s ga:status ?o }", {"o": "open"})
    store.check_query("ASK { ?s ?p ?o }")
    with pytest.raises(InvalidInput, match="SERVICE"):
        store.check_query("SELECT * WHERE { SERVICE <http://127.0.0.1:9/> { ?s ?p ?o } }")
    with pytest.raises(InvalidInput):
        store.check_query(5)  # type: ignore[arg-type]

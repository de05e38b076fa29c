"""Fuzzing bad input: only typed errors, a refused input changes nothing, nothing is fetched.

The generators and the oracle are ``tools.reliability._fuzz``; here
hypothesis drives the same generators (``st.randoms``: every choice is a
hypothesis draw, so a failure shrinks), and ``run_fuzz`` — the bench's entry
point — is checked for determinism. The regressions for what fuzzing found
live beside their layers (tests/coherence, tests/l2, tests/core, tests/scenario).
"""

from __future__ import annotations

import random
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gliding_actors.errors import InvalidInput
from tools.reliability._fuzz import (
    SURFACES,
    Fuzzer,
    RemoteServer,
    memory_snapshot,
    run_fuzz,
    snapshot_diff,
)
from gliding_actors.system import MemorySystem


@pytest.fixture(scope="module")
def server() -> Iterator[RemoteServer]:
    with RemoteServer() as running:
        yield running


@pytest.fixture(scope="module")
def fuzzer(server: RemoteServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fuzzer]:
    root = tmp_path_factory.mktemp("fuzz")
    (root / "work").mkdir()
    memory = MemorySystem.open(root / "memory", runtime="sim", seed=3)
    try:
        yield Fuzzer(memory, root / "work", server=server)
    finally:
        memory.close(flush=False)


def test_the_snapshot_sees_every_part_it_promises(tmp_path: Path) -> None:
    """Each part of the snapshot changes when its layer does: the "changed nothing" check can fail."""
    with MemorySystem.open(tmp_path / "m", runtime="sim") as memory:
        pa = memory.agent("pa", "PA")
        empty = memory_snapshot(memory)
        pa.write("plan:x", {"summary": "held in M"}, graph="plan")
        written = memory_snapshot(memory)
        assert snapshot_diff(empty, written) == ["caches", "registry"]
        memory.submit_recall().get()
        recalled = memory_snapshot(memory)
        assert snapshot_diff(written, recalled) == ["caches", "graph", "lines"]
        memory.flush()
        assert snapshot_diff(recalled, memory_snapshot(memory)) == ["l0"]
        before = memory_snapshot(memory)
        memory.l3.register_frame("mine", "CONSTRUCT { ?s ?p ?o } WHERE { ?s ?p ?o }", {"@type": "Task"})
        assert snapshot_diff(before, memory_snapshot(memory)) == ["frames"]


def test_the_remote_server_counts_a_real_fetch(server: RemoteServer) -> None:
    """The control: a fetch that does happen is counted, so "zero requests" means something."""
    before = server.requests
    with urllib.request.urlopen(server.url("ctx"), timeout=5) as answer:  # noqa: S310 - our own local server
        assert b"@context" in answer.read()
    assert server.requests == before + 1


def test_remote_contexts_frames_service_and_load_are_never_fetched(server: RemoteServer, tmp_path: Path) -> None:
    url = server.url("ctx")
    values: list[dict[str, Any]] = [
        {"@context": url, "name": "x"},
        {"@context": [url], "name": "x"},
        {"@context": {"@import": url}, "name": "x"},
        {"@context": {"name": {"@id": "http://example.org/name", "@context": url}}, "name": {"p": 1}},
        {"data": {"@context": url, "p": 1}},
    ]
    queries = [
        f"SELECT * WHERE {{ SERVICE <{server.url('sparql')}> {{ ?s ?p ?o }} }}",
        f"SELECT * WHERE {{ SERVICE SILENT <{server.url('sparql')}> {{ ?s ?p ?o }} }}",
        f"select * where {{ # comment\n sErViCe <{server.url('sparql')}> {{ ?s ?p ?o }} }}",
    ]
    before = server.requests
    with MemorySystem.open(tmp_path / "m", runtime="sim") as memory:
        aa = memory.agent("aa", "AA")
        aa.write("decision:x", {"summary": "dirty in AA's cache"}, graph="decision")
        snapshot = memory_snapshot(memory)
        for value in values:
            with pytest.raises(InvalidInput):
                aa.write("decision:x", value, graph="decision")
        for index, value in enumerate(values):
            with pytest.raises(InvalidInput):
                memory.l3.register_frame(f"remote-{index}", "CONSTRUCT { ?s ?p ?o } WHERE { ?s ?p ?o }", value)
        for sparql in queries:
            with pytest.raises(InvalidInput, match="SERVICE"):
                aa.query(sparql)
        for update in (f"LOAD <{url}>", f"LOAD <{url}> INTO GRAPH <urn:g>"):
            with pytest.raises(InvalidInput, match="LOAD"):
                memory.graph.update(update, role_is_system=True)
        assert snapshot_diff(snapshot, memory_snapshot(memory)) == []
    assert server.requests == before


@pytest.mark.parametrize("surface", SURFACES)
def test_every_surface_gives_only_typed_errors_and_refusals_change_nothing(fuzzer: Fuzzer, surface: str) -> None:
    """Hypothesis drives the bench's generators on one shared memory; every oracle failure is reported."""
    failures_before = fuzzer.stats.failure_count

    @settings(max_examples=12, database=None)
    @given(st.randoms(use_true_random=False))
    def one(rnd: random.Random) -> None:
        seen = fuzzer.stats.failure_count
        fuzzer.run(surface, fuzzer.case(surface, rnd))
        assert fuzzer.stats.failure_count == seen, fuzzer.stats.failures[-1:]

    one()
    assert fuzzer.stats.failure_count == failures_before
    assert fuzzer.stats.by_surface[surface] >= 12


def test_run_fuzz_is_deterministic_and_finds_nothing() -> None:
    first = run_fuzz(examples=180, seed=11)
    again = run_fuzz(examples=180, seed=11)
    other = run_fuzz(examples=180, seed=12)
    assert first["fuzz_inputs"] == 180 == sum(first["by_surface"].values())
    assert set(first["by_surface"]) == set(SURFACES) and min(first["by_surface"].values()) >= 10
    for key in ("inputs_digest", "outcomes", "errors", "by_surface"):
        assert first[key] == again[key], key
    assert other["inputs_digest"] != first["inputs_digest"]
    for report in (first, other):
        assert report["failures"] == [] and report["failure_count"] == 0, report["failures"]
        assert (report["untyped_errors"], report["changed_on_refusal"], report["remote_fetches"]) == (0, 0, 0)
        assert report["serves_after"] is True
        assert report["outcomes"]["ok"] > 0 and report["outcomes"]["refused"] > 0


def test_the_oracle_counts_an_untyped_error_and_a_change_on_refusal(fuzzer: Fuzzer) -> None:
    """The oracle itself can fail: an untyped error and a refusal that changed something are both counted."""
    stats = fuzzer.stats
    untyped, changed = stats.untyped, stats.changed

    def untyped_call() -> None:
        raise KeyError("boom")

    def refuse_after_writing() -> None:
        fuzzer.agents["SA"].write("ex:oracle-check", {"n": stats.inputs})
        raise InvalidInput("refused after changing something")

    fuzzer.attempt("iri", {"op": "control"}, untyped_call, memory=False)
    fuzzer.attempt("iri", {"op": "control"}, refuse_after_writing, memory=True)
    assert (stats.untyped, stats.changed) == (untyped + 1, changed + 1)
    # put the counters back: the module's other tests assert on them
    stats.untyped, stats.changed = untyped, changed
    stats.failure_count -= 2
    del stats.failures[-2:]


@pytest.mark.slow
def test_run_fuzz_large_finds_nothing() -> None:
    report = run_fuzz(examples=20_000, seed=20261130)
    assert report["fuzz_inputs"] == 20_000
    assert report["failure_count"] == 0, report["failures"]
    assert report["serves_after"] is True


def test_run_fuzz_refuses_a_bad_size() -> None:
    with pytest.raises(ValueError, match="examples"):
        run_fuzz(examples=0, seed=1)

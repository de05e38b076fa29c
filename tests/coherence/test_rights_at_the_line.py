"""Rights are decided where the line's versions are ordered, not from the handle's registry.

The handle checks a write against the line registry first (a fast path), but
the registry learns a line's graph only once a write completes. A write that
races a create must still be judged against the graph of the version it would
overwrite, so these tests race a create by one role against a write by
another and check the line's graph, value and history afterwards.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from coherence_harness import Net

from gliding_actors import Agent, MemorySystem, PermissionDenied
from gliding_actors.l2 import PermissionMatrix

X = "review:x"
MATRIX = PermissionMatrix.default()


def _net() -> Net:
    """A CA and a DA cache judging writes with their roles' default rights."""
    rights = {"ca": lambda g, a: MATRIX.allowed("CA", g, a), "da": lambda g, a: MATRIX.allowed("DA", g, a)}
    return Net(["ca", "da"], rights=rights)


def _outcome(net: Net, op: int) -> dict[str, Any]:
    record = net.ops[op].result
    assert record is not None, f"op {op} has not completed"
    return record


def test_the_cache_refuses_a_write_over_a_version_in_a_graph_the_role_may_not_update() -> None:
    net = _net()
    made = net.issue("ca", {"t": "store", "iri": X, "value": {"verdict": "reject"}, "tags": [], "graph": "review"})
    net.drain()
    # DA's write names no graph: had it been ordered first it would have created the line in shared
    forged = net.issue("da", {"t": "store", "iri": X, "value": {"verdict": "approve"}, "tags": []})
    net.drain()
    cas = net.issue("da", {"t": "cas", "iri": X, "version": 0, "value": {"v": 0}, "tags": []})
    gone = net.issue("da", {"t": "delete", "iri": X})
    net.drain()
    net.check_quiescent()
    assert _outcome(net, made)["result"]["graph"] == "review"
    for op in (forged, cas, gone):
        refused = _outcome(net, op)
        assert refused["t"] == "failed" and refused["error"] == "PermissionDenied", refused
        assert "version" not in refused["message"]  # a refused cas says nothing of the version it found
    # nothing changed: the review is still version 1, in review, with CA's verdict
    assert net.latest(X) == ({"verdict": "reject"}, 1)
    read = net.load("ca", X)
    net.drain()
    assert _outcome(net, read)["result"] | {"messages": 0, "state": "S"} == {
        "value": {"verdict": "reject"}, "version": 1, "state": "S", "messages": 0, "graph": "review"
    }


def test_a_write_naming_no_graph_keeps_the_line_where_it_is_when_ordered() -> None:
    net = _net()
    net.issue("ca", {"t": "store", "iri": X, "value": {"n": 1}, "tags": [], "graph": "review"})
    net.drain()
    again = net.issue("ca", {"t": "store", "iri": X, "value": {"n": 2}, "tags": []})
    net.drain()
    assert _outcome(net, again)["result"]["graph"] == "review"
    new = net.issue("da", {"t": "store", "iri": "note:n", "value": {"n": 1}, "tags": []})
    net.drain()
    assert _outcome(net, new)["result"]["graph"] == "shared"


def _settle(write: object) -> int | None:
    """The version a raced write made, or None when it was refused."""
    try:
        return int(write.get(10)["version"])  # type: ignore[attr-defined]
    except PermissionDenied:
        return None


@pytest.mark.parametrize("seed", range(40))
def test_a_write_racing_the_line_registry_cannot_take_another_roles_line(seed: int) -> None:
    with MemorySystem.open(runtime="sim", seed=seed) as memory:
        ca, da = memory.agent("ca", "CA"), memory.agent("da", "DA")
        create = ca.submit_write("review:r1", {"verdict": "reject: SECRET finding"}, graph="review")
        forge = da.submit_write("review:r1", {"verdict": "approve"})
        made = _settle(create)
        forged = _settle(forge)
        assert made is not None, "the reviewer's own create is never refused"
        memory.quiesce()
        system = memory.agent("root", "system")
        line = system.read("review:r1")
        # DA may create in shared: ordered first, its line is then moved into review by CA.
        # Ordered second, it would overwrite CA's review: refused, nothing changed.
        assert forged is None or forged < made, (seed, forged, made)
        assert line["value"] == {"verdict": "reject: SECRET finding"} and line["version"] == made
        assert _graphs_of(system, "review:r1") == ["review"]
        # CA's later graph-less update stays where the line is, and DA still cannot read it.
        ca.write("review:r1", {"verdict": "reject: second look"})
        system.read("review:r1")  # brings the dirty copy home, into the graph
        assert _graphs_of(system, "review:r1") == ["review"]
        hidden = da.read("review:r1")
        assert (hidden["value"], hidden["version"]) == (None, 0)  # as if nobody wrote it


def _graphs_of(system: Agent, iri: str) -> list[str]:
    """The named graphs holding statements about ``iri`` (the system role reads all of them)."""
    rows = system.query(f"SELECT DISTINCT ?g WHERE {{ GRAPH ?g {{ <{iri}> ?p ?o }} }}")["rows"]
    return sorted(row["g"].rsplit("/", 1)[-1] for row in rows)


def _race(ca: Agent, da: Agent, sa: Agent, iri: str) -> dict[str, Any]:
    """CA creates ``iri`` in review while DA writes it naming no graph and SA deletes it, all at once."""
    start = threading.Barrier(3)
    outcomes: dict[str, Any] = {}

    def run(name: str, op: Any) -> None:
        start.wait(5)
        try:
            outcomes[name] = op()
        except PermissionDenied as error:
            outcomes[name] = error

    threads = [
        threading.Thread(target=run, args=("ca", lambda: ca.write(iri, {"verdict": "reject"}, graph="review"))),
        threading.Thread(target=run, args=("da", lambda: da.write(iri, {"verdict": "approve"}))),
        threading.Thread(target=run, args=("sa", lambda: sa.delete(iri))),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    return outcomes


def test_a_write_racing_a_create_on_threads_never_moves_the_line() -> None:
    moved = 0
    with MemorySystem.open(runtime="threads") as memory:
        ca, da, sa = memory.agent("ca", "CA"), memory.agent("da", "DA"), memory.agent("sa", "SA")
        root = memory.agent("root", "system")
        for i in range(100):
            iri = f"review:r{i}"
            outcomes = _race(ca, da, sa, iri)
            memory.quiesce()
            assert not isinstance(outcomes["ca"], PermissionDenied)
            line = root.read(iri)
            # whatever was ordered after CA's create is CA's own or refused: the review stands
            if line["value"] != {"verdict": "reject"} or line["version"] != outcomes["ca"]["version"]:
                moved += 1
    assert moved == 0, f"{moved} of 100 reviews were overwritten or deleted by a role that may not"

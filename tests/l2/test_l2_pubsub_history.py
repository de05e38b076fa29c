"""Published messages are kept in L2 (graph ``shared``) for late readers.

Every ``Agent.publish`` becomes an immutable node ``urn:gliding-actors:message:<seq>``;
``Agent.messages`` reads a topic's history in publish order, SPARQL finds the
nodes, and a payload is data: whatever keywords it holds, it puts no triple
outside its own node. Real pyoxigraph, both runtimes.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gliding_actors import InvalidInput, MemorySystem, PermissionDenied
from gliding_actors.bus import HISTORY_GRAPH, MESSAGE_IRI_PREFIX, MemoryBus, message_iri
from gliding_actors.clock import VirtualClock
from gliding_actors.l2._graph import GraphStore
from gliding_actors.l2._jsonld import graph_iri
from gliding_actors.l2._permissions import DEFAULT_GRAPH, PermissionMatrix
from gliding_actors.runtime import BACKENDS, create_runtime

JSON_LITERAL = "http://www.w3.org/1999/02/22-rdf-syntax-ns#JSON"


@pytest.fixture(params=BACKENDS)
def memory(request: pytest.FixtureRequest) -> Iterator[MemorySystem]:
    with MemorySystem.open(runtime=request.param, clock=VirtualClock(100.0)) as system:
        yield system


def test_a_late_subscriber_reads_the_history_in_publish_order(memory: MemorySystem) -> None:
    pa, ca, da = memory.agent("pa", "PA"), memory.agent("ca", "CA"), memory.agent("da", "DA")
    s1 = pa.publish("review-requests", {"artifact": "artifact:jwt", "n": 1})
    da.publish("other-topic", {"noise": True})
    memory.clock.advance(5.0)  # type: ignore[attr-defined]
    s2 = da.publish("review-requests", {"artifact": "artifact:keys", "n": 2})
    s3 = pa.publish("review-requests", {"artifact": "artifact:jwt", "n": 3})
    assert s1 < s2 < s3

    ca.subscribe("review-requests")  # late: nothing published before reaches the inbox
    assert ca.inbox() == []
    history = ca.messages("review-requests")
    assert [e["seq"] for e in history] == [s1, s2, s3]
    assert [e["message"]["n"] for e in history] == [1, 2, 3]
    assert [e["publisher"] for e in history] == ["pa", "da", "pa"]
    assert [e["published_at"] for e in history] == [100.0, 105.0, 105.0]
    assert all(e["topic"] == "review-requests" and e["type"] == "bus.event" for e in history)
    # paging: since the last seq seen, at most so many
    assert [e["seq"] for e in ca.messages("review-requests", since_seq=s1)] == [s2, s3]
    assert [e["seq"] for e in ca.messages("review-requests", since_seq=s1, limit=1)] == [s2]
    assert ca.messages("review-requests", since_seq=s3) == []
    assert ca.messages("never-used") == []
    # the history is the same as what a subscriber was delivered, plus the time
    s4 = pa.publish("review-requests", {"n": 4})
    (delivered,) = ca.inbox()
    (kept,) = ca.messages("review-requests", since_seq=s3)
    assert delivered == {k: v for k, v in kept.items() if k != "published_at"} and kept["seq"] == s4


def test_reading_the_history_sees_every_publish_the_handle_made_before(memory: MemorySystem) -> None:
    pa = memory.agent("pa", "PA")
    pending = [pa.submit_publish("t", {"i": i}) for i in range(5)]
    history = pa.submit_messages("t")  # asked of the bus, after the publishes
    assert [e["message"]["i"] for e in history.get(10.0)] == [0, 1, 2, 3, 4]
    assert [f.get(10.0)["seq"] for f in pending] == [e["seq"] for e in pa.messages("t")]


def test_sparql_finds_the_messages(memory: MemorySystem) -> None:
    pa, da = memory.agent("pa", "PA"), memory.agent("da", "DA")
    s1 = pa.publish("review-requests", {"artifact": "artifact:jwt"})
    da.publish("status", {"done": 3})
    s3 = pa.publish("review-requests", {"artifact": "artifact:keys"})
    rows = da.query(
        "SELECT ?m ?seq ?who ?payload ?topic WHERE { ?m a ga:Message ; ga:topic ?topic ; ga:seq ?seq ;"
        " ga:publisher ?who ; ga:payload ?payload } ORDER BY ?seq",
        bindings={"topic": "review-requests"},
    )["rows"]
    assert [r["m"] for r in rows] == [message_iri(s1), message_iri(s3)]
    assert [int(r["seq"]) for r in rows] == [s1, s3]
    assert {r["who"] for r in rows} == {"pa"}
    assert '"artifact:keys"' in rows[1]["payload"]  # the payload's JSON text
    ask = da.query(
        'ASK { ?m a ga:Message ; ga:payload ?p FILTER(CONTAINS(STR(?p), "artifact:jwt")) }'
    )
    assert ask == {"boolean": True}
    # in graph shared, which everyone reads
    graphs = memory.graph.query(
        "SELECT DISTINCT ?g WHERE { GRAPH ?g { ?m a ga:Message } }", graphs=None, role_is_system=True
    )["rows"]
    assert graphs == [{"g": graph_iri(HISTORY_GRAPH)}]
    assert HISTORY_GRAPH == DEFAULT_GRAPH


HOSTILE_PAYLOADS: list[dict[str, Any]] = [
    {"@id": "task:victim", "status": "hijacked"},
    {"@graph": [{"@id": "task:victim", "status": "hijacked"}]},
    {"@context": {"@vocab": "urn:evil#"}, "@id": "urn:gliding-actors:message:1", "seq": 999},
    {"@context": "https://example.com/remote-context.jsonld", "x": 1},
    {"@reverse": {"owns": {"@id": "task:victim"}}},
    {"@type": "@json", "@value": {"@id": "task:victim"}},
    {"payload": {"@id": "task:victim", "@graph": {"@id": "urn:x"}}, "@included": [{"@id": "task:victim"}]},
    {"topic": "forged", "seq": -1, "publisher": "someone-else"},
]


@pytest.mark.parametrize("payload", HOSTILE_PAYLOADS, ids=range(len(HOSTILE_PAYLOADS)))
def test_a_payload_cannot_write_outside_its_own_node(payload: dict[str, Any]) -> None:
    with MemorySystem.open(runtime="sim", clock=VirtualClock()) as memory:
        pa = memory.agent("pa", "PA")
        pa.write("task:victim", {"status": "open"}, graph="plan")
        pa.query("ASK {}")  # recalls the line into the graph
        before = memory.graph.dump()
        seq = pa.publish("t", payload)
        iri = message_iri(seq)
        added = sorted(set(memory.graph.dump()) - set(before))
        assert set(before) <= set(memory.graph.dump())  # nothing removed
        assert all(q.startswith(f"<{iri}> ") for q in added), added  # every new triple is the node's own
        assert all(q.endswith(f"<{graph_iri(HISTORY_GRAPH)}> .") for q in added), added
        kept = [q for q in added if "/ns#payload>" in q]
        assert len(kept) == 1 and JSON_LITERAL in kept[0]
        (event,) = pa.messages("t")
        assert event["message"] == payload and event["publisher"] == "pa" and event["seq"] == seq


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    payload=st.dictionaries(
        st.sampled_from(["@id", "@graph", "@context", "@type", "@value", "@reverse", "@list", "a", "b"]),
        st.recursive(
            st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=8),
            lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=6), kids, max_size=3),
            max_leaves=8,
        ),
        max_size=5,
    )
)
def test_any_json_payload_is_one_literal_on_its_own_node(payload: dict[str, Any]) -> None:
    """The bus alone over a graph: whatever the payload, the node's triples are fixed."""
    graph = GraphStore()
    runtime = create_runtime("sim", clock=VirtualClock())
    try:
        runtime.spawn("bus", lambda: MemoryBus(graph))
        bus = runtime.lookup("bus")
        seq = bus.ask({"type": "publish", "topic": "t", "message": payload, "publisher": "p", "keep": True}).get(5.0)[
            "seq"
        ]
        quads = graph.dump()
        assert len(quads) == 6  # type, topic, seq, publishedAt, publisher, payload
        assert all(q.startswith(f"<{message_iri(seq)}> ") for q in quads)
        (event,) = bus.ask({"type": "history", "topic": "t"}).get(5.0)
        assert event["message"] == payload
    finally:
        runtime.shutdown()
        graph.close()


def test_bad_topics_and_messages_are_refused_and_write_no_node(memory: MemorySystem) -> None:
    pa = memory.agent("pa", "PA")
    pa.publish("t", {"ok": 1})
    before = memory.graph.dump()
    history = pa.messages("t")
    for topic, message in [
        ("", {"x": 1}),
        (None, {"x": 1}),
        ("t", "not an object"),
        ("t", {"x": float("nan")}),
        ("t", {"x": object()}),
    ]:
        with pytest.raises(InvalidInput):
            pa.publish(topic, message)  # type: ignore[arg-type]
    bus = memory.runtime.lookup("bus")
    raws: list[dict[str, Any]] = [
        {"type": "publish", "topic": "t", "message": {"x": b"bytes"}, "publisher": "pa", "keep": True},
        {"type": "publish", "topic": "t", "message": {"x": 1}, "publisher": "pa", "keep": "yes"},
        {"type": "publish", "topic": "t", "message": {"x": 1}, "publisher": 7, "keep": True},
        {"type": "history", "topic": "t", "since_seq": -1},
        {"type": "history", "topic": "t", "limit": True},
        {"type": "history", "topic": ""},
    ]
    if memory.runtime.kind == "threads":  # the simulator refuses to carry it at all
        raws.append({"type": "publish", "topic": "t", "message": {"x": 2**70}, "publisher": "pa", "keep": True})
    for raw in raws:
        with pytest.raises(InvalidInput):
            bus.ask(raw).get(5.0)
    for since, limit in [(-1, None), (True, None), ("0", None), (0, -1), (0, 1.5)]:
        with pytest.raises(InvalidInput):
            pa.messages("t", since, limit)  # type: ignore[arg-type]
    assert memory.graph.dump() == before
    assert pa.messages("t") == history
    # a refused publish used no number: the next one follows on
    assert pa.publish("t", {"ok": 2}) == history[0]["seq"] + 1


def test_message_iris_are_not_lines(memory: MemorySystem) -> None:
    pa = memory.agent("pa", "PA")
    seq = pa.publish("t", {"x": 1})
    iri = message_iri(seq)
    assert iri.startswith(MESSAGE_IRI_PREFIX)
    before = memory.graph.dump()
    with pytest.raises(InvalidInput):
        pa.write(iri, {"x": "overwritten"})
    with pytest.raises(InvalidInput):
        pa.write(message_iri(seq + 100), {"x": "pre-empted"})
    with pytest.raises(InvalidInput):
        pa.delete(iri)
    assert memory.graph.dump() == before
    assert pa.messages("t")[0]["message"] == {"x": 1}


def test_system_notifications_are_not_kept(memory: MemorySystem) -> None:
    da = memory.agent("da", "DA")
    da.create_task("task:a")
    da.write("artifact:a", {"x": 1})  # publishes line.changed
    da.complete_task("task:a")  # publishes task.events
    for topic in ("line.changed", "task.events"):
        assert da.messages(topic) == []
    assert not [i for i in memory.graph.iris_in(HISTORY_GRAPH) if i.startswith(MESSAGE_IRI_PREFIX)]


def test_reading_and_publishing_follow_the_permission_matrix() -> None:
    with MemorySystem.open(runtime="sim", clock=VirtualClock()) as memory:
        memory.permissions = PermissionMatrix.default().merged({"DA": {"shared": "u"}})
        pa, da = memory.agent("pa", "PA"), memory.agent("da", "DA")
        pa.publish("t", {"x": 1})
        before = memory.graph.dump()
        with pytest.raises(PermissionDenied):
            da.messages("t")
        with pytest.raises(PermissionDenied):
            da.publish("t", {"x": 2})
        assert memory.graph.dump() == before
        assert [e["message"] for e in pa.messages("t")] == [{"x": 1}]


def test_the_kept_node_is_a_private_copy(memory: MemorySystem) -> None:
    pa = memory.agent("pa", "PA")
    payload: dict[str, Any] = {"items": [1, 2]}
    pa.publish("t", payload)
    payload["items"].append(3)  # the publisher's object changes afterwards
    first = pa.messages("t")[0]["message"]
    assert first == {"items": [1, 2]}
    first["items"].append(99)  # and a reader's copy is its own
    assert pa.messages("t")[0]["message"] == {"items": [1, 2]}


def test_a_restarted_bus_keeps_the_history_and_numbers_on() -> None:
    graph = GraphStore()
    runtime = create_runtime("sim", clock=VirtualClock())
    try:
        runtime.spawn("bus", lambda: MemoryBus(graph))
        bus = runtime.lookup("bus")
        for i in range(3):
            bus.ask({"type": "publish", "topic": f"t{i % 2}", "message": {"i": i}, "publisher": "p", "keep": True}).get(5.0)
        runtime.stop("bus")
        runtime.spawn("bus", lambda: MemoryBus(graph))  # a new actor over the same L2
        bus = runtime.lookup("bus")
        assert [e["seq"] for e in bus.ask({"type": "history", "topic": "t0"}).get(5.0)] == [1, 3]
        assert bus.ask({"type": "publish", "topic": "t1", "message": {}, "publisher": None, "keep": True}).get(5.0)[
            "seq"
        ] == 4
        assert [e["seq"] for e in bus.ask({"type": "history", "topic": "t1"}).get(5.0)] == [2, 4]
    finally:
        runtime.shutdown()
        graph.close()


def test_a_bus_without_a_graph_keeps_no_history() -> None:
    runtime = create_runtime("sim", clock=VirtualClock())
    try:
        runtime.spawn("bus", MemoryBus)
        bus = runtime.lookup("bus")
        bus.ask({"type": "publish", "topic": "t", "message": {}, "publisher": "p", "keep": True}).get(5.0)
        assert bus.ask({"type": "history", "topic": "t"}).get(5.0) == []
    finally:
        runtime.shutdown()

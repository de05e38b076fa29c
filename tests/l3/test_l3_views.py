"""Materialized views: hits without messages, invalidation by any node a view read, coherence.

System tests run on the deterministic runtime without quiescing between
operations, so a bus event still in flight cannot hide a stale view: a
projection right after a write must already see it. Unit tests drive the
:class:`ViewCache` directly.
"""

from __future__ import annotations

from typing import Any

import pytest

from gliding_actors.agent import Agent
from gliding_actors.errors import InvalidInput
from gliding_actors.l3 import ANY_NODE, VIEWS_ACTOR, ViewCache
from gliding_actors.runtime import Simulator
from gliding_actors.system import MemorySystem
from team import TASK, text_of


def delivered(memory: MemorySystem) -> int:
    rt = memory.runtime
    assert isinstance(rt, Simulator)
    return rt.delivered


def key(task: str, frame: str, role: str, budget: int = 0) -> tuple[str, str, str, int]:
    return (task, frame, role, budget)


# -- the system ---------------------------------------------------------------------------


def test_a_hit_is_served_without_a_message(team: dict[str, Agent], memory: MemorySystem) -> None:
    ca = team["ca"]
    first = ca.project("ca_review", TASK)
    before = delivered(memory)
    second = ca.project("ca_review", TASK)
    assert delivered(memory) == before  # no actor was asked anything
    assert first["cached"] is False and second["cached"] is True
    assert {k: v for k, v in second.items() if k != "cached"} == {k: v for k, v in first.items() if k != "cached"}
    # a private copy each time: changing one answer does not change the view
    second["jsonld"].clear()
    assert ca.project("ca_review", TASK)["jsonld"] == first["jsonld"]


def test_views_are_keyed_by_task_frame_role_and_budget(team: dict[str, Agent], memory: MemorySystem) -> None:
    team["ca"].project("reference_only", TASK)
    assert team["ca"].project("reference_only", TASK, 100)["cached"] is False  # another budget
    assert team["aa"].project("reference_only", TASK)["cached"] is False  # another scope
    assert team["ca"].project("summary_only", TASK)["cached"] is False  # another frame
    assert team["ca"].project("reference_only", "task:billing")["cached"] is False  # another task
    assert team["ca"].project("reference_only", TASK)["cached"] is True
    assert memory.l3.views.is_valid(key(TASK, "reference_only", "CA"))


def test_write_to_a_node_only_a_non_task_neighbour_links_to(team: dict[str, Agent], memory: MemorySystem) -> None:
    """The schema node is linked only by a step's parameter — not by the task, not a member."""
    pa, aa, da = team["pa"], team["aa"], team["da"]
    aa.write("schema:key-bits", {"@type": "Schema", "type": "integer", "minimum": 2048}, graph="knowledge")
    step = {
        "@type": "Step", "task": {"@id": "task:auth-refactor/impl"}, "summary": "generate the key pair",
        "instructions": "create an RS256 key pair", "parameters": [{"name": "key_bits", "schema": {"@id": "schema:key-bits"}}],
    }
    pa.write("step:auth/1", step, graph="plan")
    first = da.project("da_input", TASK)
    assert '"minimum":2048' in text_of(first).replace(" ", "")
    views = memory.l3.views
    view = key(TASK, "da_input", "DA")
    assert view in views.dependents("schema:key-bits")
    assert da.project("da_input", TASK)["cached"] is True
    aa.write("schema:key-bits", {"@type": "Schema", "type": "integer", "minimum": 4096}, graph="knowledge")
    assert not views.is_valid(view)  # invalidated as the write completed, before its bus event
    again = da.project("da_input", TASK)
    assert again["cached"] is False
    assert '"minimum":4096' in text_of(again).replace(" ", "")


def test_an_unrelated_write_keeps_the_view(team: dict[str, Agent], memory: MemorySystem) -> None:
    team["ca"].project("ca_review", TASK)
    team["pa"].write("step:billing/1", {"@type": "Step", "summary": "rewritten exporter"}, graph="plan")
    memory.quiesce()  # the bus event too
    assert team["ca"].project("ca_review", TASK)["cached"] is True


def test_a_new_line_linking_into_the_scope_invalidates(team: dict[str, Agent], memory: MemorySystem) -> None:
    ca = team["ca"]
    assert "review:jwt-2" not in ca.project("ca_review", TASK)["iris"]
    ca.write("review:jwt-2", {"@type": "Review", "reviews": {"@id": "artifact:jwt-middleware"}, "verdict": "changes"}, graph="review")
    again = ca.project("ca_review", TASK)  # no quiesce: the bus event may still be in flight
    assert again["cached"] is False and "review:jwt-2" in again["iris"]


def test_another_agents_write_back_write_is_seen(team: dict[str, Agent], memory: MemorySystem) -> None:
    ca, da = team["ca"], team["da"]
    assert "with key rotation" not in text_of(ca.project("ca_review", TASK))
    value = {"@type": "Artifact", "step": {"@id": "step:auth/2"}, "summary": "JWT middleware with key rotation"}
    assert da.write("artifact:jwt-middleware", value, graph="execution")["policy"] == "write_back"
    again = ca.project("ca_review", TASK)
    assert again["cached"] is False and "with key rotation" in text_of(again)


def test_a_delete_invalidates_and_removes_the_node(team: dict[str, Agent]) -> None:
    ca = team["ca"]
    assert "review:jwt-1" in ca.project("ca_review", TASK)["iris"]
    ca.delete("review:jwt-1")
    assert "review:jwt-1" not in ca.project("ca_review", TASK)["iris"]


@pytest.mark.parametrize(
    ("frame", "task", "max_tokens"),
    [("no_such_frame", TASK, None), ("ca_review", "", None), ("ca_review", "has space", None),
     ("ca_review", 7, None), ("ca_review", TASK, 0), ("ca_review", TASK, -3), ("ca_review", TASK, True),
     ("ca_review", TASK, 2.5)],
)
def test_bad_arguments_are_refused_and_change_nothing(
    team: dict[str, Agent], memory: MemorySystem, frame: Any, task: Any, max_tokens: Any
) -> None:
    ca = team["ca"]
    ca.project("ca_review", TASK)
    before = (delivered(memory), memory.l3.views.stats())
    with pytest.raises(InvalidInput):
        ca.submit_project(frame, task, max_tokens)
    assert (delivered(memory), memory.l3.views.stats()) == before


def test_the_view_actor_applies_bus_events(memory: MemorySystem) -> None:
    """The bus path on its own (the registry path is the other): an event bumps the node."""
    views = memory.l3.views
    views.insert(key("task:x", "summary_only", "SA"), {"jsonld": []}, stamp=views.stamp(), deps=["doc:a"], watch=[])
    event = {"iri": "doc:a", "version": 5, "agent": "nobody"}
    memory.runtime.lookup(VIEWS_ACTOR).tell({"type": "bus.event", "topic": "line.changed", "message": event, "seq": 1, "publisher": None})
    memory.quiesce()
    assert not views.is_valid(key("task:x", "summary_only", "SA"))
    assert memory.runtime.lookup(VIEWS_ACTOR).ask({"t": "stats"}).get()["changes"] >= 1


def test_views_work_on_threads() -> None:
    from team import build_team

    with MemorySystem.open(runtime="threads", config={"l3": {"counter": "estimate-v1", "workers": 2}}) as memory:
        team = build_team(memory)
        ca, da = team["ca"], team["da"]
        first = ca.project("ca_review", TASK)
        assert ca.project("ca_review", TASK)["cached"] is True
        da.write("artifact:jwt-middleware", {"@type": "Artifact", "step": {"@id": "step:auth/2"}, "summary": "v2"}, graph="execution")
        again = ca.project("ca_review", TASK)
        assert again["cached"] is False and '"summary": "v2"' in text_of(again)
        assert first["iris"] == again["iris"]


# -- the cache on its own ------------------------------------------------------------------


def test_invalidation_visits_no_view() -> None:
    """A change is one epoch bump: the views are only checked when looked up."""
    cache = ViewCache(capacity=1000)
    stamp = cache.stamp()
    for i in range(500):
        cache.insert(("t", "f", str(i), 0), {"i": i}, stamp=stamp, deps=["shared:node", f"own:{i}"], watch=[])
    assert len(cache.dependents("shared:node")) == 500
    assert cache.changed("own:7", 1) is True
    assert cache.changed("own:7", 1) is False  # the same version again: a no-op (registry then bus)
    assert cache.lookup(("t", "f", "7", 0)) is None
    assert cache.lookup(("t", "f", "8", 0)) == {"i": 8}
    cache.changed("shared:node", 1)
    assert all(not cache.is_valid(("t", "f", str(i), 0)) for i in range(500))
    assert cache.stats()["stale"] == 1


def test_a_view_computed_across_a_change_is_not_kept() -> None:
    cache = ViewCache()
    stamp = cache.stamp()  # the projection starts reading
    cache.changed("doc:a", 1)  # a write lands while it runs
    assert cache.insert(("t", "f", "r", 0), {}, stamp=stamp, deps=["doc:a"], watch=[]) is False
    assert cache.lookup(("t", "f", "r", 0)) is None


def test_new_links_invalidate_views_watching_their_target() -> None:
    links: dict[str, set[str] | None] = {"review:new": {"artifact:a"}}
    cache = ViewCache(resolver=lambda iri, version, agent: links.get(iri, set()))
    cache.insert(("t", "f", "r", 0), {}, stamp=cache.stamp(), deps=["artifact:a"], watch=["artifact:a"])
    cache.insert(("t", "g", "r", 0), {}, stamp=cache.stamp(), deps=["artifact:a"], watch=[])
    cache.changed("review:new", 1)
    assert cache.lookup(("t", "f", "r", 0)) is None  # a new member for the watching view
    assert cache.lookup(("t", "g", "r", 0)) == {}  # a view that only reads artifact:a is unaffected


def test_an_unresolved_change_makes_lookups_miss_until_resolved() -> None:
    links: dict[str, set[str] | None] = {"doc:b": None}
    cache = ViewCache(resolver=lambda iri, version, agent: links[iri])
    cache.insert(("t", "f", "r", 0), {"ok": 1}, stamp=cache.stamp(), deps=["doc:a"], watch=["doc:a"])
    cache.changed("doc:b", 1)
    assert cache.lookup(("t", "f", "r", 0)) is None and cache.stats()["unverified"] == 1
    links["doc:b"] = set()  # its value reached home: no link into the view
    assert cache.lookup(("t", "f", "r", 0)) == {"ok": 1}


def test_with_no_view_kept_a_change_waits_for_the_next_stamp_and_a_new_link_still_counts() -> None:
    """Nothing can go stale without a view, so the actor's drain does no link analysis then."""
    asked: list[str] = []

    def resolver(iri: str, version: int, agent: str | None) -> set[str]:
        asked.append(iri)
        return {"artifact:a"}

    cache = ViewCache(resolver=resolver)
    for version in (1, 2, 3):
        cache.changed("review:new", version, "ca")
        assert cache.drain() == 1  # queued once, newest change kept
    assert asked == []
    stamp = cache.stamp()  # analysed now, before the projection's reads
    assert asked == ["review:new"] and cache.drain() == 0
    cache.insert(("t", "f", "r", 0), {}, stamp=stamp, deps=["artifact:a"], watch=["artifact:a"])
    assert cache.lookup(("t", "f", "r", 0)) == {}  # the link came before the stamp: the view is valid
    cache.changed("review:other", 1, "ca")
    assert cache.drain() == 0 and asked[-1] == "review:other"  # a view is kept: analysed at once
    assert cache.lookup(("t", "f", "r", 0)) is None  # ... and it brought artifact:a a new member


def test_capacity_drops_the_least_recently_used_view() -> None:
    cache = ViewCache(capacity=2)
    for name in ("a", "b"):
        cache.insert((name, "f", "r", 0), {}, stamp=cache.stamp(), deps=[f"doc:{name}"], watch=[])
    assert cache.lookup(("a", "f", "r", 0)) == {}  # a is now the most recent
    cache.insert(("c", "f", "r", 0), {}, stamp=cache.stamp(), deps=["doc:c"], watch=[])
    assert not cache.is_valid(("b", "f", "r", 0)) and cache.is_valid(("a", "f", "r", 0))
    assert cache.dependents("doc:b") == set() and cache.stats()["evicted"] == 1


def test_a_whole_graph_view_depends_on_every_change() -> None:
    cache = ViewCache()
    cache.insert(("", "f", "r", 0), {}, stamp=cache.stamp(), deps=[ANY_NODE], watch=[])
    cache.changed("doc:anything", 1)
    assert not cache.is_valid(("", "f", "r", 0))

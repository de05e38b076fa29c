"""Intent changes: a new user_intent line far from the last one prefetches around it for every agent."""

from __future__ import annotations

import numpy as np
import pytest

from gliding_actors.context._intent import IntentWatcher
from gliding_actors.system import MemorySystem


def _unit(*values: float) -> list[float]:
    row = np.asarray(values, dtype=np.float64)
    return list(row / np.linalg.norm(row))


def test_the_rule_compares_consecutive_intents() -> None:
    watcher = IntentWatcher(change_below=0.5)
    first = watcher.observe(_unit(1, 0, 0))
    assert first.changed and first.similarity is None  # nothing before it: a change
    same_topic = watcher.observe(_unit(1, 0.5, 0))
    assert not same_topic.changed and same_topic.similarity == pytest.approx(0.894427, abs=1e-6)
    other = watcher.observe(_unit(0, 0, 1))
    assert other.changed and other.similarity == pytest.approx(0.0, abs=1e-6)
    drift = watcher.observe(_unit(0, 0.6, 1))  # compared with the last intent, not the first
    assert not drift.changed
    assert (watcher.observed, watcher.changes) == (4, 2)


def _plan(memory: MemorySystem) -> None:
    pa = memory.agent("pa", "PA")
    for task, words in (("task:auth", "switch authentication to JWT"), ("task:ui", "dashboard colours")):
        pa.write(task, {"@type": "Task", "summary": words}, graph="plan")
        for n in (1, 2):
            pa.write(f"{task}/step-{n}", {"@type": "Step", "task": {"@id": task}, "summary": f"{words}, part {n}"},
                     graph="plan")
    memory.flush()


def _intent(memory: MemorySystem, text: str, task: str) -> None:
    memory.agent("pa", "PA").write("intent:current", {"@type": "Intent", "request": text, "about": {"@id": task}},
                                   tags=["user_intent"], graph="plan")
    memory.quiesce(10)


@pytest.mark.parametrize("runtime", ["sim", "threads"])
def test_an_intent_change_loads_what_the_new_intent_needs_into_every_agents_cache(runtime: str) -> None:
    with MemorySystem.open(runtime=runtime) as memory:
        _plan(memory)
        da, ca = memory.agent("da", "DA"), memory.agent("ca", "CA")
        _intent(memory, "Switch our authentication to JWT tokens", "task:auth")
        stats = memory.context.stats()
        assert (stats["intents_written"], stats["intent_changes"]) == (1, 1)
        for agent in (da, ca):  # loaded ahead of use: hits with no message
            assert agent.read("intent:current")["messages"] == 0
            assert agent.read("task:auth")["messages"] == 0
        assert memory.inspect("task:ui/step-1")["caches"]["da"] == "I"  # the other task was not loaded

        loaded = memory.context.stats()["loaded"]
        _intent(memory, "Use JWT for auth, signed with RS256", "task:auth")  # a rewording: no change
        stats = memory.context.stats()
        assert (stats["intents_written"], stats["intent_changes"], stats["loaded"]) == (2, 1, loaded)

        _intent(memory, "Redesign the dashboard colours for dark mode", "task:ui")  # a new request
        assert memory.context.stats()["intent_changes"] == 2
        assert da.read("task:ui")["messages"] == 0 and ca.read("task:ui")["messages"] == 0


def test_a_write_without_the_intent_tag_or_with_watching_off_is_not_judged() -> None:
    with MemorySystem.open(runtime="sim") as memory:
        _plan(memory)
        memory.agent("pa", "PA").write("intent:current", {"request": "switch to JWT"}, graph="plan")
        memory.quiesce(10)
        assert memory.context.stats()["intents_written"] == 0
    with MemorySystem.open(runtime="sim", config={"prefetch": {"intent_tag": ""}}) as memory:
        _plan(memory)
        _intent(memory, "Switch our authentication to JWT tokens", "task:auth")
        assert memory.context.stats()["intents_written"] == 0


def test_an_intent_never_loads_what_a_role_may_not_read() -> None:
    config = {"permissions": {"PA": {"secret": "crud"}, "DA": {"secret": ""}}}
    with MemorySystem.open(runtime="sim", config=config) as memory:
        _plan(memory)
        memory.agent("pa", "PA").write("note:secret", {"about": {"@id": "task:auth"}, "summary": "the key"},
                                       graph="secret")
        memory.flush()
        memory.agent("da", "DA")  # a handle: the intent change prefetches for it
        _intent(memory, "Switch our authentication to JWT tokens", "task:auth")
        assert memory.inspect("note:secret")["caches"]["da"] == "I"
        assert memory.inspect("task:auth")["caches"]["da"] == "S"

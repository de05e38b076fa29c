"""MemorySystem.stats(): every figure checked against what the test did, on a real memory.

The simulator makes each run one schedule, so counts are exact; the op
results' own ``messages`` (exact per op, docs/COHERENCE.md) are the
independent witness of the protocol message counts.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest

from gliding_actors.errors import InvalidInput
from gliding_actors.metrics import INSTALL_HINT, line_text, serve
from gliding_actors.metrics._counters import percentile
from gliding_actors.system import MemorySystem

PLAN = {"@type": "Plan", "name": "auth", "steps": ["issue jwt", "rotate refresh tokens", "revoke on logout"]}


@pytest.fixture
def memory() -> Iterator[MemorySystem]:
    with MemorySystem.open(runtime="sim", seed=3) as system:
        yield system


def test_hits_misses_tokens_and_messages_are_exact(memory: MemorySystem) -> None:
    writer, reader = memory.agent("w", "DA"), memory.agent("r", "DA")
    count = memory.counters.counter.count
    ops = [writer.write("artifact:plan", PLAN, graph="execution")]
    v1_tokens = count(line_text("artifact:plan", PLAN))
    ops += [writer.read("artifact:plan") for _ in range(3)]  # own write: 3 hits
    ops += [reader.read("artifact:plan") for _ in range(4)]  # 1 miss, 3 hits
    revised = {**PLAN, "steps": [*PLAN["steps"], "audit"]}
    ops.append(writer.write("artifact:plan", revised, graph="execution"))  # invalidates the reader
    v2_tokens = count(line_text("artifact:plan", revised))
    ops += [reader.read("artifact:plan") for _ in range(2)]  # 1 miss (re-sent once), 1 hit
    co = memory.stats()["coherence"]
    assert co["agents"]["w"] == {
        "reads": 3, "hits": 3, "board_hits": 3, "local_hits": 0, "misses": 0, "fills": 0,
        "tokens_saved": 3 * v1_tokens, "tokens_fetched": 0,
    }  # fmt: skip
    assert co["agents"]["r"] == {
        "reads": 6, "hits": 4, "board_hits": 4, "local_hits": 0, "misses": 2, "fills": 2,
        "tokens_saved": 3 * v1_tokens + v2_tokens, "tokens_fetched": v1_tokens + v2_tokens,
    }  # fmt: skip
    assert (co["reads"], co["hits"], co["misses"]) == (9, 7, 2)
    assert co["hit_rate"] == round(7 / 9, 6)
    # every protocol message is counted once, by kind: the ops' own exact counts agree
    assert co["messages_total"] == sum(op["messages"] for op in ops) > 0
    assert co["messages"]["GetS"] == 2 and co["messages"]["Inv"] == 1 and co["messages"]["Inv-Ack"] == 1
    assert co["writes"] == {"write_back": 2, "write_through": 0}
    assert co["miss_latency_us"]["samples"] == 2
    tokens = memory.stats()["tokens"]
    assert tokens["saved"] == 6 * v1_tokens + v2_tokens and tokens["fetched"] == v1_tokens + v2_tokens
    assert tokens["naive"] == tokens["saved"] + tokens["fetched"]


def test_a_shard_answers_its_tally_and_counts_from_elsewhere_are_added(memory: MemorySystem) -> None:
    """What a shard in another process (Ray) reports: here the same tally the system reads itself."""
    pa, ca = memory.agent("pa", "PA"), memory.agent("ca", "CA")
    pa.write("plan:auth", PLAN, tags=["confirmed_fact"])
    ca.read("plan:auth")
    tally = memory.runtime.lookup("dir:0").ask({"t": "tally"}).get(5.0)
    assert tally["sent"] == memory.counters.actor("dir:0").sent and tally["sent"]["WT-Ack"] == 1
    assert memory.tallies_elsewhere() == {}  # every shard counts in this process
    here = memory.counters.coherence()
    both = memory.counters.coherence({"dir:9": {"sent": {"WT-Ack": 2, "Inv": 1}, "writes": {}}})
    assert both["messages"]["WT-Ack"] == here["messages"]["WT-Ack"] + 2
    assert both["messages_total"] == here["messages_total"] + 3


def test_a_hit_is_counted_without_any_message(memory: MemorySystem) -> None:
    agent = memory.agent("a", "DA")
    agent.write("artifact:x", {"n": 1}, graph="execution")
    memory.quiesce()
    sim = memory.runtime
    before_hash = sim.log_hash()  # type: ignore[attr-defined]
    for _ in range(50):
        agent.read("artifact:x")
    assert sim.log_hash() == before_hash  # type: ignore[attr-defined]
    assert memory.counters.agent("a").snapshot()["hits"] == 50


def test_write_policies_and_evictions(memory: MemorySystem) -> None:
    agent = memory.agent("a", "DA")
    agent.write("artifact:fact", {"n": 1}, tags=["confirmed_fact"], graph="execution")  # critical: write-through
    agent.write("artifact:note", {"n": 1}, graph="execution")
    agent.evict("artifact:note")
    agent.evict("artifact:fact")
    co = memory.stats()["coherence"]
    assert co["writes"] == {"write_back": 1, "write_through": 1}
    assert co["evictions"] == 2 == co["messages"]["PutM"]
    assert co["messages"]["WT"] == 1 and co["messages"]["WT-Ack"] == 1


def test_miss_latency_percentiles_use_the_injected_clock(memory: MemorySystem) -> None:
    ticks = iter(float(t) for t in range(1000))
    memory.counters.now = lambda: next(ticks) * 0.001  # 1 ms per reading
    writer, reader = memory.agent("w", "DA"), memory.agent("r", "DA")
    for i in range(4):
        writer.write(f"artifact:{i}", {"i": i}, graph="execution")
    for i in range(4):
        reader.read(f"artifact:{i}")  # a miss each: the clock is read at send and at answer
    latency = memory.stats()["coherence"]["miss_latency_us"]
    assert latency == {"p50": 1000.0, "p99": 1000.0, "samples": 4}
    assert memory.stats()["coherence"]["latency_clock"] == "test_miss_latency_percentiles_use_the_injected_clock.<locals>.<lambda>"


def test_percentile_is_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 50) == 50.0
    assert percentile(values, 99) == 99.0
    assert percentile([7.0], 99) == 7.0
    assert percentile([], 50) == 0.0


def test_other_layers_figures(memory: MemorySystem) -> None:
    a, b = memory.agent("a", "DA"), memory.agent("b", "DA")
    a.write("artifact:jwt", {"name": "jwt refresh rotation plan"}, graph="execution")
    a.turn("planned the jwt rotation", content="rotate refresh tokens daily")
    a.create_task("task:auth")
    a.lock("res:plan", timeout_s=0.0)
    waiting = b.submit_lock("res:plan", timeout_s=30.0)
    memory.quiesce()
    a.unlock("res:plan")
    assert waiting.get(5.0)["granted"] is True
    found = a.search("jwt rotation")
    assembled = a.context("jwt rotation", max_tokens=300)
    stats = memory.stats()
    assert stats["l1"]["agents"]["a"]["turns"] == 1 and stats["l1"]["turns"] == 1
    assert stats["l1"]["tokens"] == a.session()["tokens"] > 0
    assert stats["l2"]["lock_waits"] == 1 and stats["l2"]["locks_held"] == 1 and stats["l2"]["locks_waiting"] == 0
    assert stats["l2"]["tasks"] == 1 and stats["l2"]["lines"] >= 1
    assert stats["hyperspace"]["queries"] >= 2  # our search and the context's recall
    assert found["iris"], "the search found the line it was asked about"
    assert stats["context"]["assembled"] == 1
    assert stats["context"]["tokens_assembled"] == assembled["tokens"] > 0
    assert stats["l0"]["bytes"] > 0 and stats["l0"]["records"] == memory.l0.count()
    assert stats["l3"]["view_hits"] == memory.l3.stats()["hits"]


def test_serve_refuses_bad_input_and_starts_nothing(memory: MemorySystem, monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    threads = threading.active_count()
    for port in (-1, 70000, "9100", True):
        with pytest.raises(InvalidInput):
            serve(memory, port=port)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput):
        serve(memory, addr="")
    monkeypatch.setitem(sys.modules, "prometheus_client", None)  # as if the extra were missing
    with pytest.raises(InvalidInput) as missing:
        serve(memory)
    assert INSTALL_HINT in str(missing.value) and "prometheus_client" in str(missing.value)
    assert threading.active_count() == threads


def test_an_agent_keeps_at_most_max_tallies_live_and_its_totals_stay_exact(
    memory: MemorySystem, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each live tally holds its copy's packed value alive: past the cap the
    oldest is settled into the totals, so reading ever new IRIs stays bounded."""
    import gliding_actors.metrics._counters as counters

    monkeypatch.setattr(counters, "MAX_TALLIES", 8)
    agent = memory.agent("a", "DA")
    iris = [f"artifact:t{i}" for i in range(30)]
    for i, iri in enumerate(iris):
        agent.write(iri, {"@type": "Note", "n": i}, graph="execution")
    for _ in range(2):
        for iri in iris:
            agent.read(iri)
    tallies = memory.counters.agent("a").tallies
    assert len(tallies) == 8
    assert list(tallies) == iris[-8:]  # the newest copies stay live
    co = memory.stats()["coherence"]["agents"]["a"]
    assert (co["reads"], co["hits"], co["misses"]) == (60, 60, 0)  # own writes: every read a hit, none lost
    assert co["tokens_saved"] == 2 * sum(
        memory.counters.counter.count(line_text(iri, {"@type": "Note", "n": i})) for i, iri in enumerate(iris)
    )

"""MemoryBus fan-out order and the MemorySystem facade, on every backend."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from gliding_actors import ActorUnavailable, InvalidInput
from gliding_actors.bus import BUS_ACTOR, MemoryBus
from gliding_actors.clock import VirtualClock
from gliding_actors.runtime import BACKENDS, Context, Runtime, Simulator, ThreadsRuntime
from gliding_actors.system import MemorySystem


@pytest.fixture(params=BACKENDS)
def system(request: pytest.FixtureRequest) -> Any:
    with MemorySystem.open(runtime=request.param, clock=VirtualClock()) as memory:
        yield memory


def test_publish_order_is_kept_for_every_subscriber(system: MemorySystem) -> None:
    pa, da, ca, aa = (system.agent(i, r) for i, r in [("pa", "PA"), ("da", "DA"), ("ca", "CA"), ("aa", "AA")])
    ca.subscribe("review")
    aa.subscribe("review")
    aa.subscribe("other")
    seqs = []
    for i in range(5):
        seqs.append(pa.publish("review", {"n": i, "by": "pa"}))
        seqs.append(da.publish("review", {"n": i, "by": "da"}))
    da.publish("other", {"n": 99})
    assert seqs == sorted(seqs)
    for agent in (ca, aa):
        events = agent.inbox()
        review = [e for e in events if e["topic"] == "review"]
        assert [e["seq"] for e in review] == seqs
        assert [e["message"] for e in review][:2] == [{"n": 0, "by": "pa"}, {"n": 0, "by": "da"}]
    assert ca.inbox() == []  # drained
    assert pa.inbox() == []  # never subscribed


def test_publish_refuses_bad_input_and_changes_nothing(system: MemorySystem) -> None:
    pa, ca = system.agent("pa", "PA"), system.agent("ca", "CA")
    ca.subscribe("t")
    with pytest.raises(InvalidInput):
        pa.publish("t", ["not", "an", "object"])  # type: ignore[arg-type]
    with pytest.raises(InvalidInput):
        pa.publish("t", {"x": float("nan")})
    with pytest.raises(InvalidInput):
        pa.publish("", {"x": 1})
    with pytest.raises(InvalidInput):
        ca.subscribe("")
    assert ca.inbox() == []
    assert pa.publish("t", {"x": 1}) == 1  # no sequence number was used up


class Listener:
    def __init__(self) -> None:
        self.events: list[Any] = []

    def receive(self, message: Any, ctx: Context) -> Any:
        if message == "events":
            return self.events
        self.events.append(message)
        return None


def test_actor_subscribers_are_pushed_events_in_order(system: MemorySystem) -> None:
    rt: Runtime = system.runtime
    rt.spawn("listener", Listener)
    bus = rt.lookup(BUS_ACTOR)
    bus.ask({"type": "subscribe", "topic": "views", "subscriber": "listener", "mode": "push"}).get(2.0)
    pa = system.agent("pa", "PA")
    for i in range(10):
        pa.publish("views", {"i": i})
    if isinstance(rt, Simulator):
        rt.run_until_quiescent()
    else:
        assert isinstance(rt, ThreadsRuntime)
        rt.wait_quiescent(5.0)
    events = rt.lookup("listener").ask("events").get(2.0)
    assert [e["message"]["i"] for e in events] == list(range(10))
    bus.ask({"type": "unsubscribe", "topic": "views", "subscriber": "listener"}).get(2.0)
    assert pa.publish("views", {"i": 10}) == 11


def test_bus_refuses_malformed_messages() -> None:
    bus = MemoryBus()
    with pytest.raises(InvalidInput):
        bus.receive("nope", None)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput):
        bus.receive({"type": "explode"}, None)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput):
        bus.receive({"type": "subscribe", "topic": "t", "subscriber": "x", "mode": "carrier-pigeon"}, None)  # type: ignore[arg-type]


def test_agents_are_registered_once_per_id(system: MemorySystem) -> None:
    pa = system.agent("pa", "PA")
    assert system.agent("pa", "PA") is pa
    with pytest.raises(InvalidInput, match="already has role PA"):
        system.agent("pa", "DA")
    with pytest.raises(InvalidInput, match="unknown role"):
        system.agent("zz", "XX")
    with pytest.raises(InvalidInput):
        system.agent("has space", "PA")
    assert set(system.agents()) == {"pa"}


def test_open_makes_and_removes_a_temporary_directory() -> None:
    with MemorySystem.open() as memory:
        where = memory.path
        assert where.is_dir()
        assert memory.runtime.kind == "threads"
    assert not where.exists()
    assert memory.closed
    with pytest.raises(ActorUnavailable):
        memory.agent("pa", "PA")


def test_open_keeps_a_given_directory(tmp_path: Path) -> None:
    target = tmp_path / "mem"
    with MemorySystem.open(target, config={"l1": {"token_budget": 50}}, runtime="sim") as memory:
        assert memory.config.l1.token_budget == 50
        assert memory.runtime.kind == "sim"
    assert target.is_dir()


def test_open_refuses_bad_arguments() -> None:
    with pytest.raises(InvalidInput, match="unknown runtime"):
        MemorySystem.open(runtime="carrier-pigeon")
    with pytest.raises(InvalidInput, match="unknown config key"):
        MemorySystem.open(config={"nope": 1})
    with pytest.raises(InvalidInput, match="address names a Ray cluster"):
        MemorySystem.open(runtime="threads", address="127.0.0.1:6379")


def test_an_integer_beyond_64_bits_is_refused_before_anything_is_sent() -> None:
    """msgpack carries values between actors and into the board: a value it
    cannot hold is bad input at the handle, on every runtime alike."""
    from gliding_actors import InvalidInput, MemorySystem

    for runtime in ("sim", "threads"):
        with MemorySystem.open(runtime=runtime) as memory:
            sa = memory.agent("sa", "SA")
            with pytest.raises(InvalidInput, match="64 bits"):
                sa.write("note:big", {"n": 2**70})
            with pytest.raises(InvalidInput, match="64 bits"):
                sa.publish("t", {"n": -(2**70)})
            assert sa.read("note:big")["version"] == 0


class _Sends:
    """What a handler sent: a Context with only ``send`` (the bus needs nothing else here)."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, dict[str, Any]]] = []

    def send(self, dst: str, message: dict[str, Any]) -> None:
        self.sent.append((dst, message))


def _keyed_bus() -> tuple[MemoryBus, _Sends]:
    bus, ctx = MemoryBus(keyed={"line.changed": ("iri", "version")}), _Sends()
    bus.receive({"type": "subscribe", "topic": "line.changed", "subscriber": "all", "mode": "push"}, ctx)  # type: ignore[arg-type]
    bus.receive(
        {"type": "subscribe", "topic": "line.changed", "subscriber": "s1", "mode": "push", "keyed": True}, ctx  # type: ignore[arg-type]
    )
    return bus, ctx


def _changed(bus: MemoryBus, ctx: _Sends, iri: str, version: int) -> dict[str, int]:
    message = {"type": "publish", "topic": "line.changed", "message": {"iri": iri, "version": version}, "publisher": "pa"}
    result: dict[str, int] = bus.receive(message, ctx)  # type: ignore[arg-type]
    return result


def test_a_keyed_subscriber_is_pushed_only_the_keys_it_wants() -> None:
    bus, ctx = _keyed_bus()
    assert _changed(bus, ctx, "a", 1) == {"seq": 1, "delivered": 1}  # the unkeyed subscriber only
    bus.receive({"type": "interest", "topic": "line.changed", "subscriber": "s1", "add": {"b": 0}}, ctx)  # type: ignore[arg-type]
    assert _changed(bus, ctx, "b", 1)["delivered"] == 2
    assert _changed(bus, ctx, "a", 2)["delivered"] == 1
    assert [(dst, m["message"]["iri"]) for dst, m in ctx.sent] == [("all", "a"), ("all", "b"), ("s1", "b"), ("all", "a")]
    bus.receive({"type": "interest", "topic": "line.changed", "subscriber": "s1", "remove": ["b"]}, ctx)  # type: ignore[arg-type]
    assert _changed(bus, ctx, "b", 2)["delivered"] == 1
    assert bus.state.wanted_by["line.changed"] == {}  # nothing left indexed for a key nobody wants


def test_interest_in_a_key_changed_since_it_was_seen_is_answered_at_once() -> None:
    bus, ctx = _keyed_bus()
    _changed(bus, ctx, "a", 3)
    ctx.sent.clear()
    bus.receive({"type": "interest", "topic": "line.changed", "subscriber": "s1", "add": {"a": 3}}, ctx)  # type: ignore[arg-type]
    assert ctx.sent == []  # seen the newest already
    bus.receive({"type": "interest", "topic": "line.changed", "subscriber": "s1", "add": {"a": 2}}, ctx)  # type: ignore[arg-type]
    assert [(dst, m["message"]) for dst, m in ctx.sent] == [("s1", {"iri": "a", "version": 3})]


def test_unsubscribing_drops_a_keyed_subscribers_keys() -> None:
    bus, ctx = _keyed_bus()
    bus.receive({"type": "interest", "topic": "line.changed", "subscriber": "s1", "add": {"a": 0}}, ctx)  # type: ignore[arg-type]
    bus.receive({"type": "unsubscribe", "topic": "line.changed", "subscriber": "s1"}, ctx)  # type: ignore[arg-type]
    assert _changed(bus, ctx, "a", 1)["delivered"] == 1
    assert bus.state.interests["line.changed"] == {} and bus.state.wanted_by["line.changed"] == {}


@pytest.mark.parametrize(
    "message",
    [
        {"type": "subscribe", "topic": "other", "subscriber": "x", "mode": "push", "keyed": True},  # not a keyed topic
        {"type": "subscribe", "topic": "line.changed", "subscriber": "x", "mode": "mailbox", "keyed": True},
        {"type": "subscribe", "topic": "line.changed", "subscriber": "x", "mode": "push", "keyed": "yes"},
        {"type": "interest", "topic": "line.changed", "subscriber": "nobody", "add": {"a": 0}},
        {"type": "interest", "topic": "line.changed", "subscriber": "all", "add": {"a": 0}},  # not keyed
        {"type": "interest", "topic": "line.changed", "subscriber": "s1", "add": {"a": "0"}},
        {"type": "interest", "topic": "line.changed", "subscriber": "s1", "add": ["a"]},
        {"type": "interest", "topic": "line.changed", "subscriber": "s1", "remove": "a"},
    ],
)
def test_bad_keyed_requests_are_refused_and_change_nothing(message: dict[str, Any]) -> None:
    bus, ctx = _keyed_bus()
    before = copy.deepcopy(bus.state)
    with pytest.raises(InvalidInput):
        bus.receive(message, ctx)  # type: ignore[arg-type]
    assert bus.state == before and ctx.sent == []


@pytest.mark.parametrize("topic", ["line.changed", "task.events", "agent.stale", "actor.crashed"])
def test_system_topics_are_open_to_agents_no_more(topic: str) -> None:
    """An agent's publish on a system topic is refused and changes nothing: a forged
    ``line.changed`` used to break every agent's search until the memory was reopened."""
    from gliding_actors import PermissionDenied

    with MemorySystem.open(runtime="sim") as memory:
        pa, da = memory.agent("pa", "PA"), memory.agent("da", "DA")
        pa.subscribe(topic)
        pa.write("plan:p1", {"goal": "ship the search"})
        pa.inbox()  # what the write itself said
        with pytest.raises(PermissionDenied, match="system topic"):
            da.publish(topic, {"iri": "bad iri", "version": 1})
        assert pa.inbox() == []
        assert da.messages(topic) == []
        assert pa.search("search")["iris"] == ["plan:p1"]
        assert da.context("search", 500)["tokens"] > 0


def _deep_dict(levels: int) -> Any:
    value: Any = "x"
    for _ in range(levels):
        value = {"a": value}
    return value


def test_untyped_errors_from_public_methods_are_typed_and_change_nothing() -> None:
    """Each call that raised TypeError, OverflowError, UnicodeEncodeError or RecursionError is a
    typed refusal now; ``inf`` waits without limit, as documented."""
    import math

    with MemorySystem.open(runtime="threads") as memory:
        pa = memory.agent("pa", "PA")
        board = memory.board.holders()
        refused: list[Any] = [
            lambda: pa.write("plan:p", {"n": 1}, tags=5),  # type: ignore[arg-type]
            lambda: pa.lock("r", timeout_s="1"),  # type: ignore[arg-type]
            lambda: pa.create_task("task:t", depends_on=5),  # type: ignore[arg-type]
            lambda: pa.attach_to_task("task:t", 5),  # type: ignore[arg-type]
            lambda: pa.read(_deep_dict(10_000)),  # type: ignore[arg-type]
            lambda: pa.read("plan:p", timeout=-1.0),
            lambda: pa.read("plan:p", timeout=float("nan")),
            lambda: memory.agent("\ud800", "DA"),
            lambda: memory.agent("\x00", "DA"),
            lambda: memory.agent("da", ["DA"]),  # type: ignore[arg-type]
            lambda: pa.publish("\ud800", {}),
        ]
        for call in refused:
            with pytest.raises(InvalidInput):
                call()
        assert memory.board.holders() == board  # a refused agent id made no cache
        assert sorted(memory.agents()) == ["pa"]
        assert memory.team() == {"pa": memory.team()["pa"]}
        # inf: no limit (docs/L2.md), never an OverflowError
        assert pa.lock("r", timeout_s=math.inf, timeout=math.inf) is not None
        pa.write("plan:p", {"n": 1}, timeout=math.inf)
        assert pa.read("plan:p", timeout=math.inf)["value"] == {"n": 1}


def test_any_agent_can_stop_a_system_actor_for_good_no_more() -> None:
    """Malformed input to L3 crashed its workers (a surrogate task id, a 2**70 budget); more than
    the restart intensity stopped them for good. Each is a refusal now, and nothing crashes."""
    with MemorySystem.open(runtime="threads") as memory:
        da = memory.agent("da", "DA")
        for _ in range(12):  # more than runtime.max_restarts (10) had any of them crashed an actor
            for bad in (lambda: da.project(task="\ud800"), lambda: da.project(max_tokens=2**70)):
                with pytest.raises(InvalidInput):
                    bad()
        crashed = {name: a["crashes"] for name, a in memory.supervision()["actors"].items() if a["crashes"]}
        assert crashed == {}
        assert da.project(max_tokens=500)["tokens"] <= 500


def test_a_publish_over_the_node_size_cap_is_refused() -> None:
    """Values are capped at l0.max_node_bytes; a published message (it becomes a node) was not."""
    with MemorySystem.open(runtime="sim", config={"l0": {"max_node_bytes": 4096}}) as memory:
        pa, ca = memory.agent("pa", "PA"), memory.agent("ca", "CA")
        ca.subscribe("reviews")
        with pytest.raises(InvalidInput, match="l0.max_node_bytes"):
            pa.publish("reviews", {"text": "x" * 5000})
        assert ca.inbox() == [] and pa.messages("reviews") == []
        assert pa.publish("reviews", {"text": "x" * 100}) >= 1


def test_metadata_of_unreadable_graphs_leaks_no_more() -> None:
    """A DA subscribed to line.changed heard of CA's review lines (their IRIs, versions, writer), and
    a turn could cite a review line to learn when it changed. The bus now shows an agent only the
    events of graphs its role may read, and a turn citing a line it may not read cites it as it would
    a line nobody wrote: version 0, and never marked stale by its changes."""
    with MemorySystem.open(runtime="sim") as memory:
        ca, da = memory.agent("ca", "CA"), memory.agent("da", "DA")
        aa = memory.agent("aa", "AA")  # AA reads every graph
        da.subscribe("line.changed")
        aa.subscribe("line.changed")
        ca.write("review:reject-pr-42-for-fraud", {"verdict": "reject"}, graph="review")
        ca.write("plan:p1", {"goal": "ship"})
        memory.quiesce()
        heard = [event["message"]["iri"] for event in da.inbox()]
        assert heard == ["plan:p1"]
        assert [event["message"]["iri"] for event in aa.inbox()] == ["review:reject-pr-42-for-fraud", "plan:p1"]
        da.turn("checked the review", cites=["review:reject-pr-42-for-fraud"], tokens=5)
        da.turn("checked a note nobody wrote", cites=["review:nobody-wrote-this"], tokens=5)
        ca.write("review:reject-pr-42-for-fraud", {"verdict": "reject, confirmed"})
        memory.quiesce()
        hidden, absent = da.session()["turns"]
        assert hidden["cites"] == ["review:reject-pr-42-for-fraud"] and absent["cites"] == ["review:nobody-wrote-this"]
        assert hidden["stale_lines"] == absent["stale_lines"] == []


def test_existence_is_no_oracle_an_unreadable_line_reads_as_an_absent_one() -> None:
    """Reading an existing unreadable line raised PermissionDenied while an unknown IRI read as None,
    so a read told DA which reviews exist. Both now read alike: a miss the first time, then hits,
    no value and version 0."""
    with MemorySystem.open(runtime="sim") as memory:
        ca, da = memory.agent("ca", "CA"), memory.agent("da", "DA")
        ca.write("review:reject-pr-42-for-fraud", {"verdict": "reject"}, graph="review")
        memory.quiesce()
        existing = [da.read("review:reject-pr-42-for-fraud") for _ in range(2)]
        unknown = [da.read("review:no-such-review") for _ in range(2)]
        assert [(r["value"], r["version"]) for r in existing + unknown] == [(None, 0)] * 4
        assert existing[0]["messages"] > 0 and unknown[0]["messages"] > 0  # both a miss first
        assert existing[1]["messages"] == unknown[1]["messages"] == 0  # then both a hit
        assert da.get("review:reject-pr-42-for-fraud") is None and da.get("review:no-such-review") is None


def test_the_publish_size_cap_measures_any_message_it_accepts() -> None:
    """The size check measured L0's canonical JSON, which raised an untyped TypeError on a
    non-string key before the bus could refuse it; now the refusal is the typed one (fuzzing found it)."""
    with MemorySystem.open(runtime="sim") as memory:
        pa = memory.agent("pa", "PA")
        with pytest.raises(InvalidInput):
            pa.publish("t", {1: "one"})  # type: ignore[dict-item]
        assert pa.messages("t") == []


def test_a_line_can_write_statements_into_nodes_of_other_graphs_no_more() -> None:
    """DA's shared note described CA's review (``verdict: approve``) and the review's projections
    then showed both verdicts. A nested node naming another line may only refer to it now."""
    with MemorySystem.open(runtime="sim") as memory:
        ca, da = memory.agent("ca", "CA"), memory.agent("da", "DA")
        ca.write("review:r1", {"verdict": "reject"}, graph="review")
        forged = {"about": {"@id": "task:t1"}, "see": {"@id": "review:r1", "verdict": "approve"}}
        aliased = {"@context": {"id": "@id"}, "see": {"id": "review:r1", "verdict": "approve"}}
        reversed_ = {"@reverse": {"verdict": {"@id": "review:r1"}}}
        for value in (forged, aliased, reversed_):  # however the JSON-LD spells it
            with pytest.raises(InvalidInput, match="not describe it"):
                da.write("note:innocent", value)
        assert da.read("note:innocent")["version"] == 0  # nothing was written
        rows = memory.agent("aa", "AA").query("SELECT ?v WHERE { <review:r1> ?p ?v }")["rows"]
        assert sorted(r["v"] for r in rows) == ["reject"]
        # a reference, the line's own fragments and blank nodes stay allowed
        da.write("note:ok", {"see": {"@id": "review:r1"}, "steps": [{"@id": "note:ok#1", "do": "x"}]})


def test_an_undrained_inbox_is_unbounded_no_more() -> None:
    """20,000 undrained publishes grew the bus by 147 MB, and an SA subscribed to line.changed kept one
    event per write by anyone. A mailbox now holds agents.inbox_events; the oldest are dropped and counted,
    and the next drain says how many before what is left."""
    with MemorySystem.open(runtime="sim", config={"agents": {"inbox_events": 50}}) as memory:
        pa, sa = memory.agent("pa", "PA"), memory.agent("sa", "SA")
        sa.subscribe("chatter")
        sa.subscribe("line.changed")
        for n in range(300):
            pa.publish("chatter", {"n": n})
        for n in range(30):
            pa.write(f"note:{n}", {"n": n})
        memory.quiesce()
        events = sa.inbox()
        assert len(events) == 51 and events[0]["type"] == "bus.dropped"
        assert events[0]["message"] == {"dropped": 280, "max_inbox": 50}
        # what is left is the newest, in publish order
        assert [e["message"]["n"] for e in events[1:21]] == list(range(280, 300))
        assert [e["message"]["iri"] for e in events[21:]] == [f"note:{n}" for n in range(30)]
        pa.publish("chatter", {"n": 300})
        assert [e["message"] for e in sa.inbox()] == [{"n": 300}]  # the count starts again


def test_a_read_served_from_the_cache_refuses_a_bad_timeout_as_a_miss_does() -> None:
    with MemorySystem.open(runtime="threads") as memory:
        pa = memory.agent("pa", "PA")
        pa.write("plan:p", {"n": 1})
        assert pa.read("plan:p")["messages"] == 0  # a hit
        for bad in (-1.0, float("nan"), "1"):
            with pytest.raises(InvalidInput):
                pa.read("plan:p", timeout=bad)  # type: ignore[arg-type]
        assert pa.read("plan:p", timeout=float("inf"))["value"] == {"n": 1}

"""The hypothesis state machine over the real controllers (shared by the stateful and mutation tests).

Three agents, two lines, one or two directory shards, caches of one or two lines
(so LRU evictions happen). Rules issue client ops at any time (ops queue per
line), send recalls, and deliver the head of a channel hypothesis picks:
hypothesis, not a scheduler, chooses the interleaving. After every step the
harness checks every always-on invariant; at teardown everything is drained and
the quiescent invariants (stable states, directory agreement, every op
completed exactly once, every recall answered) must hold.
"""

from __future__ import annotations

from coherence_harness import CRITICAL, Net
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

AGENTS = ["a", "b", "c"]
LINES = ["urn:x", "urn:y"]

agents = st.sampled_from(AGENTS)
lines = st.sampled_from(LINES)


class CoherenceMachine(RuleBasedStateMachine):
    """Load / store / cas / delete / evict / recall by 3 agents on 2 lines, any interleaving."""

    bugs: frozenset[str] = frozenset()

    def __init__(self) -> None:
        super().__init__()
        self.net: Net | None = None
        self.writes = 0

    @initialize(
        caps=st.lists(st.integers(1, 2), min_size=len(AGENTS), max_size=len(AGENTS)),
        shards=st.sampled_from([1, 2]),
    )
    def setup(self, caps: list[int], shards: int) -> None:
        self.net = Net(
            AGENTS,
            directories=shards,
            capacity=dict(zip(AGENTS, caps, strict=True)),
            bugs=self.bugs,
        )

    @property
    def n(self) -> Net:
        assert self.net is not None
        return self.net

    def _value(self) -> dict[str, int]:
        self.writes += 1
        return {"w": self.writes}

    @rule(agent=agents, iri=lines)
    def load(self, agent: str, iri: str) -> None:
        self.n.load(agent, iri)

    @rule(agent=agents, iri=lines, critical=st.booleans())
    def store(self, agent: str, iri: str, critical: bool) -> None:
        self.n.store(agent, iri, self._value(), [CRITICAL] if critical else [])

    @rule(agent=agents, iri=lines, fresh=st.booleans())
    def cas(self, agent: str, iri: str, fresh: bool) -> None:
        seen = self.n.seen.get((agent, iri), 0)
        self.n.cas(agent, iri, seen if fresh else seen + 1, self._value())

    @rule(agent=agents, iri=lines)
    def delete(self, agent: str, iri: str) -> None:
        self.n.delete(agent, iri)

    @rule(agent=agents, iri=lines)
    def evict(self, agent: str, iri: str) -> None:
        self.n.evict(agent, iri)

    @rule(scope=st.sampled_from([None, ["urn:x"], ["urn:y"], LINES]))
    def recall(self, scope: list[str] | None) -> None:
        for name in self.n.dir_names:
            self.n.recall(name, scope)

    # Delivery gets three rules so that messages move about as often as ops are issued.
    @precondition(lambda self: self.net is not None and self.net.in_flight() > 0)
    @rule(pick=st.integers(0, 63))
    def deliver(self, pick: int) -> None:
        chans = self.n.pending_channels()
        self.n.deliver(chans[pick % len(chans)])

    @precondition(lambda self: self.net is not None and self.net.in_flight() > 0)
    @rule(pick=st.integers(0, 63))
    def deliver_again(self, pick: int) -> None:
        self.deliver(pick)

    @precondition(lambda self: self.net is not None and self.net.in_flight() > 0)
    @rule(pick=st.integers(0, 63), count=st.integers(1, 4))
    def deliver_some(self, pick: int, count: int) -> None:
        for _ in range(count):
            if self.n.in_flight():
                self.deliver(pick)

    @invariant()
    def invariants_hold(self) -> None:
        if self.net is not None:
            self.net.check()

    def teardown(self) -> None:
        if self.net is not None:
            self.net.drain()
            self.net.check_quiescent()


def machine_with(bugs: frozenset[str]) -> type[CoherenceMachine]:
    """A subclass of the machine whose controllers carry ``bugs``."""
    return type(f"CoherenceMachine_{'_'.join(sorted(bugs))}", (CoherenceMachine,), {"bugs": bugs})

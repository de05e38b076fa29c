"""Mutation check: known protocol bugs, patched into the real controllers, must be caught.

Each bug is a source patch of the real :class:`CacheController` /
:class:`DirectoryController` (``mutants.py``), not a copy of the protocol. For each one both
the exhaustive check (2 agents x 1 line x 2 ops) and the hypothesis state
machine (derandomized, so the outcome is fixed) must report a failure. Run
with ``-s`` to see what each check reported.
"""

from __future__ import annotations

import pytest
from coherence_explore import explore
from coherence_machine import machine_with
from hypothesis import HealthCheck, Phase, settings
from hypothesis.stateful import run_state_machine_as_test

MUTATIONS = {
    # flag: what the bug is
    "accept_stale_putm": "directory takes a PutM from a cache that is no longer the owner",
    "gets_from_memory": "directory answers GetS for an E/M line from home instead of forwarding",
    "no_ack_after_puts": "a cache that receives Inv after sending PutS does not ack",
    "fwd_gets_while_acking": "a writer answers Fwd-GetS while still collecting Inv-Acks",
    "ignore_acks": "a writer takes M on Data without waiting for the Inv-Acks",
}

FIND = settings(
    max_examples=300,
    stateful_step_count=60,
    deadline=None,
    derandomize=True,
    database=None,
    phases=[Phase.explicit, Phase.generate],  # finding is enough; shrinking only costs time
    suppress_health_check=list(HealthCheck),
)


@pytest.mark.parametrize("bug", sorted(MUTATIONS))
def test_exhaustive_check_catches(bug: str) -> None:
    res = explore(["a", "b"], 2, ["load", "store", "evict"], bugs=frozenset({bug}))
    assert res.violation is not None, f"exhaustive check missed {bug}: {MUTATIONS[bug]}"
    print(f"\n{bug}: exhaustive found after {res.states} states: {res.violation.splitlines()[0]}")
    print("  trace: " + "; ".join(res.trace))


@pytest.mark.parametrize("bug", sorted(MUTATIONS))
def test_state_machine_catches(bug: str) -> None:
    with pytest.raises(Exception) as caught:
        run_state_machine_as_test(machine_with(frozenset({bug})), settings=FIND)
    first = str(caught.value).splitlines()[0] if str(caught.value) else ""
    print(f"\n{bug}: hypothesis found {type(caught.value).__name__}: {first}")


def test_the_correct_protocol_passes_the_same_checks() -> None:
    """The control: with no bug both checks stay green, so a catch above means the bug."""
    assert explore(["a", "b"], 2, ["load", "store", "evict"]).violation is None
    run_state_machine_as_test(machine_with(frozenset()), settings=FIND)

"""Crashes in the middle of a protocol transaction, and the seeded fault sweep.

Each recovery path is driven to its exact interleaving with
``Simulator.step(channel)`` and ``Simulator.inject`` (a crash at this very
delivery, with everything else still in flight); then the run is finished and
the line must serve with the values the durability contract promises.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from gliding_actors import ActorUnavailable, InvalidInput, MemorySystem
from gliding_actors.clock import VirtualClock
from gliding_actors.coherence._cache import CacheController
from gliding_actors.coherence._directory import DirectoryController
from gliding_actors.errors import ActorCrashed
from gliding_actors.runtime import Simulator
from tests.coherence.dict_home import DictHome
from tools.reliability._faults import FaultPlan, _crashable, run_faults

X = "plan:x"


@pytest.fixture
def memory() -> Iterator[MemorySystem]:
    system = MemorySystem.open(
        runtime="sim",
        clock=VirtualClock(),
        seed=5,
        config={"coherence": {"critical_tags": ["confirmed_fact"]}, "runtime": {"max_restarts": 1000}},
    )
    yield system
    system.close(flush=False)


def sim_of(memory: MemorySystem) -> Simulator:
    rt = memory.runtime
    assert isinstance(rt, Simulator)
    return rt


def deliver(memory: MemorySystem, src: str, dst: str) -> None:
    assert sim_of(memory).step((src, dst)), f"nothing in flight from {src} to {dst}"


def directory(memory: MemorySystem) -> DirectoryController:
    behaviour = sim_of(memory).behaviour("dir:0")
    controller: DirectoryController = getattr(behaviour, "inner", behaviour).controller
    return controller


def cache_state(memory: MemorySystem, agent: str) -> str:
    """The state of X in ``agent``'s cache, read off the controller: asking the actor would let
    the simulator deliver whatever else is in flight while it waits for the answer."""
    behaviour = sim_of(memory).behaviour(f"cache:{agent}")
    controller: CacheController = getattr(behaviour, "inner", behaviour).controller
    return controller.state(X)


def crashes(memory: MemorySystem, actor: str) -> int:
    return int(memory.supervision()["actors"][actor]["crashes"])


def line(memory: MemorySystem) -> dict[str, Any]:
    return memory.inspect(X, timeout=5.0)


# -- a crashed cache ------------------------------------------------------------------


def test_a_fwd_getm_in_flight_to_a_crashed_owner_is_answered_from_home(memory: MemorySystem) -> None:
    pa, da = memory.agent("pa", "PA"), memory.agent("da", "DA")
    pa.write(X, {"v": 1}, tags=["confirmed_fact"])  # home and L0 hold v1
    pa.write(X, {"v": 2})  # v2 only in pa's M copy
    memory.quiesce()
    write = da.submit_write(X, {"v": "da"})
    deliver(memory, "@driver", "cache:da")  # GetM
    deliver(memory, "cache:da", "dir:0")  # Fwd-GetM to pa now in flight; da is the owner
    sim_of(memory).inject("cache:pa", {"t": "crash"})

    got = write.get(5.0)  # pa's next life Nacks the Fwd-GetM; the directory answers da from home

    # pa's write-back v2 died with it (the directory reported that), and home fenced
    # the surviving v1 above any version pa may have acknowledged: v2 is never reused
    iri, survived, served = directory(memory).fallbacks[-1]
    assert (iri, survived) == (X, 1) and served >= 1 << 32
    assert got["version"] == served + 1
    memory.quiesce()
    assert line(memory)["owner"] == "da"
    assert pa.read(X)["value"] == {"v": "da"}
    assert crashes(memory, "cache:pa") == 1 and crashes(memory, "cache:da") == 0


def test_an_inv_in_flight_to_a_crashed_sharer_is_acked_by_its_next_life(memory: MemorySystem) -> None:
    pa, da, ca = memory.agent("pa", "PA"), memory.agent("da", "DA"), memory.agent("ca", "CA")
    pa.write(X, {"v": 1})
    assert da.read(X)["value"] == {"v": 1}
    memory.quiesce()
    assert line(memory)["sharers"] == ["da", "pa"]
    write = ca.submit_write(X, {"v": 2})
    deliver(memory, "@driver", "cache:ca")
    deliver(memory, "cache:ca", "dir:0")  # Data(acks=2) to ca, Inv to pa and da in flight
    sim_of(memory).inject("cache:da", {"t": "crash"})

    assert write.get(5.0)["version"] == 2  # da's next life acked the Inv meant for its dead self
    memory.quiesce()
    assert line(memory)["owner"] == "ca"
    assert da.read(X)["value"] == {"v": 2}
    assert crashes(memory, "cache:da") == 1 and crashes(memory, "cache:ca") == 0


def test_a_crash_with_the_caches_own_getm_in_flight_drops_the_old_answer(memory: MemorySystem) -> None:
    pa = memory.agent("pa", "PA")
    write = pa.submit_write(X, {"v": 1})
    deliver(memory, "@driver", "cache:pa")
    deliver(memory, "cache:pa", "dir:0")  # Data for the dead life in flight; the directory made pa owner
    sim_of(memory).inject("cache:pa", {"t": "crash"})
    with pytest.raises(ActorCrashed):
        write.get(5.0)
    memory.quiesce()  # the Data reaches the next life before the Reclaim-Ack: dropped
    assert line(memory)["directory"] == "I"
    # the Reclaim cannot know pa never wrote: it fenced the line at the next epoch's first version
    assert pa.write(X, {"v": 2})["version"] == (1 << 32) + 1
    assert crashes(memory, "cache:pa") == 1


def test_a_crash_with_the_caches_own_gets_in_flight_drops_the_owners_data(memory: MemorySystem) -> None:
    pa, da = memory.agent("pa", "PA"), memory.agent("da", "DA")
    da.write(X, {"v": 1})
    memory.quiesce()
    read = pa.submit_read(X)
    deliver(memory, "@driver", "cache:pa")
    deliver(memory, "cache:pa", "dir:0")  # Fwd-GetS to da
    deliver(memory, "dir:0", "cache:da")  # Data to pa (incarnation 0) and home in flight
    sim_of(memory).inject("cache:pa", {"t": "crash"})
    with pytest.raises(ActorCrashed):
        read.get(5.0)
    memory.quiesce()  # da's Data names pa's dead life: dropped, not taken as an answer
    assert line(memory)["sharers"] == ["da"]
    got = pa.read(X)
    assert (got["value"], got["version"]) == ({"v": 1}, 1)
    assert crashes(memory, "cache:pa") == 1


def test_a_cache_that_dies_again_before_its_reclaim_ack_ignores_the_first_ack(memory: MemorySystem) -> None:
    pa, ca = memory.agent("pa", "PA"), memory.agent("ca", "CA")
    pa.write(X, {"v": 1})
    memory.quiesce()
    sim = sim_of(memory)
    sim.inject("cache:pa", {"t": "crash"})  # second life
    deliver(memory, "cache:pa", "dir:0")  # its Reclaim: the Reclaim-Ack is now in flight
    read = pa.submit_read(X)
    deliver(memory, "@driver", "cache:pa")
    deliver(memory, "cache:pa", "dir:0")  # GetS of the second life: Data(excl) behind the ack
    write = ca.submit_write(X, {"v": "ca"})
    deliver(memory, "@driver", "cache:ca")
    deliver(memory, "cache:ca", "dir:0")  # Fwd-GetM to the second life, behind its Data
    sim.inject("cache:pa", {"t": "crash"})  # third life: the second life's ack must not open its gate
    with pytest.raises(ActorCrashed):
        read.get(5.0)
    # the Fwd-GetM was Nacked; pa's write-back v1 was lost, and its line fenced above it
    assert write.get(5.0)["version"] > 1 << 32
    memory.quiesce()
    assert line(memory)["owner"] == "ca"
    assert crashes(memory, "cache:pa") == 2  # the two injected, no ProtocolError
    assert pa.read(X)["value"] == {"v": "ca"}


def test_the_injector_never_crashes_a_cache_that_waits_for_a_getm() -> None:
    cache = CacheController("c1", "dir", 4)
    assert _crashable(cache)
    cache.handle("@client", {"t": "store", "iri": X, "op": 1, "value": {"v": 1}})
    assert cache.state(X) == "IM_AD"
    assert not _crashable(cache)


# -- a crashed directory --------------------------------------------------------------


def test_a_directory_crash_with_a_request_in_flight_serves_it_after_the_census(memory: MemorySystem) -> None:
    pa, da = memory.agent("pa", "PA"), memory.agent("da", "DA")
    pa.write(X, {"v": 1})
    memory.quiesce()
    read = da.submit_read(X)
    deliver(memory, "@driver", "cache:da")  # GetS in flight to the directory
    sim_of(memory).inject("dir:0", {"t": "crash"})
    got = read.get(5.0)
    assert (got["value"], got["version"]) == ({"v": 1}, 1)
    memory.quiesce()
    assert line(memory)["sharers"] == ["da", "pa"]
    assert memory.runtime.lookup("dir:0").ask({"t": "ready"}).get(5.0)["notes"] == []


def test_a_directory_that_crashes_during_its_census_serves_what_the_census_held_back(
    memory: MemorySystem,
) -> None:
    """The rebuilt directory held back a GetM while it waited for the caches' census answers, then
    crashed again: the GetM died with it and the writer waited forever (the fault injector never
    crashed a recovering directory). The held-back protocol messages now outlive the directory (its
    home keeps them) and the next census serves them; an answer to the dead census is dropped."""
    pa, da = memory.agent("pa", "PA"), memory.agent("da", "DA")
    pa.write(X, {"v": 1})
    da.read(X)  # both have talked to the directory: its census asks both
    memory.quiesce()
    sim = sim_of(memory)
    sim.inject("dir:0", {"t": "crash"})
    write = da.submit_write(X, {"v": "da"})
    deliver(memory, "@driver", "cache:da")
    deliver(memory, "cache:da", "dir:0")  # the GetM: held back, the census is not complete
    deliver(memory, "dir:0", "cache:pa")  # pa answers the first census ...
    deliver(memory, "cache:pa", "dir:0")  # ... and the directory takes that answer
    assert directory(memory).recovering
    sim.inject("dir:0", {"t": "crash"})  # dies during its census
    got = write.get(5.0)
    assert got["policy"] == "write_back" and got["version"] == 2
    memory.quiesce()
    assert line(memory)["owner"] == "da" and line(memory)["directory"] == "EM"
    assert memory.runtime.lookup("dir:0").ask({"t": "ready"}).get(5.0)["notes"] == []
    assert pa.read(X)["value"] == {"v": "da"}
    assert crashes(memory, "dir:0") == 2


def test_a_directory_that_crashes_in_s_d_restores_the_line_and_the_requests_behind_it(
    memory: MemorySystem,
) -> None:
    """The directory forwarded da's GetS to the owner pa (S_D: waiting for pa's Data) and deferred
    ca's GetM behind it, then crashed. A census cannot tell any of that (pa may not even have the
    Fwd-GetS yet), so the fault injector never crashed a directory with a line in S_D. The host now
    mirrors every S_D line beside the home; the rebuilt directory restores it as it was, takes pa's
    Data when it comes, and serves ca's GetM after it."""
    pa, da, ca = memory.agent("pa", "PA"), memory.agent("da", "DA"), memory.agent("ca", "CA")
    pa.write(X, {"v": 1})
    da.read(X)
    ca.read(X)
    pa.write(X, {"v": 2})  # pa owns it in M; da and ca have talked to the directory
    memory.quiesce()
    read = da.submit_read(X)
    deliver(memory, "@driver", "cache:da")
    deliver(memory, "cache:da", "dir:0")  # Fwd-GetS to pa in flight: S_D
    write = ca.submit_write(X, {"v": "ca"})
    deliver(memory, "@driver", "cache:ca")
    deliver(memory, "cache:ca", "dir:0")  # deferred behind the S_D
    assert directory(memory).inspect(X)["directory"] == "S_D"
    sim_of(memory).inject("dir:0", {"t": "crash"})
    assert read.get(5.0)["value"] == {"v": 2}
    got = write.get(5.0)
    assert got["version"] == 3
    memory.quiesce()
    assert line(memory)["directory"] == "EM" and line(memory)["owner"] == "ca"
    assert memory.runtime.lookup("dir:0").ask({"t": "ready"}).get(5.0)["notes"] == []
    assert da.read(X)["value"] == {"v": "ca"} and pa.read(X)["version"] == 3
    assert crashes(memory, "dir:0") == 1


def test_a_directory_that_crashes_during_a_flush_fails_the_flush_and_forgets_it(memory: MemorySystem) -> None:
    """A flush's recall opened an S_D line (Fwd-GetS to the owner) when the directory crashed: the
    flush fails with the crash, the line completes on its own, and the home forgets the flush (it
    used to keep counting capacity write-downs for it forever)."""
    pa = memory.agent("pa", "PA")
    pa.write(X, {"v": 1})
    memory.quiesce()
    flush = memory.runtime.lookup("dir:0").ask({"t": "flush", "iris": None})
    deliver(memory, "@driver", "dir:0")  # the recall: Fwd-GetS to pa in flight
    assert directory(memory).inspect(X)["directory"] == "S_D"
    sim_of(memory).inject("dir:0", {"t": "crash"})
    with pytest.raises(ActorCrashed):
        flush.get(5.0)
    memory.quiesce()
    home = getattr(sim_of(memory).behaviour("dir:0"), "inner", None) or sim_of(memory).behaviour("dir:0")
    assert home.home._flushing == {}
    assert line(memory)["directory"] == "S"  # pa's Data came home: the restored S_D completed
    memory.flush(timeout=5.0)
    assert memory.durable_version(X) == 1


def test_a_putm_from_a_dead_life_reaches_home_when_the_next_life_already_asks_again(
    memory: MemorySystem,
) -> None:
    """pa was evicting its dirty v2 (PutM in flight) when the directory crashed; then pa crashed too,
    and its next life asked for the line again (GetM) before it answered the census. The rebuild
    placed the putter as owner only if it reported the line in I, so the PutM was taken for stale
    and dropped: the acknowledged v2 vanished unreported and the next write took v2 again (fault
    seed 20261895). A putter whose new life holds no data of the line (its request still coming) is
    now placed as the owner its PutM was sent by."""
    pa, da = memory.agent("pa", "PA"), memory.agent("da", "DA")
    pa.write(X, {"v": 1}, tags=["confirmed_fact"])  # home and L0 hold v1
    da.read(X)  # da has talked to the directory: the census asks it too
    pa.write(X, {"v": 2})  # v2 only in pa's M copy
    memory.quiesce()
    sim = sim_of(memory)
    evict = pa.submit_evict(X)
    deliver(memory, "@driver", "cache:pa")  # the PutM v2 in flight
    sim.inject("dir:0", {"t": "crash"})
    deliver(memory, "cache:pa", "dir:0")  # held back by the census
    sim.inject("cache:pa", {"t": "crash"})  # its Reclaim now in flight, behind the PutM
    with pytest.raises(ActorCrashed):
        evict.get(5.0)
    write = pa.submit_write(X, {"v": 3})
    deliver(memory, "@driver", "cache:pa")
    got = write.get(5.0)
    assert got["version"] == 3  # above the acknowledged v2, which came home
    memory.quiesce()
    assert memory.runtime.lookup("dir:0").ask({"t": "l2.versions", "iris": [X]}).get(5.0) == {X: 2}
    assert da.read(X)["value"] == {"v": 3}


def test_a_directory_crash_with_a_reader_in_is_d_makes_it_a_sharer(memory: MemorySystem) -> None:
    pa, da = memory.agent("pa", "PA"), memory.agent("da", "DA")
    pa.write(X, {"v": 1})
    memory.quiesce()
    read = da.submit_read(X)
    deliver(memory, "@driver", "cache:da")
    deliver(memory, "cache:da", "dir:0")  # Fwd-GetS to pa
    deliver(memory, "dir:0", "cache:pa")  # pa: Data to da (in flight) and home
    deliver(memory, "cache:pa", "dir:0")  # the directory leaves S_D: sharers pa, da
    assert cache_state(memory, "da") == "IS_D"
    sim_of(memory).inject("dir:0", {"t": "crash"})
    got = read.get(5.0)
    assert got["value"] == {"v": 1}
    memory.quiesce()
    assert line(memory)["directory"] == "S" and line(memory)["sharers"] == ["da", "pa"]
    assert memory.runtime.lookup("dir:0").ask({"t": "ready"}).get(5.0)["notes"] == []
    # and the rebuilt sharers are exactly the ones invalidated by the next write
    assert pa.write(X, {"v": 2})["messages"] == 4


def test_a_directory_crash_with_a_writer_in_im_ad_makes_it_the_owner(memory: MemorySystem) -> None:
    pa, da = memory.agent("pa", "PA"), memory.agent("da", "DA")
    pa.write(X, {"v": 1})
    memory.quiesce()
    write = da.submit_write(X, {"v": 2})
    deliver(memory, "@driver", "cache:da")
    deliver(memory, "cache:da", "dir:0")  # Fwd-GetM to pa in flight; da is the owner
    sim_of(memory).inject("dir:0", {"t": "crash"})
    assert write.get(5.0)["version"] == 2
    memory.quiesce()
    assert line(memory)["owner"] == "da"
    assert pa.read(X)["value"] == {"v": 2}


def test_rebuild_places_copies_caught_mid_transaction() -> None:
    d = DirectoryController("dir", DictHome())
    notes = d.rebuild(
        {
            "c1": {"x:1": "IM_AD", "x:2": "IS_D", "x:3": "SM_AD"},
            "c2": {"x:1": "MW_A", "x:2": "S", "x:3": "S"},
            "c3": {"x:2": "IS_D"},
        },
        deferred={"c2": {"x:1": [("Fwd-GetM", "c1")]}},
        coming={"c1": {"x:3"}, "c3": {"x:2"}},
    )
    assert notes == []
    assert d.inspect("x:1") == {"directory": "EM", "owner": "c1", "sharers": []}  # c2 still owes it the data
    assert d.inspect("x:2") == {"directory": "S", "owner": None, "sharers": ["c1", "c2"]}  # c3's GetS is coming
    assert d.inspect("x:3") == {"directory": "S", "owner": None, "sharers": ["c1", "c2"]}  # c1's upgrade is coming


# -- the simulator's fault hooks and a process crash mid-run --------------------------


def test_a_held_channel_is_delivered_later_but_in_order() -> None:
    sim = Simulator(seed=1)
    order: list[Any] = []

    class Sink:
        def receive(self, message: Any, ctx: Any) -> None:
            order.append(message)

    sim.spawn("a", Sink)
    sim.spawn("b", Sink)
    for i in range(3):
        sim.lookup("a").tell(("a", i))
    sim.hold(("@driver", "a"), 10)
    for i in range(3):
        sim.lookup("b").tell(("b", i))
    # "a" is held while "b" has mail; nothing is lost and each channel stays FIFO
    sim.run_until_quiescent()
    assert order == [("b", 0), ("b", 1), ("b", 2), ("a", 0), ("a", 1), ("a", 2)]
    with pytest.raises(InvalidInput):
        sim.hold(("@driver", "a"), -1)


def test_a_process_crash_mid_run_keeps_every_completed_write_through(memory: MemorySystem) -> None:
    pa, da = memory.agent("pa", "PA"), memory.agent("da", "DA")
    assert pa.write(X, {"v": 1}, tags=["confirmed_fact"])["version"] == 1
    pending = da.submit_write(X, {"v": 2}, tags=["confirmed_fact"])
    deliver(memory, "@driver", "cache:da")  # its GetM dies in flight with the process
    reopened = memory.crash_process(quiesce=False)
    try:
        with pytest.raises(ActorUnavailable):
            pending.get(1.0)
        assert reopened.l0.retrieve_version(X) == 1
        got = reopened.agent("pa", "PA").read(X)
        assert (got["value"], got["version"]) == ({"v": 1}, 1)
    finally:
        reopened.close(flush=False)


# -- the seeded sweep -------------------------------------------------------------------


def _clean(figures: dict[str, Any]) -> None:
    assert figures["failures"] == []
    assert figures["invariant_violations"] == 0
    assert figures["hung_ops"] == 0
    assert figures["untyped_errors"] == 0
    assert figures["serve_failures"] == 0


def test_the_fault_sweep_keeps_every_invariant() -> None:
    figures = run_faults(seeds=range(12), steps=300)
    _clean(figures)
    kinds = figures["by_kind"]
    assert kinds["cache_crash"] > 0 and kinds["directory_crash"] > 0 and kinds["delay"] > 0
    assert figures["faults_injected"] == sum(kinds.values())
    assert figures["ops"] > 200


def test_the_benchmarks_quick_fault_sweep_keeps_every_invariant() -> None:
    """The seeds and size of ``bench reliability --quick`` (200 seeds x 400 steps, about 20 s here),
    on every CI run: two broken promises landed unseen when only the 12-seed sweep above ran (seed
    20261148, an acknowledged write dropped by a directory waiting on a dying owner; seed 20261299, a
    tombstone read as a line nobody wrote after a process crash)."""
    figures = run_faults(seeds=range(20261130, 20261330), steps=400)
    assert figures["failures"] == [], "\n".join(
        f"seed {f['seed']} step {f['step']}: {f['what']}: {f['detail']}" for f in figures["failures"]
    )
    _clean(figures)
    assert figures["by_kind"]["process_crash"] > 0


def test_a_process_crash_in_the_sweep_keeps_the_durability_contract() -> None:
    plan = FaultPlan(p_process=1.0, p_fault=0.02)  # the first fault of each seed kills the process
    # 400 steps: a seed draws no fault at all in 200 with probability 0.98**200 (1.8 %)
    figures = run_faults(seeds=range(3), steps=400, plan=plan)
    _clean(figures)
    assert figures["by_kind"]["process_crash"] == 3


def test_the_injector_never_crashes_a_directory_while_it_takes_its_census() -> None:
    """Seed 20261151 crashes a directory again while it recovers (at step 172 onwards) when the
    injector cannot see the census: what the directory held back died with it and eight ops hung."""
    figures = run_faults(seeds=[20261151], steps=400)
    assert figures["by_kind"]["directory_crash"] > 0
    assert figures["hung_ops"] == 0, figures["failures"]


def test_the_same_seeds_give_the_same_run() -> None:
    first = run_faults(seeds=[7, 8], steps=150)
    again = run_faults(seeds=[7, 8], steps=150)
    assert first == again
    assert run_faults(seeds=[9], steps=150)["log_hash"] != first["log_hash"]


@pytest.mark.slow
def test_the_long_fault_sweep_keeps_every_invariant() -> None:
    figures = run_faults(seeds=range(200), steps=1000)
    _clean(figures)
    assert figures["by_kind"]["process_crash"] > 0

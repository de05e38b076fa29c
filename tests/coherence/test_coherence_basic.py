"""Unit tests of each protocol transition, driven message by message through the harness."""

from __future__ import annotations

from typing import Any

import msgpack
import pytest
from coherence_harness import CRITICAL, Net
from dict_home import DictHome

from gliding_actors.coherence import (
    CLIENT,
    CacheController,
    DirectoryController,
    ProtocolError,
    directory_shard,
)
from gliding_actors.errors import InvalidInput

X, Y, Z = "urn:x", "urn:y", "urn:z"
A2D, B2D, C2D = ("a", "dir"), ("b", "dir"), ("c", "dir")
D2A, D2B, D2C = ("dir", "a"), ("dir", "b"), ("dir", "c")


def result(net: Net, op: int) -> dict[str, Any]:
    rec = net.ops[op].result
    assert rec is not None, f"op {op} has not completed"
    assert rec["t"] == "done", rec
    res: dict[str, Any] = rec["result"]
    return res


def settle(net: Net) -> None:
    net.drain()
    net.check_quiescent()


def shared_by(net: Net, agents: list[str], iri: str = X) -> None:
    """Bring ``iri`` to S in every one of ``agents`` (2+)."""
    for a in agents:
        net.load(a, iri)
        settle(net)
    assert net.dirs["dir"].inspect(iri) == {
        "directory": "S",
        "owner": None,
        "sharers": sorted(agents),
    }


# -- reads ------------------------------------------------------------------------------
def test_first_read_of_an_unheld_line_is_granted_E_for_two_messages() -> None:
    net = Net(["a", "b"])
    op = net.load("a", X)
    assert net.pending_channels() == [A2D]
    settle(net)
    assert result(net, op) == {"value": None, "version": 0, "state": "E", "messages": 2, "graph": None}
    assert net.dirs["dir"].inspect(X) == {"directory": "EM", "owner": "a", "sharers": []}


def test_hit_costs_no_message_and_is_answered_at_once() -> None:
    net = Net(["a", "b"])
    net.load("a", X)
    settle(net)
    assert net.caches["a"].can_complete_locally({"t": "load", "iri": X, "op": 99})
    op = net.load("a", X)
    assert net.in_flight() == 0
    assert result(net, op)["messages"] == 0
    assert net.caches["a"].lookup(X) == ("E", None, 0)


def test_read_of_a_line_owned_elsewhere_is_forwarded_and_both_end_S() -> None:
    net = Net(["a", "b"])
    net.store("a", X, {"v": 1})
    settle(net)
    op = net.load("b", X)
    settle(net)
    # GetS, Fwd-GetS, Data to b, Data home.
    assert result(net, op) == {"value": {"v": 1}, "version": 1, "state": "S", "messages": 4, "graph": "shared"}
    assert net.home.l2[X] == ({"v": 1}, 1)
    assert net.home.l0 == {}  # write-back: home's L2 got it, nothing durable was asked for
    assert net.caches["a"].state(X) == "S"


def test_read_from_S_home_is_two_messages() -> None:
    net = Net(["a", "b", "c"])
    shared_by(net, ["a", "b"])
    op = net.load("c", X)
    settle(net)
    assert result(net, op)["messages"] == 2
    assert result(net, op)["state"] == "S"


# -- writes -----------------------------------------------------------------------------
def test_E_to_M_is_silent() -> None:
    net = Net(["a"])
    net.load("a", X)
    settle(net)
    assert net.caches["a"].can_complete_locally({"t": "store", "iri": X, "op": 9, "value": {}})
    op = net.store("a", X, {"v": 1})
    assert net.in_flight() == 0
    assert result(net, op) == {"version": 1, "state": "M", "messages": 0, "policy": "write_back", "graph": "shared"}
    assert net.home.l2 == {}  # write-back: still only in a's cache


def test_write_miss_on_an_unheld_line_is_two_messages() -> None:
    net = Net(["a"])
    op = net.store("a", X, {"v": 1})
    settle(net)
    assert result(net, op) == {"version": 1, "state": "M", "messages": 2, "policy": "write_back", "graph": "shared"}


def test_write_to_a_line_a_lone_reader_holds_E_is_three_messages() -> None:
    net = Net(["a", "b"])
    net.load("a", X)
    settle(net)
    op = net.store("b", X, {"v": 1})
    settle(net)
    assert result(net, op)["messages"] == 3


def test_write_miss_on_a_line_owned_elsewhere_is_three_messages() -> None:
    net = Net(["a", "b"])
    net.store("a", X, {"v": 1})
    settle(net)
    op = net.store("b", X, {"v": 2})
    settle(net)
    assert result(net, op)["messages"] == 3  # GetM, Fwd-GetM, Data
    assert net.caches["a"].state(X) == "I"
    assert net.caches["b"].lookup(X) == ("M", {"v": 2}, 2)


def test_upgrade_from_S_invalidates_the_other_sharers() -> None:
    net = Net(["a", "b", "c"])
    shared_by(net, ["a", "b", "c"])
    op = net.store("a", X, {"v": 1})
    assert net.caches["a"].state(X) == "SM_AD"
    # The old copy still reads (upgrade in flight) and reports S.
    assert net.caches["a"].lookup(X) == ("S", None, 0)
    settle(net)
    assert result(net, op) == {
        "version": 1,
        "state": "M",
        "messages": 2 * 2 + 2,
        "policy": "write_back",
        "graph": "shared",
    }
    assert net.caches["b"].state(X) == "I" and net.caches["c"].state(X) == "I"
    assert net.dirs["dir"].inspect(X) == {"directory": "EM", "owner": "a", "sharers": []}


@pytest.mark.parametrize("k", [1, 4, 16])
def test_write_to_a_line_with_k_sharers_costs_2k_plus_2(k: int) -> None:
    sharers = [f"s{i:02d}" for i in range(k)]
    net = Net([*sharers, "tmp", "w"])
    shared_by(net, [*sharers, "tmp"])
    net.evict("tmp", X)  # (a lone reader would hold E, not S)
    settle(net)
    assert net.dirs["dir"].inspect(X)["sharers"] == sharers
    op = net.store("w", X, {"v": 1})
    settle(net)
    assert result(net, op)["messages"] == 2 * k + 2


def test_inv_acks_may_arrive_before_data() -> None:
    net = Net(["a", "b", "c"])
    shared_by(net, ["a", "b"])
    op = net.store("c", X, {"v": 1})
    net.deliver(C2D)  # directory: Data(acks=2) to c, Inv to a and b
    net.deliver(D2A)
    net.deliver(D2B)
    net.deliver(("a", "c"))  # first Inv-Ack, before the Data
    assert net.caches["c"].state(X) == "IM_AD"
    net.deliver(("b", "c"))  # second Inv-Ack, still before the Data
    assert net.caches["c"].state(X) == "IM_AD"
    assert net.ops[op].result is None
    net.deliver(D2C)  # Data: all acks already in, straight to M
    assert result(net, op) == {"version": 1, "state": "M", "messages": 6, "policy": "write_back", "graph": "shared"}
    settle(net)


def test_data_then_acks_waits_in_IM_A() -> None:
    net = Net(["a", "b", "c"])
    shared_by(net, ["a", "b"])
    op = net.store("c", X, {"v": 1})
    net.deliver(C2D)
    net.deliver(D2C)
    assert net.caches["c"].state(X) == "IM_A"
    net.deliver(D2A)
    net.deliver(("a", "c"))
    assert net.caches["c"].state(X) == "IM_A"
    net.deliver(D2B)
    net.deliver(("b", "c"))
    assert result(net, op)["state"] == "M"
    settle(net)


def test_forwarded_request_waits_while_acks_are_collected() -> None:
    """Fwd-GetS reaching a writer still in IM_A is deferred on that line only."""
    net = Net(["a", "b", "c"])
    shared_by(net, ["a", "b"])
    net.store("c", X, {"v": 1})
    net.deliver(C2D)
    net.deliver(D2C)  # c: IM_A, waiting for two acks
    net.load("c", Y)  # another line of c keeps flowing
    net.deliver(D2A)
    net.deliver(("a", "c"))
    net.load("a", X)  # a was invalidated: GetS, which the directory forwards to c
    net.deliver(A2D)
    net.deliver(D2C)
    assert net.caches["c"].state(X) == "IM_A"
    assert [msg["t"] for _s, msg in net.caches["c"]._lines[X].deferred] == ["Fwd-GetS"]
    net.deliver(C2D)  # c's GetS for Y is handled while X waits
    net.deliver(D2C)
    assert net.caches["c"].state(Y) == "E"
    settle(net)
    assert net.caches["a"].lookup(X) == ("S", {"v": 1}, 1)


# -- races ------------------------------------------------------------------------------
def test_putm_racing_fwd_getm() -> None:
    net = Net(["a", "b"])
    net.store("a", X, {"v": 1})
    settle(net)
    ev = net.evict("a", X)  # PutM in flight
    wr = net.store("b", X, {"v": 2})
    net.deliver(B2D)  # directory forwards b's GetM to a, b is owner now
    net.deliver(D2A)  # a, in MI_A, sends its data to b and goes II_A
    assert net.caches["a"].state(X) == "II_A"
    net.deliver(A2D)  # the stale PutM: only acknowledged, not taken as data or ownership
    assert net.dirs["dir"].inspect(X) == {"directory": "EM", "owner": "b", "sharers": []}
    assert net.home.l2 == {}
    settle(net)
    assert result(net, ev)["state"] == "I"
    assert result(net, wr)["version"] == 2
    assert net.caches["b"].lookup(X) == ("M", {"v": 2}, 2)


def test_putm_racing_fwd_gets() -> None:
    net = Net(["a", "b"])
    net.store("a", X, {"v": 1})
    settle(net)
    net.evict("a", X)
    rd = net.load("b", X)
    net.deliver(B2D)  # Fwd-GetS to a; directory S_D
    net.deliver(D2A)  # a in MI_A: data to b and home, SI_A
    assert net.caches["a"].state(X) == "SI_A"
    settle(net)
    assert result(net, rd)["value"] == {"v": 1}
    assert net.dirs["dir"].inspect(X) == {"directory": "S", "owner": None, "sharers": ["b"]}


def test_puts_racing_inv_is_still_acked() -> None:
    net = Net(["a", "b"])
    shared_by(net, ["a", "b"])
    ev = net.evict("a", X)  # PutS in flight
    wr = net.store("b", X, {"v": 1})
    net.deliver(B2D)  # Inv to a (still a sharer for the directory), Data(acks=1) to b
    net.deliver(D2A)  # a in SI_A acks the Inv: II_A
    assert net.caches["a"].state(X) == "II_A"
    net.deliver(("a", "b"))
    net.deliver(D2B)
    assert result(net, wr)["state"] == "M"
    settle(net)
    assert result(net, ev)["state"] == "I"


def test_write_through_defers_a_forward_until_home_is_durable() -> None:
    net = Net(["a", "b"])
    net.store("a", X, {"v": 1})
    settle(net)
    wt = net.store("a", X, {"v": 2}, [CRITICAL])  # a holds M: applies, sends WT
    assert net.caches["a"].state(X) == "MW_A"
    assert net.caches["a"].lookup(X) is None  # not readable until the write completes
    rd = net.load("b", X)
    net.deliver(B2D)  # Fwd-GetS to a, which must wait behind the write-through
    net.deliver(D2A)
    assert net.caches["a"].state(X) == "MW_A"
    net.deliver(A2D)  # WT: stored durably, WT-Ack
    assert net.home.l0[X] == ({"v": 2}, 2)
    assert net.ops[wt].result is None
    net.deliver(D2A)  # WT-Ack: write completes, then the deferred Fwd-GetS runs
    assert result(net, wt) == {"version": 2, "state": "M", "messages": 2, "policy": "write_through", "graph": "shared"}
    assert net.caches["a"].state(X) == "S"  # the deferred forward ran right after
    settle(net)
    assert result(net, rd)["value"] == {"v": 2}


# -- write policy, versions, cas, delete ----------------------------------------------
def test_write_through_is_durable_before_completion() -> None:
    net = Net(["a"])
    op = net.store("a", X, {"v": 1}, [CRITICAL, "other"])
    net.deliver(A2D)
    net.deliver(D2A)  # a holds M, applied v1, WT in flight
    assert net.caches["a"].state(X) == "MW_A"
    assert net.ops[op].result is None
    assert X not in net.home.l0
    net.deliver(A2D)
    assert net.home.l0[X] == ({"v": 1}, 1)
    assert net.home.meta[X] == {"tags": [CRITICAL, "other"], "graph": "shared"}
    net.deliver(D2A)
    assert result(net, op) == {"version": 1, "state": "M", "messages": 4, "policy": "write_through", "graph": "shared"}
    settle(net)


def test_write_back_stays_in_the_cache_until_evicted() -> None:
    net = Net(["a"])
    net.store("a", X, {"v": 1})
    settle(net)
    assert net.home.l2 == {}
    ev = net.evict("a", X)
    settle(net)
    assert result(net, ev) == {"state": "I", "messages": 2}
    assert net.home.l2[X] == ({"v": 1}, 1)
    assert net.home.l0 == {}


def test_versions_count_writes_and_deletes() -> None:
    net = Net(["a", "b"])
    ops = [net.store("a", X, {"v": 1}), net.store("a", X, {"v": 2}), net.delete("a", X)]
    settle(net)
    assert [result(net, op)["version"] for op in ops] == [1, 2, 3]
    rd = net.load("b", X)
    settle(net)
    assert result(net, rd)["value"] is None and result(net, rd)["version"] == 3
    again = net.store("b", X, {"v": 4})
    settle(net)
    assert result(net, again)["version"] == 4


def test_delete_of_a_critical_line_is_write_through() -> None:
    net = Net(["a"])
    net.store("a", X, {"v": 1}, [CRITICAL])
    settle(net)
    op = net.delete("a", X)
    settle(net)
    assert result(net, op)["policy"] == "write_through"
    assert net.home.l0[X] == (None, 2)


def test_cas_succeeds_on_the_current_version_and_fails_when_it_moved() -> None:
    net = Net(["a", "b"])
    net.store("a", X, {"v": 1})
    settle(net)
    ok = net.cas("b", X, 1, {"v": 2})
    settle(net)
    assert result(net, ok)["version"] == 2
    bad = net.cas("a", X, 1, {"v": 3})
    settle(net)
    failed = net.ops[bad].result
    assert failed is not None and failed["t"] == "failed" and failed["error"] == "ConflictError"
    assert "expected version 1, found 2" in failed["message"]
    assert net.caches["a"].lookup(X) == ("M", {"v": 2}, 2)


def test_cas_against_a_valid_copy_fails_without_messages() -> None:
    net = Net(["a", "b"])
    net.store("a", X, {"v": 1})
    settle(net)
    net.load("b", X)
    settle(net)
    assert net.caches["b"].can_complete_locally(
        {"t": "cas", "iri": X, "op": 1, "version": 0, "value": {}}
    )
    bad = net.cas("b", X, 0, {"v": 2})
    assert net.in_flight() == 0
    msg = net.ops[bad].result
    assert msg is not None and msg["t"] == "failed"


# -- capacity ---------------------------------------------------------------------------
def test_capacity_evicts_the_least_recently_used_idle_line() -> None:
    net = Net(["a"], capacity=2)
    net.store("a", X, {"v": 1})
    net.load("a", Y)
    settle(net)
    net.load("a", X)  # X is now more recently used than Y
    op = net.load("a", Z)  # needs a slot: Y (E, clean) goes with a PutE
    settle(net)
    assert net.caches["a"].states() == {X: "M", Z: "E"}
    assert result(net, op)["messages"] == 2 + 2
    op = net.load("a", Y)  # now X is LRU, dirty: PutM takes it home
    settle(net)
    assert net.caches["a"].states() == {Y: "E", Z: "E"}
    assert net.home.l2[X] == ({"v": 1}, 1)


def test_misses_over_capacity_go_ahead_and_the_surplus_is_trimmed_later() -> None:
    net = Net(["a"], capacity=1)
    x = net.load("a", X)
    y = net.load("a", Y)  # X is mid-miss, nothing to evict: Y goes ahead over capacity
    assert net.caches["a"].states() == {X: "IS_D", Y: "IS_D"}
    net.deliver(A2D)
    net.deliver(A2D)
    net.deliver(D2A)  # X arrives: E; Y still in flight, so one stable line, no trim yet
    assert net.caches["a"].states() == {X: "E", Y: "IS_D"}
    net.deliver(D2A)  # Y arrives: two stable lines, the LRU one (X) goes home with a PutE
    assert net.caches["a"].states() == {X: "EI_A", Y: "E"}
    settle(net)
    assert result(net, x)["state"] == "E" and result(net, y)["messages"] == 2
    assert net.caches["a"].states() == {Y: "E"}


def test_ops_on_one_line_run_in_order_and_other_lines_do_not_wait() -> None:
    net = Net(["a", "b"])
    net.store("b", X, {"v": 1})
    settle(net)
    first = net.store("a", X, {"v": 2})
    read = net.load("a", X)
    assert net.caches["a"].pending(X) == 2
    other = net.load("a", Y)
    net.deliver(A2D)  # GetM X, then GetS Y
    net.deliver(A2D)
    net.deliver(D2A)  # Data for Y: answered though X is still in flight
    assert result(net, other)["state"] == "E"
    assert net.ops[first].result is None
    settle(net)
    assert result(net, read) == {"value": {"v": 2}, "version": 2, "state": "M", "messages": 0, "graph": "shared"}


# -- recall -----------------------------------------------------------------------------
def test_recall_brings_dirty_lines_home_and_keeps_the_owner_as_sharer() -> None:
    net = Net(["a", "b"])
    net.store("a", X, {"v": 1})
    net.store("b", Y, {"v": 2})
    net.load("a", Z)
    settle(net)
    rid = net.recall("dir", None)
    settle(net)
    ack = net.recalls_done[rid]
    assert ack["iris"] == [X, Y, Z] and ack["n"] == 2 + 2 * 3
    assert net.home.l2[X] == ({"v": 1}, 1) and net.home.l2[Y] == ({"v": 2}, 1)
    assert net.caches["a"].states() == {X: "S", Z: "S"}
    assert net.dirs["dir"].inspect(X) == {"directory": "S", "owner": None, "sharers": ["a"]}
    assert net.home.stores == 2  # the clean E copy of Z was not written again


def test_recall_of_nothing_dirty_answers_at_once() -> None:
    net = Net(["a", "b"])
    shared_by(net, ["a", "b"])
    rid = net.recall("dir", [X, Y])
    assert net.recalls_done[rid]["iris"] == [] and net.in_flight() == 0


def test_recall_waits_for_a_forward_already_in_flight() -> None:
    net = Net(["a", "b"])
    net.store("a", X, {"v": 1})
    settle(net)
    net.load("b", X)
    net.deliver(B2D)  # directory S_D, Fwd-GetS on its way to a
    rid = net.recall("dir", [X])
    assert rid not in net.recalls_done
    settle(net)
    assert net.recalls_done[rid]["iris"] == []
    assert net.home.l2[X] == ({"v": 1}, 1)


def test_recall_racing_an_eviction() -> None:
    net = Net(["a"])
    net.store("a", X, {"v": 1})
    settle(net)
    net.evict("a", X)  # PutM in flight
    rid = net.recall("dir", [X])  # Fwd-GetS(req=dir) to a, which is in MI_A
    net.deliver(D2A)
    assert net.caches["a"].state(X) == "SI_A"
    settle(net)
    assert rid in net.recalls_done
    assert net.dirs["dir"].inspect(X)["directory"] == "I"
    assert net.home.l2[X] == ({"v": 1}, 1)


# -- sharding, snapshots, validation -----------------------------------------------------
def test_sharded_directories_each_own_their_lines() -> None:
    net = Net(["a", "b"], directories=2)
    iris = [f"urn:n{i}" for i in range(8)]
    homes = {directory_shard(iri, net.dir_names) for iri in iris}
    assert homes == set(net.dir_names)
    for i, iri in enumerate(iris):
        net.store("a", iri, {"v": i})
    settle(net)
    for iri in iris:
        net.load("b", iri)
    settle(net)
    for iri in iris:
        owner = directory_shard(iri, net.dir_names)
        assert net.dirs[owner].inspect(iri)["directory"] == "S"
        other = next(n for n in net.dir_names if n != owner)
        assert iri not in net.dirs[other].lines()


def test_directory_shard_is_stable_across_processes() -> None:
    # CRC-32, not the salted str hash: a fixed answer.
    assert (
        directory_shard("urn:x", ["d0", "d1", "d2"])
        == ["d0", "d1", "d2"][__import__("zlib").crc32(b"urn:x") % 3]
    )


def test_snapshot_restore_round_trips_mid_transaction() -> None:
    net = Net(["a", "b", "c"])
    shared_by(net, ["a", "b"])
    net.store("c", X, {"v": 1})
    net.deliver(C2D)
    snap = net.snapshot()
    assert msgpack.unpackb(msgpack.packb(snap)) == snap
    settle(net)
    after = net.snapshot()
    net.restore(snap)
    assert net.snapshot() == snap
    settle(net)
    assert net.snapshot() == after


def test_malformed_client_requests_are_refused_and_change_nothing() -> None:
    cache = CacheController("a", "dir", 2, frozenset())
    before = cache.snapshot()
    bad: list[Any] = [
        {"t": "fly", "iri": X, "op": 1},
        {"t": "load", "iri": "", "op": 1},
        {"t": "load", "iri": X, "op": "1"},
        {"t": "store", "iri": X, "op": 1, "value": None},
        {"t": "store", "iri": X, "op": 1, "value": {}, "tags": "critical"},
        {"t": "cas", "iri": X, "op": 1, "value": {}, "version": -1},
        ["load"],
    ]
    for req in bad:
        with pytest.raises(InvalidInput):
            cache.handle(CLIENT, req)
    assert cache.snapshot() == before
    with pytest.raises(InvalidInput):
        CacheController("a", "dir", 0, frozenset())


def test_a_message_no_state_allows_is_a_protocol_error() -> None:
    cache = CacheController("a", "dir", 2, frozenset())
    with pytest.raises(ProtocolError):
        cache.handle("dir", {"t": "Put-Ack", "iri": X, "src": "dir"})
    directory = DirectoryController("dir", DictHome())
    with pytest.raises(ProtocolError):
        directory.handle(
            "a", {"t": "Data", "iri": X, "src": "a", "value": None, "version": 0, "meta": None}
        )


def test_client_values_are_copied_in_and_out() -> None:
    net = Net(["a"])
    value = {"list": [1, 2]}
    net.store("a", X, value)
    value["list"].append(3)
    rd = net.load("a", X)
    settle(net)
    got = result(net, rd)["value"]
    assert got == {"list": [1, 2]}
    got["list"].append(4)
    assert net.caches["a"].lookup(X) == ("M", {"list": [1, 2]}, 1)


def test_every_emitted_message_is_msgpack_plain() -> None:
    """The harness round-trips every message through msgpack; run one of everything."""
    net = Net(["a", "b", "c"], capacity=1)
    assert net.check_msgpack
    shared_by(net, ["a", "b"])
    net.store("c", X, {"v": [1, {"k": None}]}, [CRITICAL])
    net.load("a", Y)
    net.store("b", Y, {"v": 2})
    net.cas("a", X, 5, {"v": 3})
    net.delete("b", X)
    net.evict("a", Y)
    net.recall("dir", None)
    settle(net)

"""The linearizability checker on hand-made histories, and on generated ones.

Known-good histories must pass, each classic failure (stale read after a
completed write, lost update, two cas from one version, a value never
written) must be caught with a small counterexample naming the ops involved,
and pending ops may take effect or not, but not before they were invoked nor
twice. The hypothesis tests generate histories from a sequential model with
random real-time overlap (linearizable by construction), then tamper with one
read and require the checker to catch it.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from gliding_actors.errors import InvalidInput
from tools.reliability._lincheck import (
    CheckResult,
    HistoryRecorder,
    Op,
    _Line,
    _search,
    check_history,
    check_line,
    count_anomalies,
)

LINE = "urn:test:line"


def w(i: int, c: int, r: int | None, n: int, v: int | None, p: str = "p", line: str = LINE) -> Op:
    return Op(i, p, line, "write", c, r, value={"n": n}, version=v)


def rd(i: int, c: int, r: int, n: int | None, v: int, p: str = "p", line: str = LINE) -> Op:
    return Op(i, p, line, "read", c, r, value=None if n is None else {"n": n}, version=v)


def cas(i: int, c: int, r: int | None, e: int, n: int, v: int | None = None, ok: bool = True, p: str = "p") -> Op:
    return Op(i, p, LINE, "cas", c, r, value={"n": n}, expected=e, version=v, ok=ok)


def dele(i: int, c: int, r: int | None, v: int | None, p: str = "p") -> Op:
    return Op(i, p, LINE, "delete", c, r, version=v)


def fails_with(history: list[Op], *ids: int) -> CheckResult:
    """Not linearizable, and the counterexample is exactly the ops ``ids``."""
    result = check_history(history)
    assert not result.linearizable
    assert result.failed_lines == (LINE,)
    (example,) = result.counterexamples
    assert sorted(op.id for op in example.ops) == sorted(ids), str(example)
    text = result.report()
    assert LINE in text and all(f"#{i} " in text for i in ids)
    return result


# -- known linearizable --------------------------------------------------------------
def test_a_sequential_history_of_every_kind_is_linearizable() -> None:
    history = [
        rd(1, 0, 10, None, 0),
        w(2, 20, 30, 1, 1),
        rd(3, 40, 50, 1, 1),
        cas(4, 60, 70, 1, 2, v=2),
        cas(5, 80, 90, 1, 3, ok=False),  # lost: the line is at v2
        dele(6, 100, 110, 3),
        rd(7, 120, 130, None, 3),
        cas(8, 140, 150, 3, 4, v=4),  # a cas may rewrite a tombstone
        rd(9, 160, 170, 4, 4),
    ]
    result = check_history(history)
    assert result.linearizable, result.report()
    assert count_anomalies(history) == {"lost_updates": 0, "stale_reads": 0, "wrong_values": 0}


def test_a_read_overlapping_a_write_may_see_either_side() -> None:
    write = w(1, 0, 100, 1, 1)
    assert check_history([write, rd(2, 50, 60, None, 0, p="q")]).linearizable
    assert check_history([write, rd(2, 50, 60, 1, 1, p="q")]).linearizable


def test_concurrent_writes_may_take_their_versions_in_either_order() -> None:
    # b was invoked first but took v1 second: fine, they overlap
    history = [w(1, 10, 100, 1, 2, p="a"), w(2, 0, 90, 2, 1, p="b"), rd(3, 110, 120, 1, 2, p="c")]
    assert check_history(history).linearizable


def test_lines_are_checked_independently() -> None:
    """Two lines, each fine alone: together fine (P-compositionality), one bad line named alone."""
    a = [w(1, 0, 10, 1, 1, line="urn:a"), rd(2, 20, 30, 1, 1, line="urn:a")]
    b = [w(3, 0, 10, 1, 1, line="urn:b"), rd(4, 20, 30, None, 0, line="urn:b")]  # stale on b
    assert check_history(a).linearizable
    result = check_history(a + b)
    assert not result.linearizable and result.failed_lines == ("urn:b",) and result.lines == 2


# -- known non-linearizable --------------------------------------------------------
def test_a_stale_read_after_a_completed_write_is_caught() -> None:
    history = [w(1, 0, 10, 1, 1), w(2, 20, 30, 2, 2), rd(3, 40, 50, 1, 1, p="q")]
    fails_with(history, 2, 3)
    assert count_anomalies(history)["stale_reads"] == 1


def test_a_read_going_back_in_time_is_caught_even_when_both_overlap_the_write() -> None:
    """Two reads during one write: the later one may not see the older state (new-old inversion)."""
    history = [w(1, 0, 1000, 1, 1), rd(2, 100, 200, 1, 1, p="q"), rd(3, 300, 400, None, 0, p="r")]
    fails_with(history, 2, 3)


def test_a_lost_update_two_writes_with_one_version_is_caught() -> None:
    history = [w(1, 0, 50, 1, 1, p="a"), w(2, 10, 60, 2, 1, p="b")]
    fails_with(history, 1, 2)
    assert count_anomalies(history)["lost_updates"] == 1


def test_a_write_ordered_before_a_completed_one_is_a_lost_update() -> None:
    history = [w(1, 0, 10, 1, 1, p="a"), w(2, 20, 30, 2, 2, p="b"), w(3, 40, 50, 3, 2, p="c")]
    fails_with(history, 2, 3)
    assert count_anomalies(history)["lost_updates"] >= 1


def test_two_cas_succeeding_from_the_same_version_is_caught() -> None:
    history = [w(1, 0, 10, 1, 1), cas(2, 20, 60, 1, 2, v=2, p="a"), cas(3, 30, 70, 1, 3, v=2, p="b")]
    fails_with(history, 2, 3)
    assert count_anomalies(history)["lost_updates"] == 1


def test_a_cas_that_lost_when_nothing_could_have_moved_the_line_is_caught() -> None:
    history = [w(1, 0, 10, 1, 1), cas(2, 20, 30, 1, 2, ok=False)]
    assert not check_history(history).linearizable


def test_a_read_of_a_value_never_written_is_caught() -> None:
    history = [w(1, 0, 10, 1, 1), rd(2, 20, 30, 99, 1, p="q")]
    fails_with(history, 1, 2)
    assert count_anomalies(history)["wrong_values"] == 1
    # a value at a version nobody wrote, on a fresh line
    assert not check_history([rd(1, 0, 10, 7, 3)]).linearizable


def test_the_counterexample_is_small_in_a_long_history() -> None:
    """200 ops of correct traffic around one stale read: the counterexample is the read and one write."""
    history: list[Op] = []
    for k in range(100):
        history.append(w(2 * k, 100 * k, 100 * k + 40, k, k + 1, p="a"))
        history.append(rd(2 * k + 1, 100 * k + 50, 100 * k + 90, k, k + 1, p="b"))
    history.append(rd(999, 100 * 100, 100 * 100 + 10, 40, 41, p="c"))  # v41 after v100 completed
    result = check_history(history)
    assert not result.linearizable
    (example,) = result.counterexamples
    assert len(example.ops) == 2 and 999 in {op.id for op in example.ops}
    assert example.gaps and example.total_ops == 201


def test_a_counterexample_fails_alone_and_drops_no_needed_op() -> None:
    """The shrunk ops fail in the gaps model by themselves, and without any one of them they pass (1-minimal)."""
    history = [
        w(1, 0, 10, 1, 1),
        rd(2, 5, 15, None, 0, p="x"),
        w(3, 20, 30, 2, 2),
        cas(4, 25, 45, 2, 3, v=3, p="y"),
        rd(5, 50, 60, 2, 2, p="q"),  # stale: the cas to v3 completed at 45
        rd(6, 55, 65, 3, 3, p="z"),
    ]
    result = check_history(history)
    (example,) = result.counterexamples
    ops = list(example.ops)
    line = _Line(ops)
    assert not _search(line, range(len(ops)), -1, 0, gaps=True).ok
    for drop in range(len(ops)):
        rest = [i for i in range(len(ops)) if i != drop]
        assert _search(line, rest, -1, 0, gaps=True).ok


# -- pending ops ------------------------------------------------------------------
def test_a_pending_write_may_take_effect_or_not() -> None:
    pending = w(1, 0, None, 1, None)
    assert check_history([pending, rd(2, 100, 110, 1, 1, p="q")]).linearizable
    assert check_history([pending, rd(2, 100, 110, None, 0, p="q")]).linearizable
    # ...and may take effect late: first unseen, then seen
    assert check_history([pending, rd(2, 100, 110, None, 0, p="q"), rd(3, 200, 210, 1, 1, p="q")]).linearizable


def test_a_pending_write_cannot_take_effect_before_it_was_invoked() -> None:
    assert not check_history([rd(1, 0, 10, 1, 1, p="q"), w(2, 20, None, 1, None)]).linearizable


def test_a_pending_write_takes_effect_at_most_once() -> None:
    history = [w(1, 0, None, 1, None), rd(2, 100, 110, 1, 1, p="q"), rd(3, 200, 210, 1, 2, p="q")]
    assert not check_history(history).linearizable


def test_a_pending_write_taking_effect_moves_later_versions() -> None:
    """Once a read saw the pending write, a later completed write must take the next version."""
    pending = w(1, 0, None, 1, None)
    seen = rd(2, 100, 110, 1, 1, p="q")
    assert check_history([pending, seen, w(3, 200, 210, 2, 2, p="r")]).linearizable
    assert not check_history([pending, seen, w(3, 200, 210, 2, 1, p="r")]).linearizable


def test_a_pending_cas_takes_effect_only_from_its_expected_version() -> None:
    base = [w(1, 0, 10, 1, 1)]
    assert check_history([*base, cas(2, 20, None, 1, 2), rd(3, 100, 110, 2, 2, p="q")]).linearizable
    assert not check_history([*base, cas(2, 20, None, 0, 2), rd(3, 100, 110, 2, 2, p="q")]).linearizable


def test_a_pending_delete_and_a_pending_read() -> None:
    base = [w(1, 0, 10, 1, 1)]
    assert check_history([*base, dele(2, 20, None, None), rd(3, 100, 110, None, 2, p="q")]).linearizable
    unanswered = Op(3, "q", LINE, "read", 30, None)  # a read with no answer constrains nothing
    assert check_history([*base, unanswered]).linearizable


def test_a_search_over_its_budget_is_undecided_not_passed() -> None:
    """Pending ops can make the search exponential: past its budget a line is undecided, never passed."""
    history = [w(i, 0, None, i, None, p=f"p{i}") for i in range(12)]  # 12 writes that never answered
    history.append(rd(99, 100, 110, 5, 3, p="q"))  # saw the write of 5 as the third to take effect
    capped = check_history(history, budget=20)
    assert not capped.linearizable
    assert capped.undecided_lines == (LINE,) and capped.failed_lines == ()
    assert "UNDECIDED" in capped.report()
    verdict = check_line(history, budget=20)
    assert verdict.linearizable is None and verdict.counterexample is None
    assert check_history(history, budget=None).linearizable


# -- bad input ----------------------------------------------------------------------
@pytest.mark.parametrize(
    "op",
    [
        Op(1, "p", LINE, "write", 10, 5, value={"n": 1}, version=1),  # returned before it was called
        Op(1, "p", LINE, "write", 0, 5, value={"n": 1}),  # completed without a version
        Op(1, "p", LINE, "cas", 0, 5, value={"n": 1}, version=1),  # cas without an expected version
        Op(1, "p", LINE, "write", 0, 5, value=None, version=1),  # a write of nothing
        Op(1, "p", LINE, "read", 0, 5, version=0, ok=False),  # only a cas can conflict
        Op(1, "p", LINE, "swap", 0, 5, version=1),  # type: ignore[arg-type]
    ],
)
def test_a_malformed_op_is_refused_with_invalid_input(op: Op) -> None:
    history = [w(0, 0, 1, 1, 1), op]
    snapshot = list(history)
    with pytest.raises(InvalidInput):
        check_history(history)
    assert history == snapshot  # the caller's history is untouched (ops are frozen)


def test_check_line_refuses_ops_of_two_lines_and_a_bad_initial_state() -> None:
    with pytest.raises(InvalidInput):
        check_line([w(1, 0, 1, 1, 1, line="urn:a"), w(2, 0, 1, 1, 1, line="urn:b")])
    with pytest.raises(InvalidInput):
        check_line([w(1, 0, 1, 1, 1)], initial=(None, -1))
    with pytest.raises(InvalidInput):
        check_history([w(1, 0, 1, 1, 1)], initial=("not a value", 0))  # type: ignore[arg-type]


def test_the_recorder_refuses_an_unknown_token_and_keeps_what_it_had() -> None:
    recorder = HistoryRecorder()
    token = recorder.begin("p", LINE, "write", value={"n": 1})
    recorder.ok(token, 1)
    before = recorder.ops()
    with pytest.raises(InvalidInput):
        recorder.ok(token, 2)  # already closed
    with pytest.raises(InvalidInput):
        recorder.conflict(77)  # never begun
    with pytest.raises(InvalidInput):
        recorder.unknown(5, "x")
    assert recorder.ops() == before
    (op,) = before
    assert op.version == 1 and op.return_ns is not None and op.return_ns >= op.call_ns


def test_the_recorder_keeps_ops_never_closed_as_pending_and_drops_refused_ones() -> None:
    recorder = HistoryRecorder()
    a = recorder.begin("p", LINE, "write", value={"n": 1})
    b = recorder.begin("q", LINE, "cas", value={"n": 2}, expected=0)
    recorder.refused(b)
    c = recorder.begin("r", LINE, "read")
    recorder.unknown(c, "Timeout")
    ops = recorder.ops()
    assert [op.id for op in ops] == [a, c]
    assert all(op.pending for op in ops) and ops[1].note == "Timeout"


# -- generated histories ------------------------------------------------------------
SPACING = 100  # between linearization points; an op spans at most 2 * OVERLAP around its point
OVERLAP = 250


@st.composite
def sequential_histories(draw: Any) -> tuple[list[Op], dict[int, tuple[dict[str, Any] | None, int]]]:
    """Ops executed one at a time on a model register, then given random overlapping intervals.

    Each op takes effect at its point ``i * SPACING``, inside its interval,
    so the history is linearizable by construction. Returns the ops and, for
    each completed mutation, the line's state before it.
    """
    lines = [f"urn:gen:{k}" for k in range(draw(st.integers(1, 3)))]
    state: dict[str, tuple[dict[str, Any] | None, int]] = {iri: (None, 0) for iri in lines}
    before: dict[int, tuple[dict[str, Any] | None, int]] = {}
    ops: list[Op] = []
    for i in range(draw(st.integers(1, 40))):
        iri = draw(st.sampled_from(lines))
        kind = draw(st.sampled_from(["read", "read", "write", "cas", "delete"]))
        point = i * SPACING
        call = point - draw(st.integers(0, OVERLAP))
        ret: int | None = point + draw(st.integers(0, OVERLAP))
        value, version = state[iri]
        process = f"p{draw(st.integers(0, 4))}"
        if kind == "read":
            ops.append(Op(i, process, iri, "read", call, ret, value=value, version=version))
            continue
        pending = draw(st.integers(0, 9)) == 0
        if pending:
            ret = None
        if kind == "cas":
            expected = draw(st.sampled_from([version, version, max(0, version - 1), version + 1]))
            new = {"n": i}
            if expected != version:
                if not pending:  # a pending cas that lost never took effect
                    ops.append(Op(i, process, iri, "cas", call, ret, value=new, expected=expected, ok=False))
                continue
            op = Op(i, process, iri, "cas", call, ret, value=new, expected=expected, version=None if pending else version + 1)
            state[iri] = (new, version + 1)
        elif kind == "write":
            new = {"n": i}
            op = Op(i, process, iri, "write", call, ret, value=new, version=None if pending else version + 1)
            state[iri] = (new, version + 1)
        else:
            op = Op(i, process, iri, "delete", call, ret, version=None if pending else version + 1)
            state[iri] = (None, version + 1)
        if not pending:
            before[i] = (value, version)
        ops.append(op)
    # pending writes that never took effect: invoked anywhere, values nobody reads
    for j in range(draw(st.integers(0, 3))):
        iri = draw(st.sampled_from(lines))
        call = draw(st.integers(-OVERLAP, len(ops) * SPACING))
        ops.append(Op(1000 + j, "ghost", iri, "write", call, None, value={"ghost": j}))
    return ops, before


@settings(max_examples=80)
@given(sequential_histories())
def test_histories_from_a_sequential_model_are_linearizable(generated: Any) -> None:
    ops, _ = generated
    result = check_history(ops)
    assert result.linearizable, result.report()
    assert count_anomalies(ops) == {"lost_updates": 0, "stale_reads": 0, "wrong_values": 0}


@settings(max_examples=80)
@given(sequential_histories(), st.data())
def test_every_subset_of_a_linearizable_history_passes_the_gaps_model(generated: Any, data: Any) -> None:
    """Why a shrunk counterexample proves something: dropping ops never fails a good history."""
    ops, _ = generated
    for iri in sorted({op.line for op in ops}):
        completed = [op for op in ops if op.line == iri and not op.pending]
        keep = data.draw(st.lists(st.booleans(), min_size=len(completed), max_size=len(completed)))
        subset = [op for op, k in zip(completed, keep, strict=True) if k]
        assert _search(_Line(subset), range(len(subset)), -1, 0, gaps=True).ok


@settings(max_examples=80)
@given(sequential_histories(), st.data())
def test_a_read_made_stale_outside_its_window_is_caught(generated: Any, data: Any) -> None:
    """Give one read the state from before a write that completed before the read began."""
    ops, before = generated
    candidates = [
        (r, m)
        for r in ops
        for m in ops
        if r.kind == "read"
        and not r.pending
        and m.id in before
        and m.line == r.line
        and m.return_ns is not None
        and m.return_ns < r.call_ns
    ]
    assume(candidates)
    read, write = data.draw(st.sampled_from(candidates))
    old_value, old_version = before[write.id]
    tampered = [
        Op(op.id, op.process, op.line, "read", op.call_ns, op.return_ns, value=old_value, version=old_version)
        if op is read
        else op
        for op in ops
    ]
    result = check_history(tampered)
    assert not result.linearizable
    assert result.failed_lines == (read.line,)
    assert read.id in {op.id for op in result.counterexamples[0].ops}
    assert count_anomalies(tampered)["stale_reads"] >= 1


@settings(max_examples=60)
@given(sequential_histories(), st.data())
def test_a_read_of_a_value_never_written_is_caught_in_generated_histories(generated: Any, data: Any) -> None:
    ops, _ = generated
    reads = [op for op in ops if op.kind == "read" and not op.pending]
    assume(reads)
    target = data.draw(st.sampled_from(reads))
    tampered = [
        Op(op.id, op.process, op.line, "read", op.call_ns, op.return_ns, value={"never": True}, version=op.version)
        if op is target
        else op
        for op in ops
    ]
    result = check_history(tampered)
    assert not result.linearizable
    assert target.id in {op.id for op in result.counterexamples[0].ops}

"""A linearizability checker for recorded histories of versioned lines.

Every line (IRI) of the memory is a **versioned register**: its state is a
value (a JSON object, or None while absent or deleted) and a version (0 while
never written, +1 per completed write or delete). The operations the
:class:`~gliding_actors.agent.Agent` handle offers on it, and what each must
have seen if it took effect atomically at one instant between its invocation
and its response:

* ``read`` returns ``(value, version)``: exactly the state at that instant;
* ``write(value)`` returns ``version``: the state's version + 1, and the
  state becomes ``(value, version)``;
* ``delete`` likewise, with the value None (a tombstone);
* ``cas(expected, value)`` either succeeds, returning ``expected + 1``, when
  the state's version is ``expected``, or fails with ``ConflictError`` when it
  is not, changing nothing.

A history is **linearizable** when some total order of its operations
respects real time (an operation that returned before another was invoked
comes first) and replays correctly on that register. Operations whose outcome
is unknown (the caller timed out, the actor was unavailable) are *pending*:
they may take effect at any instant after their invocation, or never.

The search is Wing & Gong's, with Lowe's memoization: walk a list of call
and return entries in time order; at a call, try to linearize the operation
now (the model must accept it and the pair (set of linearized operations,
resulting state) must not have been explored before); at a return of an
operation not yet linearized, backtrack. Linearizability is *local*
(Herlihy & Wing's P-compositionality): a history is linearizable iff each
line's sub-history is, so each line is checked on its own, which keeps every
search small. Versions pin most of the order, so the memo table stays small
even with dozens of operations in flight on one line.

When a line fails, the checker shrinks its sub-history (ddmin) to a small
counterexample: a subset of its operations that has no linearization even if
any number of unrecorded writes happened between them (the *gaps* model,
:func:`_step_gaps`), such that dropping any one of them would give one.
Every subset of a linearizable history passes the gaps model, so the shrunk
ops alone prove the whole history wrong, whatever the other ops did: "this
write returned v2, and a read that began after it returned v1". Dropping ops
from a history of a versioned register is not sound in the exact model (the
next write would see a version gap), which is why the shrinking needs it.

A line whose search exceeds its budget (many pending ops can make it
exponential) is reported *undecided*, never passed.

The recording side is :class:`HistoryRecorder` (thread-safe, monotonic
``perf_counter_ns`` timestamps): the load harness
(:mod:`tools.reliability._load`) records with it, and
:func:`count_anomalies` names the two classic failures directly (lost
updates, stale reads) so a report can say *what* went wrong, not only that
something did.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from gliding_actors.errors import InvalidInput

__all__ = [
    "CheckResult",
    "Counterexample",
    "DEFAULT_BUDGET",
    "HistoryRecorder",
    "LineVerdict",
    "Op",
    "OpKind",
    "check_history",
    "check_line",
    "count_anomalies",
]

OpKind = Literal["read", "write", "cas", "delete"]
_KINDS: frozenset[str] = frozenset(("read", "write", "cas", "delete"))
_MUTATIONS: frozenset[str] = frozenset(("write", "cas", "delete"))

#: value id of None (absent or deleted); JSON objects get ids >= 0
_NONE_ID = -1
#: value id of a state whose value the history does not say: equal to no read
_ANY_ID = -2


@dataclass(frozen=True, slots=True)
class Op:
    """One recorded operation on one line.

    ``return_ns`` is None for an operation whose outcome is unknown (it may
    have taken effect or not). ``value`` is the written value (write, cas) or
    the value read (read); ``version`` the version returned (read, write,
    delete, a successful cas); ``expected`` a cas's expected version; ``ok``
    False for a cas that completed with ``ConflictError``. ``note`` carries
    why an outcome is unknown (the error's class name), for reports.
    """

    id: int
    process: str
    line: str
    kind: OpKind
    call_ns: int
    return_ns: int | None
    value: dict[str, Any] | None = None
    version: int | None = None
    expected: int | None = None
    ok: bool = True
    note: str = ""

    @property
    def pending(self) -> bool:
        return self.return_ns is None

    def validate(self) -> None:
        """Raise :class:`InvalidInput` unless this op can be checked (a history is input too)."""
        if self.kind not in _KINDS:
            raise InvalidInput(f"op {self.id}: unknown kind {self.kind!r}")
        if isinstance(self.call_ns, bool) or not isinstance(self.call_ns, int):
            raise InvalidInput(f"op {self.id}: call_ns is an integer, not {self.call_ns!r}")
        if self.return_ns is not None and (
            isinstance(self.return_ns, bool) or not isinstance(self.return_ns, int) or self.return_ns < self.call_ns
        ):
            raise InvalidInput(f"op {self.id}: return_ns {self.return_ns!r} is not an integer >= call_ns {self.call_ns}")
        if self.value is not None and not isinstance(self.value, dict):
            raise InvalidInput(f"op {self.id}: a value is a JSON object or None, not {type(self.value).__name__}")
        if self.kind == "cas":
            if isinstance(self.expected, bool) or not isinstance(self.expected, int) or self.expected < 0:
                raise InvalidInput(f"op {self.id}: a cas needs an expected version >= 0, not {self.expected!r}")
        if self.kind in ("write", "cas") and self.value is None:
            raise InvalidInput(f"op {self.id}: a {self.kind} writes a JSON object, not None")
        if self.pending:
            return
        needs_version = self.kind != "cas" or self.ok
        if needs_version and (isinstance(self.version, bool) or not isinstance(self.version, int) or self.version < 0):
            raise InvalidInput(f"op {self.id}: a completed {self.kind} returns a version >= 0, not {self.version!r}")
        if self.kind != "cas" and not self.ok:
            raise InvalidInput(f"op {self.id}: only a cas can complete with a conflict")

    def describe(self, origin_ns: int = 0) -> str:
        """One line for a human: who, what, what came back, when (µs after ``origin_ns``)."""
        if self.kind == "read":
            what = "read()"
            out = f"({_short(self.value)}, v{self.version})"
        elif self.kind == "write":
            what = f"write({_short(self.value)})"
            out = f"v{self.version}"
        elif self.kind == "delete":
            what = "delete()"
            out = f"v{self.version}"
        else:
            what = f"cas(v{self.expected}, {_short(self.value)})"
            out = f"ok v{self.version}" if self.ok else "ConflictError"
        if self.pending:
            out = f"? (no answer: {self.note or 'pending'})"
            span = f"[{(self.call_ns - origin_ns) / 1000:.1f} µs, never returned]"
        else:
            assert self.return_ns is not None
            span = f"[{(self.call_ns - origin_ns) / 1000:.1f} µs, {(self.return_ns - origin_ns) / 1000:.1f} µs]"
        return f"#{self.id} {self.process}: {what} -> {out} {span}"


def _short(value: dict[str, Any] | None, limit: int = 60) -> str:
    if value is None:
        return "None"
    text = json.dumps(value, sort_keys=True, separators=(",", ":"))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _value_key(value: dict[str, Any] | None) -> str | None:
    return None if value is None else json.dumps(value, sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True, slots=True)
class Counterexample:
    """A small sub-history of one line that no order can explain.

    With ``gaps`` (the usual case) the claim is the strong one: even if any
    number of other writes happened between these ops, no order respecting
    real time lets the versions only grow and every read see the latest
    write — so the whole history cannot be linearizable, whatever the other
    ops did. Without ``gaps`` every write of the line is listed (none can be
    dropped soundly) and the claim is about exact +1 versions.
    ``stuck`` is the op the search could not place when it got furthest.
    """

    line: str
    initial_value: dict[str, Any] | None
    initial_version: int
    gaps: bool
    ops: tuple[Op, ...]
    stuck: Op | None
    total_ops: int

    def __str__(self) -> str:
        origin = min((op.call_ns for op in self.ops), default=0)
        how = "even with other writes in between" if self.gaps else "with versions stepping by exactly 1"
        lines = [
            f"line {self.line} is not linearizable: these {len(self.ops)} of its {self.total_ops} ops have "
            f"no legal order from ({_short(self.initial_value)}, v{self.initial_version}), {how}"
            " (times in µs; an op can only come after one that returned before it began):"
        ]
        shown = sorted(self.ops, key=lambda o: (o.call_ns, o.id))
        lines += [f"  {op.describe(origin)}" for op in shown[:40]]
        if len(shown) > 40:
            lines.append(f"  ... and {len(shown) - 40} more")
        if self.stuck is not None:
            lines.append(f"  the search could not place #{self.stuck.id} ({self.stuck.process} {self.stuck.kind})")
        return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class CheckResult:
    """The verdict on a whole history: linearizable iff every line was found linearizable.

    A line whose search ran out of its state budget (many pending ops can
    make it exponential) is *undecided*: it is neither passed nor failed,
    and the history is not called linearizable.
    """

    linearizable: bool
    lines: int
    ops: int
    #: every failed line's IRI
    failed_lines: tuple[str, ...]
    #: a shrunk counterexample for the first failed lines (at most ``max_counterexamples``)
    counterexamples: tuple[Counterexample, ...]
    check_s: float
    #: memo entries explored, summed over lines (the search's cost)
    explored: int = 0
    #: lines whose search exceeded the budget
    undecided_lines: tuple[str, ...] = ()

    def report(self) -> str:
        if self.linearizable:
            return f"linearizable: {self.ops} ops on {self.lines} lines ({self.check_s:.2f} s)"
        parts = []
        if self.failed_lines:
            parts.append(f"NOT linearizable: {len(self.failed_lines)} of {self.lines} lines fail ({self.ops} ops)")
        if self.undecided_lines:
            shown = ", ".join(self.undecided_lines[:5])
            parts.append(
                f"UNDECIDED: {len(self.undecided_lines)} of {self.lines} lines exceeded the search budget ({shown})"
            )
        return "\n".join([*parts, *(str(c) for c in self.counterexamples)])


@dataclass(frozen=True, slots=True)
class LineVerdict:
    """One line's verdict: True, False, or None when the search exceeded its budget."""

    linearizable: bool | None
    counterexample: Counterexample | None
    explored: int


class _Line:
    """One line's ops compiled for the search: interned values, time-ordered entries."""

    def __init__(self, ops: Sequence[Op]) -> None:
        self.ops = list(ops)
        self._ids: dict[str, int] = {}
        #: the canonical JSON of each value id
        self.keys: list[str] = []
        self.value_ids = [self.intern(op.value) if op.kind != "delete" else _NONE_ID for op in self.ops]

    def intern(self, value: dict[str, Any] | None) -> int:
        key = _value_key(value)
        if key is None:
            return _NONE_ID
        found = self._ids.get(key)
        if found is None:
            found = self._ids[key] = len(self.keys)
            self.keys.append(key)
        return found


def _step(op: Op, vid: int, state_vid: int, state_ver: int) -> tuple[int, int] | None:
    """The register's transition for ``op`` from state (``state_vid``, ``state_ver``), or None if illegal."""
    kind = op.kind
    if kind == "read":
        if op.version == state_ver and vid == state_vid:
            return (state_vid, state_ver)
        return None
    if kind == "cas":
        if op.pending:  # took effect: it must have succeeded (a failure is "never took effect")
            return (vid, state_ver + 1) if op.expected == state_ver else None
        if not op.ok:
            return (state_vid, state_ver) if op.expected != state_ver else None
        if op.expected == state_ver and op.version == state_ver + 1:
            return (vid, state_ver + 1)
        return None
    # write or delete (vid is _NONE_ID for a delete)
    if op.pending or op.version == state_ver + 1:
        return (vid, state_ver + 1)
    return None


def _step_gaps(op: Op, vid: int, state_vid: int, state_ver: int) -> tuple[int, int] | None:
    """The *gaps* model: the exact register, with any number of unseen writes before each op.

    Used only on shrunk sub-histories (pending ops dropped). Its state is
    either exact, or (``_ANY_ID``, L): "version at least L, value unknown".
    Invariant: the true state is the model's state or follows it by some
    unseen writes. Every transition below keeps it, so a sub-history of a
    linearizable history always passes, and one that fails proves the
    history is not linearizable.
    """
    kind = op.kind
    if kind == "cas" and not op.ok:  # a conflict: the version was not the expected one
        if state_vid == _ANY_ID or op.expected != state_ver:
            return (state_vid, state_ver)
        return (_ANY_ID, state_ver + 1)  # then unseen writes came first
    version = op.version
    assert version is not None
    if kind == "cas":
        assert op.expected is not None
        if op.expected >= state_ver and version == op.expected + 1:
            return (vid, version)
        return None
    if kind == "read":
        if state_vid == _ANY_ID:
            return (vid, version) if version >= state_ver else None
        if version > state_ver or (version == state_ver and vid == state_vid):
            return (vid, version)
        return None
    # write or delete: the version after the true state's, which is >= the model's
    return (vid, version) if version > state_ver else None


@dataclass(slots=True)
class _Search:
    ok: bool
    explored: int
    #: the budget ran out before an answer: ``ok`` is False but proves nothing
    exhausted: bool = False
    #: the op whose return forced the backtrack when the search had placed most ops
    stuck: int | None = None
    deepest: int = 0
    seen: set[tuple[int, int, int]] = field(default_factory=set)


def _search(
    line: _Line, idx: Sequence[int], init_vid: int, init_ver: int, *, gaps: bool = False, budget: int | None = None
) -> _Search:
    """Wing & Gong / Lowe over the ops ``idx`` of ``line`` from the given state (``gaps``: :func:`_step_gaps`)."""
    step = _step_gaps if gaps else _step
    ops = line.ops
    vids = line.value_ids
    # entries: (time, 0 call / 1 return, op position); calls before returns at equal
    # times, so ops touching at one nanosecond count as concurrent (never a false alarm)
    raw: list[tuple[int, int, int]] = []
    for pos, i in enumerate(idx):
        op = ops[i]
        raw.append((op.call_ns, 0, pos))
        if op.return_ns is not None:
            raw.append((op.return_ns, 1, pos))
    raw.sort()
    n_entries = len(raw)
    head = n_entries
    nxt = [i + 1 for i in range(n_entries)] + [0]
    if n_entries:
        nxt[n_entries - 1] = -1
    else:
        nxt[head] = -1
    prv = [i - 1 for i in range(n_entries)] + [-1]
    if n_entries:
        prv[0] = head
    is_call = [kind == 0 for _, kind, _ in raw]
    entry_op = [pos for _, _, pos in raw]
    match = [-1] * n_entries  # call entry -> its return entry
    call_of = [-1] * len(idx)
    for e in range(n_entries):
        if is_call[e]:
            call_of[entry_op[e]] = e
    for e in range(n_entries):
        if not is_call[e]:
            match[call_of[entry_op[e]]] = e
    completed = [ops[i].return_ns is not None for i in idx]
    remaining = sum(completed)
    total = remaining

    def lift(e: int) -> None:
        p, q = prv[e], nxt[e]
        nxt[p] = q
        if q != -1:
            prv[q] = p
        r = match[e]
        if r != -1:
            p, q = prv[r], nxt[r]
            nxt[p] = q
            if q != -1:
                prv[q] = p

    def unlift(e: int) -> None:
        r = match[e]
        if r != -1:
            p, q = prv[r], nxt[r]
            nxt[p] = r
            if q != -1:
                prv[q] = r
        p, q = prv[e], nxt[e]
        nxt[p] = e
        if q != -1:
            prv[q] = e

    result = _Search(ok=True, explored=0)
    seen = result.seen
    stack: list[tuple[int, int, int, int]] = []  # (entry, vid, ver, linearized) before the step
    vid, ver, lin = init_vid, init_ver, 0
    e = nxt[head]
    while remaining:
        if e == -1:  # only pending calls left before nothing: cannot happen while ops remain
            break
        pos = entry_op[e]
        if is_call[e]:
            i = idx[pos]
            nxt_state = step(ops[i], vids[i], vid, ver)
            if nxt_state is not None:
                lin2 = lin | (1 << pos)
                key = (lin2, nxt_state[0], nxt_state[1])
                if key not in seen:
                    if budget is not None and len(seen) >= budget:
                        result.ok, result.exhausted = False, True
                        break
                    seen.add(key)
                    stack.append((e, vid, ver, lin))
                    vid, ver = nxt_state
                    lin = lin2
                    if completed[pos]:
                        remaining -= 1
                    lift(e)
                    e = nxt[head]
                    continue
            e = nxt[e]
        else:
            placed = total - remaining
            if result.stuck is None or placed > result.deepest:
                result.deepest, result.stuck = placed, idx[pos]
            if not stack:
                result.ok = False
                break
            e, vid, ver, lin = stack.pop()
            unlift(e)
            if completed[entry_op[e]]:
                remaining += 1
            e = nxt[e]
    result.explored = len(seen)
    if result.ok:
        result.stuck = None
    return result


def _ddmin(keep: list[int], removable: list[int], fails: Callable[[list[int]], _Search | None]) -> tuple[list[int], _Search]:
    """Zeller's ddmin over ``removable`` (``keep`` always stays): a 1-minimal failing subset."""
    current = list(removable)
    last = fails(sorted(keep + current))
    assert last is not None, "ddmin starts from a failing set"
    chunks = 2
    while current:
        size = max(1, len(current) // chunks)
        removed = False
        for start in range(0, len(current), size):
            candidate = current[:start] + current[start + size :]
            if not candidate and not keep:
                continue
            found = fails(sorted(keep + candidate))
            if found is not None:
                current, last = candidate, found
                chunks = max(chunks - 1, 2)
                removed = True
                break
        if not removed:
            if size == 1:
                break
            chunks = min(len(current), chunks * 2)
    return sorted(keep + current), last


def _shrink(
    line: _Line, base: tuple[int, int], stuck: int | None, budget: int | None
) -> tuple[list[int], bool, int | None]:
    """A small sub-history that proves the line is not linearizable.

    Dropping an op from a history is not sound on its own for a versioned
    register: the ops after a dropped write see a version gap. So the subset
    is checked in the *gaps* model (:func:`_step_gaps`), in which any number
    of unrecorded writes may fall between two ops: every linearizable
    history's subsets pass it, so a subset failing it proves the whole
    history fails. Returns ``(ops, gaps_model, stuck op)``.

    Rarely the failure needs exact +1 steps to show (a version skipped with
    no op to explain it); then only reads are dropped (a read changes
    nothing, so dropping one is sound in the exact model) and the writes stay.
    """
    ops = line.ops
    completed = [i for i, op in enumerate(ops) if not op.pending]

    def fails_gaps(idx: list[int]) -> _Search | None:
        found = _search(line, idx, *base, gaps=True, budget=budget)
        return None if found.ok or found.exhausted else found

    if fails_gaps(completed) is not None:
        start = completed
        cut = None if stuck is None else ops[stuck].return_ns
        if cut is not None:
            prefix = [i for i in completed if ops[i].call_ns <= cut]
            if fails_gaps(prefix) is not None:
                start = prefix
        idx, last = _ddmin([], start, fails_gaps)
        return idx, True, last.stuck

    def fails_exact(idx: list[int]) -> _Search | None:
        found = _search(line, idx, *base, budget=budget)
        return None if found.ok or found.exhausted else found

    reads = [i for i in completed if ops[i].kind == "read"]
    droppable = set(reads)
    others = [i for i in range(len(ops)) if i not in droppable]
    idx, last = _ddmin(others, reads, fails_exact)
    return idx, False, last.stuck


#: memo entries one line's search may explore before it gives up (about 250 bytes each)
DEFAULT_BUDGET = 500_000


def check_line(
    ops: Sequence[Op],
    *,
    initial: tuple[dict[str, Any] | None, int] = (None, 0),
    shrink: bool = True,
    budget: int | None = DEFAULT_BUDGET,
) -> LineVerdict:
    """Check one line's ops (all on the same IRI) from ``initial`` = (value, version).

    ``budget`` caps the memo entries the search may explore (None: no cap);
    past it the verdict is None (undecided). Raises :class:`InvalidInput`
    for a malformed op, ops of several lines, or a bad initial state.
    """
    for op in ops:
        op.validate()
    if len({op.line for op in ops}) > 1:
        raise InvalidInput("check_line takes the ops of one line; use check_history for several")
    _check_initial(initial)
    return _check_line(ops, initial, shrink, budget)


def _check_initial(initial: tuple[dict[str, Any] | None, int]) -> None:
    if not isinstance(initial, tuple) or len(initial) != 2:
        raise InvalidInput(f"the initial state is a (value, version) pair, not {initial!r}")
    if isinstance(initial[1], bool) or not isinstance(initial[1], int) or initial[1] < 0:
        raise InvalidInput(f"the initial version is an integer >= 0, not {initial[1]!r}")
    if initial[0] is not None and not isinstance(initial[0], dict):
        raise InvalidInput(f"the initial value is a JSON object or None, not {type(initial[0]).__name__}")


def _check_line(
    ops: Sequence[Op], initial: tuple[dict[str, Any] | None, int], shrink: bool, budget: int | None
) -> LineVerdict:
    # a read that never answered constrains nothing: leave it out of the search
    kept = [op for op in ops if not (op.kind == "read" and op.pending)]
    line = _Line(kept)
    base = (line.intern(initial[0]), initial[1])
    found = _search(line, range(len(kept)), *base, budget=budget)
    if found.ok:
        return LineVerdict(True, None, found.explored)
    if found.exhausted:
        return LineVerdict(None, None, found.explored)
    if shrink:
        idx, gaps, stuck = _shrink(line, base, found.stuck, budget)
    else:
        idx, gaps, stuck = list(range(len(kept))), False, found.stuck
    counter = Counterexample(
        line=kept[0].line,
        initial_value=initial[0],
        initial_version=initial[1],
        gaps=gaps,
        ops=tuple(kept[i] for i in idx),
        stuck=None if stuck is None else kept[stuck],
        total_ops=len(ops),
    )
    return LineVerdict(False, counter, found.explored)


def check_history(
    ops: Iterable[Op],
    *,
    initial: tuple[dict[str, Any] | None, int] = (None, 0),
    max_counterexamples: int = 3,
    shrink: bool = True,
    budget: int | None = DEFAULT_BUDGET,
) -> CheckResult:
    """Check a whole history, one line at a time (linearizability is local).

    Every line starts from ``initial`` (a fresh line: ``(None, 0)``). The
    first ``max_counterexamples`` failing lines (in IRI order) are shrunk to
    a counterexample each; the rest are only named. ``budget`` is each
    line's (:func:`check_line`). Raises :class:`InvalidInput` for a
    malformed op before checking anything.
    """
    started = time.perf_counter()
    _check_initial(initial)
    by_line: dict[str, list[Op]] = {}
    count = 0
    for op in ops:
        op.validate()
        by_line.setdefault(op.line, []).append(op)
        count += 1
    failed: list[str] = []
    undecided: list[str] = []
    examples: list[Counterexample] = []
    explored = 0
    for iri in sorted(by_line):
        want = shrink and len(examples) < max_counterexamples
        verdict = _check_line(by_line[iri], initial, want, budget)
        explored += verdict.explored
        if verdict.linearizable is None:
            undecided.append(iri)
        elif not verdict.linearizable:
            failed.append(iri)
            if verdict.counterexample is not None and len(examples) < max_counterexamples:
                examples.append(verdict.counterexample)
    return CheckResult(
        linearizable=not failed and not undecided,
        lines=len(by_line),
        ops=count,
        failed_lines=tuple(failed),
        counterexamples=tuple(examples),
        check_s=time.perf_counter() - started,
        explored=explored,
        undecided_lines=tuple(undecided),
    )


def count_anomalies(ops: Iterable[Op]) -> dict[str, int]:
    """Name the classic failures directly, in O(n log n) per line.

    * ``lost_updates``: completed writes (write, successful cas, delete) that
      returned a version another completed write also returned, or a version
      no higher than that of a write which had completed before they were
      invoked — either way one write was applied to a state missing another;
    * ``stale_reads``: completed reads that returned a version lower than
      that of a write which had completed before the read was invoked;
    * ``wrong_values``: completed reads whose value differs from the one the
      completed write of that version wrote (a value never written there).

    Zero on all three does not prove linearizability (the search does);
    a non-zero count says which promise broke.
    """
    by_line: dict[str, list[Op]] = {}
    for op in ops:
        if not op.pending:
            by_line.setdefault(op.line, []).append(op)
    lost = stale = wrong = 0
    for line_ops in by_line.values():
        writes = [op for op in line_ops if op.kind in _MUTATIONS and op.ok and op.version is not None]
        seen_versions: dict[int, str | None] = {}
        claims: dict[int, int] = {}
        for op in writes:
            assert op.version is not None
            claims[op.version] = claims.get(op.version, 0) + 1
            seen_versions.setdefault(op.version, None if op.kind == "delete" else _value_key(op.value))
        lost += sum(n - 1 for n in claims.values() if n > 1)
        # prefix maximum of the versions of writes, in order of their return
        done = sorted(writes, key=lambda o: o.return_ns or 0)
        returns = [o.return_ns or 0 for o in done]
        best: list[int] = []
        top = -1
        for o in done:
            assert o.version is not None
            top = max(top, o.version)
            best.append(top)

        def newest_before(call_ns: int) -> int:
            lo, hi = 0, len(returns)
            while lo < hi:  # first index with return >= call
                mid = (lo + hi) // 2
                if returns[mid] < call_ns:
                    lo = mid + 1
                else:
                    hi = mid
            return best[lo - 1] if lo else -1

        for op in writes:
            assert op.version is not None
            if claims[op.version] == 1 and newest_before(op.call_ns) >= op.version:
                lost += 1
        for op in line_ops:
            if op.kind != "read" or op.version is None:
                continue
            if newest_before(op.call_ns) > op.version:
                stale += 1
            if op.version in seen_versions and seen_versions[op.version] != _value_key(op.value):
                wrong += 1
    return {"lost_updates": lost, "stale_reads": stale, "wrong_values": wrong}


class HistoryRecorder:
    """Thread-safe recording of ops as they are invoked and answered.

    ``begin`` stamps the invocation (``time.perf_counter_ns``, monotonic, the
    same clock on every thread) and returns a token; exactly one of ``ok``,
    ``conflict``, ``unknown`` or ``refused`` closes it. An op never closed
    counts as pending, like ``unknown``. The clock is the machine's on
    purpose: real-time order between threads is what linearizability is
    about, and the history is an observation, not an input of the system.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: dict[int, Op] = {}
        self._done: list[Op] = []
        self._next = 0

    def begin(
        self,
        process: str,
        line: str,
        kind: OpKind,
        *,
        value: dict[str, Any] | None = None,
        expected: int | None = None,
    ) -> int:
        with self._lock:
            token = self._next
            self._next += 1
            self._open[token] = Op(
                token, process, line, kind, time.perf_counter_ns(), None, value=value, expected=expected
            )
        return token

    def _take(self, token: int) -> Op:
        """The open op of ``token``, removed; a token never begun or already closed changes nothing."""
        op = self._open.pop(token, None)
        if op is None:
            raise InvalidInput(f"no open op with token {token!r} (never begun, or already closed)")
        return op

    def ok(self, token: int, version: int, value: dict[str, Any] | None = None) -> None:
        """The op returned ``version`` (a read also the ``value`` it saw)."""
        now = time.perf_counter_ns()
        with self._lock:
            op = self._take(token)
            changes: dict[str, Any] = {"return_ns": now, "version": version}
            if op.kind == "read":
                changes["value"] = value
            self._done.append(replace(op, **changes))

    def conflict(self, token: int) -> None:
        """A cas completed with ConflictError: it changed nothing."""
        now = time.perf_counter_ns()
        with self._lock:
            self._done.append(replace(self._take(token), return_ns=now, ok=False))

    def unknown(self, token: int, note: str) -> None:
        """No answer (timeout, actor unavailable): it may have taken effect or not."""
        with self._lock:
            self._done.append(replace(self._take(token), note=note))

    def refused(self, token: int) -> None:
        """Refused before anything was sent (typed error on input or permission): not part of the history."""
        with self._lock:
            self._take(token)

    def ops(self) -> list[Op]:
        """Every op recorded so far (ops still open count as pending), in token order."""
        with self._lock:
            return sorted([*self._done, *self._open.values()], key=lambda o: o.id)

    def __len__(self) -> int:
        with self._lock:
            return len(self._done) + len(self._open)

"""Durability: SIGKILL a writer at random points; every acknowledged write survives.

A child process applies a deterministic stream of stores (30% with sync=True,
the rest batched), merges, replaces, deletes, graph deletes, annotations and
reads (whose access counts are written down every 25 reads) and appends the
index of each completed operation to an ack file. We SIGKILL it at a random
moment, reopen the database and require that

* the live nodes, every index key and every IRI's version (a deleted node's
  is its tombstone's) equal the state of a reference replay after exactly the
  acknowledged operations, or after one more (the operation that was in
  flight when the kill landed is either wholly there or wholly absent: one
  write batch per logical write);
* ``verify()`` finds nothing wrong (no index entry pointing at nothing, no node
  missing from its index, every record decodes).

Since the kill is of the process, not of the OS, this also checks the claim in
docs/L0.md that unsynchronised (batched) writes survive a process kill.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from l0_support import KILL_IRIS, apply_op, index_keys, kill_ops, node_state, versions

from gliding_actors.clock import VirtualClock
from gliding_actors.l0 import L0Store

HERE = Path(__file__).resolve().parent
CHILD = HERE / "l0_kill_child.py"
SEED = 20240917
KILLS = 24


def _acked(ack_path: Path) -> int:
    """Number of acknowledged operations (complete lines only)."""
    data = ack_path.read_bytes() if ack_path.exists() else b""
    lines = data.split(b"\n")[:-1]  # a torn last line is not an ack
    for expected, line in enumerate(lines):
        assert int(line) == expected, "acks must be consecutive"
    return len(lines)


def _run_and_kill(root: Path, delay: float) -> tuple[Path, int]:
    db = root / "db"
    ack = root / "acks"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), env.get("PYTHONPATH", "")]))
    proc = subprocess.Popen(
        [sys.executable, str(CHILD), str(db), str(ack), str(SEED)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    try:
        assert proc.stdout is not None
        ready = proc.stdout.readline()
        assert ready == b"ready\n", proc.stderr.read() if proc.stderr else ready
        time.sleep(delay)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
    assert proc.returncode == -signal.SIGKILL, "the child must still have been running when killed"
    return db, _acked(ack)


State = tuple[dict[str, Any], set[bytes], dict[str, int]]


def _state(store: L0Store) -> State:
    return node_state(store), index_keys(store), versions(store, KILL_IRIS)


def _reference_states(counts: set[int]) -> dict[int, State]:
    """(nodes, index keys, versions) after exactly n operations, for each n in
    ``counts``, from one replay of the same stream in this process."""
    states: dict[int, State] = {}
    with tempfile.TemporaryDirectory() as tmp:
        clock = VirtualClock(1_000.0)
        store = L0Store(Path(tmp) / "ref", clock=clock, access_flush_every=25)
        try:
            if 0 in counts:
                states[0] = _state(store)
            last = max(counts)
            for i, op in enumerate(kill_ops(SEED)):
                if i >= last:
                    break
                clock.advance(1.0)
                apply_op(store, op)
                if i + 1 in counts:
                    states[i + 1] = _state(store)
        finally:
            store.close()
    return states


def test_sigkill_at_random_points_loses_no_acknowledged_write(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    runs: list[tuple[Path, int]] = []
    for k in range(KILLS):
        root = tmp_path / f"run{k:02d}"
        root.mkdir()
        runs.append(_run_and_kill(root, rng.uniform(0.02, 0.4)))

    counts = {n for _, acked in runs for n in (acked, acked + 1)}
    reference = _reference_states(counts)
    ops = []
    for i, op in enumerate(kill_ops(SEED)):
        if i > max(counts):
            break
        ops.append(op)

    sync_writes_checked = 0
    tombstones_checked = 0
    in_flight_landed = 0
    clock = VirtualClock(0.0)
    for db, acked in runs:
        store = L0Store(db, clock=clock)
        try:
            assert store.verify() == [], f"{db}: indexes disagree with nodes after SIGKILL"
            state = _state(store)
        finally:
            store.close()
        if state == reference[acked]:
            pass
        else:
            assert state == reference[acked + 1], (
                f"{db}: after {acked} acknowledged operations the store matches neither "
                f"the reference after {acked} nor after {acked + 1} operations"
            )
            in_flight_landed += 1
        nodes, _, versions_now = state
        tombstones_checked += sum(1 for iri, v in versions_now.items() if v and iri not in nodes)
        sync_writes_checked += sum(
            1
            for op in ops[:acked]
            if op["op"] in ("store", "delete", "delete_graph") and op.get("sync")
        )

    assert min(acked for _, acked in runs) >= 0
    # the kills landed at many different points of the stream, with synchronous
    # writes among the acknowledged ones
    assert len({acked for _, acked in runs}) >= KILLS // 2
    assert sync_writes_checked > 0
    assert tombstones_checked > 0  # deleted nodes whose versions had to survive

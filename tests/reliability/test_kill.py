"""Kill tests: SIGKILL a team of agents at random points; every promise survives.

``kill_child.py`` opens a memory on the threads runtime and runs three agents
writing a shared pool of lines (write-through with the critical tag
``confirmed_fact``, write-back otherwise) and a thread calling
``memory.flush()``, journalling each write-through write and each flush (with
the write-back lines that had completed before it) only *after* it returned,
with an fsync. The parent kills the child by its pid with SIGKILL after a
random delay, then reopens the memory in this process and checks the
durability contract of docs/RELIABILITY.md:

* every journalled write-through line and every flushed line is in L0 at its
  journalled version or a later one, and at exactly that version it holds the
  journalled value (a write-through one also its critical tag);
* L0 is consistent (``verify()``) and the L2 graph rebuilt on open agrees with
  LevelDB: the same lines, each with the same version, named graph and value;
* a restart after a real kill cannot know what was lost (``lost_in_crash`` is
  empty: nothing survived to report it);
* the memory serves again: a write-through write, a read and a SPARQL query
  round-trip, and a clean close.

The same memory directory and journal are used across the kills, so each run
also checks that the promises of every earlier life still hold after several
restarts, and the new lives continue the line versions from L0.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from gliding_actors import MemorySystem
from gliding_actors.coherence._home import DEFAULT_GRAPH
from gliding_actors.l1 import is_archive_iri

HERE = Path(__file__).resolve().parent
CHILD = HERE / "kill_child.py"
CRITICAL = "confirmed_fact"
SEED = 20261130

#: a promise: the line must be in L0 at version >= v, holding ``value`` at exactly v
Promise = tuple[str, int, dict[str, Any], bool]


def _journal(path: Path) -> list[Promise]:
    """Every promise the child's journal holds (complete lines only: a torn last line is no promise)."""
    data = path.read_bytes() if path.exists() else b""
    promises: list[Promise] = []
    for line in data.split(b"\n")[:-1]:
        record = json.loads(line)
        if record["op"] == "wt":
            promises.append((record["iri"], record["v"], record["value"], True))
        else:
            assert record["op"] == "flush", record
            promises += [(iri, v, value, False) for iri, v, value in record["lines"]]
    return promises


def _run_and_kill(memory_path: Path, journal: Path, seed: int, delay: float) -> None:
    """Start the child workload, let it run ``delay`` s after it is ready, SIGKILL it by pid."""
    proc = subprocess.Popen(
        [sys.executable, str(CHILD), str(memory_path), str(journal), str(seed)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        ready = proc.stdout.readline()
        assert ready == b"ready\n", proc.stderr.read() if proc.stderr else ready
        time.sleep(delay)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        errors = proc.stderr.read() if proc.stderr else b""
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
    assert proc.returncode == -signal.SIGKILL, (
        f"the child died before the kill: {errors.decode(errors='replace')}"
    )


def _check_after_restart(memory_path: Path, promises: list[Promise], life: int) -> dict[str, int]:
    """Reopen the killed memory and check the contract; answer what was checked."""
    memory = MemorySystem.open(memory_path)
    try:
        l0 = memory.l0
        assert l0.verify() == [], "LevelDB's indexes disagree with its nodes after SIGKILL"
        # After a real kill nothing survived to say which write-back writes died.
        assert memory.lost_in_crash == []

        newer = 0
        for iri, version, value, write_through in promises:
            entry = l0.retrieve(iri, touch=False)
            kind = "write-through" if write_through else "flushed"
            assert entry is not None, f"{kind} line {iri} v{version} is not in L0"
            assert entry.version >= version, (
                f"{kind} line {iri}: L0 has v{entry.version} < acknowledged v{version}"
            )
            if entry.version == version:
                assert entry.content == value, (
                    f"{kind} line {iri} v{version}: L0 holds another value"
                )
                if write_through:
                    assert CRITICAL in entry.tags
            else:
                newer += 1

        in_l0 = {
            e.iri: (e.version, e.named_graph or DEFAULT_GRAPH, e.content)
            for e in l0.query()
            if not is_archive_iri(e.iri)
        }
        in_graph = {n.iri: (n.version, n.graph, n.value) for n in memory.graph.lines()}
        assert in_graph == in_l0, "the L2 graph disagrees with LevelDB"
        for iri, (version, graph, _value) in in_l0.items():
            node = memory.graph.node(iri)
            assert node is not None and (node.version, node.graph) == (version, graph)

        # The system serves again: write-through write, read, query.
        probe = memory.agent("probe", "SA")
        iri = f"urn:kill:probe-{life}"
        written = probe.write(iri, {"@id": iri, "life": life}, tags=[CRITICAL])
        assert written["policy"] == "write_through"
        assert l0.retrieve(iri, touch=False) is not None
        reader = memory.agent("reader", "DA")
        read = reader.read(iri)
        assert (read["value"], read["version"]) == ({"@id": iri, "life": life}, written["version"])
        rows = reader.query(f"SELECT ?life WHERE {{ <{iri}> ga:life ?life }}")["rows"]
        assert rows == [{"life": str(life)}]  # SPARQL rows carry literals as text
        return {"promises": len(promises), "newer": newer, "lines": len(in_l0)}
    finally:
        memory.close()


def _kill_many(tmp_path: Path, kills: int, seed: int) -> dict[str, int]:
    rng = random.Random(seed)
    memory_path = tmp_path / "memory"
    journal = tmp_path / "journal"
    checked: dict[str, int] = {}
    for life in range(kills):
        _run_and_kill(memory_path, journal, seed + life, rng.uniform(0.0, 0.6))
        checked = _check_after_restart(memory_path, _journal(journal), life)
    return checked


def _assert_meaningful(checked: dict[str, int], journal: Path) -> None:
    """The kills must have landed in a working team: many promises of both kinds."""
    promises = _journal(journal)
    assert sum(1 for p in promises if p[3]) > 50, "too few write-through writes were acknowledged"
    assert sum(1 for p in promises if not p[3]) > 50, "too few write-back lines were flushed"
    assert checked["lines"] > 0


def test_sigkill_at_random_points_keeps_every_acknowledged_write(tmp_path: Path) -> None:
    checked = _kill_many(tmp_path, kills=12, seed=SEED)
    _assert_meaningful(checked, tmp_path / "journal")


@pytest.mark.slow
def test_sigkill_at_a_hundred_random_points_keeps_every_acknowledged_write(tmp_path: Path) -> None:
    checked = _kill_many(tmp_path, kills=100, seed=SEED + 1)
    _assert_meaningful(checked, tmp_path / "journal")

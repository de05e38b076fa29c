"""Kill harness: SIGKILL a team of agents at random points; check every promise after each restart.

:func:`run_kills` starts ``_kill_child`` (a memory on the threads runtime,
three agents writing a shared pool of lines — write-through with the critical
tag ``confirmed_fact``, write-back otherwise — and a thread calling
``memory.flush()``) as a subprocess, kills it by its pid with SIGKILL after a
random delay, reopens the memory in this process and checks the durability
contract of docs/RELIABILITY.md:

* every journalled write-through line and every flushed line is in L0 at its
  journalled version or a later one, and at exactly that version holds the
  journalled value (a write-through one also its critical tag);
* L0 is consistent (``verify()``) and the L2 graph rebuilt on open agrees
  with LevelDB: the same lines, each with the same version, named graph and
  value;
* no (line, version) is ever acknowledged with two values, across every
  life (write-back writes included: a kill may lose them, but the next life
  numbers its writes above them), and L0 holds no other value at an
  acknowledged (line, version);
* a restart after a real kill cannot know what was lost (``lost_in_crash`` is
  empty: nothing survived to report it);
* the memory serves again: a write-through write, a read from another agent
  and a SPARQL query round-trip, then a clean close.

Every kill uses the same memory directory and journal, so each restart also
re-checks the promises of every earlier life, and the new lives continue the
line versions from L0.

Violations are *counted*, not asserted, so the benchmark can print them
(``lost_writes`` must be 0); the tests assert the counts.
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gliding_actors.coherence._home import DEFAULT_GRAPH
from gliding_actors.errors import GlidingError
from gliding_actors.l1 import is_archive_iri

__all__ = ["KillReport", "run_kills"]

CRITICAL = "confirmed_fact"
#: the workload, run as a script (it imports only the installed package)
CHILD_SCRIPT = Path(__file__).with_name("_kill_child.py")

#: a promise: the line must be in L0 at version >= v, holding ``value`` at exactly v
Promise = tuple[str, int, dict[str, Any], bool]
#: an acknowledged write, durable or not: (line, version) names ``value`` forever
Acknowledged = tuple[str, int, dict[str, Any]]


@dataclasses.dataclass
class KillReport:
    """What :func:`run_kills` did and found; every list of problems must be empty."""

    kills: int = 0
    #: promises in the journal after the last kill (each re-checked after every later kill)
    promises: int = 0
    write_through: int = 0
    flushed: int = 0
    #: acknowledged writes in the journal (write-through and write-back) after the last kill
    acknowledged: int = 0
    #: one line per broken promise found after some restart (a lost or changed write)
    lost_writes: list[str] = dataclasses.field(default_factory=list)
    #: one line per (line, version) acknowledged with two values, or held in L0 with another
    reused_versions: list[str] = dataclasses.field(default_factory=list)
    #: LevelDB index or L0/graph disagreements found after some restart
    disagreements: list[str] = dataclasses.field(default_factory=list)
    #: restarts after which the memory did not serve (with the error)
    not_serving: list[str] = dataclasses.field(default_factory=list)
    #: children that died before their kill (with their stderr's last line)
    early_deaths: list[str] = dataclasses.field(default_factory=list)
    seconds: float = 0.0

    def as_json(self) -> dict[str, Any]:
        return {
            "kills": self.kills,
            "promises": self.promises,
            "write_through": self.write_through,
            "flushed": self.flushed,
            "acknowledged": self.acknowledged,
            "lost_writes": len(self.lost_writes),
            "reused_versions": len(self.reused_versions),
            "disagreements": len(self.disagreements),
            "not_serving": len(self.not_serving),
            "early_deaths": len(self.early_deaths),
            "kill_seconds": round(self.seconds, 1),
            "kill_failures": (
                self.lost_writes + self.reused_versions + self.disagreements + self.not_serving + self.early_deaths
            )[:10],
        }


def read_journal(path: Path) -> tuple[list[Promise], list[Acknowledged]]:
    """The promises and the acknowledged writes the child's journal holds.

    Complete lines only: a torn last line is no promise.
    """
    data = path.read_bytes() if path.exists() else b""
    promises: list[Promise] = []
    acknowledged: list[Acknowledged] = []
    for line in data.split(b"\n")[:-1]:
        record = json.loads(line)
        if record["op"] in ("wt", "wb"):
            acknowledged.append((record["iri"], record["v"], record["value"]))
            if record["op"] == "wt":
                promises.append((record["iri"], record["v"], record["value"], True))
        elif record["op"] == "flush":
            promises += [(iri, v, value, False) for iri, v, value in record["lines"]]
        else:
            raise ValueError(f"unknown journal record {record!r}")
    return promises, acknowledged


def _reused(acknowledged: list[Acknowledged]) -> list[str]:
    """Each (line, version) the journal acknowledged with two different values."""
    first: dict[tuple[str, int], dict[str, Any]] = {}
    found = []
    for iri, version, value in acknowledged:
        held = first.setdefault((iri, version), value)
        if held != value:
            found.append(f"{iri} v{version} acknowledged as {held!r} and again as {value!r}")
    return found


def _run_and_kill(memory_path: Path, journal: Path, seed: int, delay: float, mode: str) -> str | None:
    """Start the child, let it run ``delay`` s after it is ready, SIGKILL it by pid.

    Returns None, or why the child died on its own before the kill.
    """
    proc = subprocess.Popen(
        [sys.executable, str(CHILD_SCRIPT), str(memory_path), str(journal), str(seed), mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None and proc.stderr is not None
        ready = proc.stdout.readline()
        if ready != b"ready\n":
            proc.wait(timeout=60)
            return f"the child never became ready: {_last_line(proc.stderr.read())}"
        time.sleep(delay)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
        errors = proc.stderr.read()
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=60)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
    if proc.returncode != -signal.SIGKILL:
        return f"the child died before the kill (rc {proc.returncode}): {_last_line(errors)}"
    return None


def _last_line(stderr: bytes) -> str:
    lines = stderr.decode(errors="replace").strip().splitlines()
    return lines[-1] if lines else "(no output)"


def _check_after_restart(
    memory_path: Path, promises: list[Promise], acknowledged: list[Acknowledged], life: int, report: KillReport
) -> None:
    """Reopen the killed memory and check the contract, adding what is broken to ``report``."""
    from gliding_actors.system import MemorySystem

    memory = MemorySystem.open(memory_path)
    try:
        l0 = memory.l0
        for problem in l0.verify():
            report.disagreements.append(f"life {life}: LevelDB: {problem}")
        if memory.lost_in_crash:  # after a real kill nothing survived to say what died
            report.disagreements.append(f"life {life}: lost_in_crash after a real kill: {memory.lost_in_crash[:3]}")
        for iri, version, value, write_through in promises:
            entry = l0.retrieve(iri, touch=False)
            kind = "write-through" if write_through else "flushed"
            if entry is None:
                report.lost_writes.append(f"life {life}: {kind} {iri} v{version} is not in L0")
            elif entry.version < version:
                report.lost_writes.append(f"life {life}: {kind} {iri}: L0 has v{entry.version} < acknowledged v{version}")
            elif entry.version == version and entry.content != value:
                report.lost_writes.append(f"life {life}: {kind} {iri} v{version}: L0 holds another value")
            elif entry.version == version and write_through and CRITICAL not in entry.tags:
                report.lost_writes.append(f"life {life}: write-through {iri} v{version} lost its critical tag")
        for iri, version, value in acknowledged:
            entry = l0.retrieve(iri, touch=False)
            if entry is not None and entry.version == version and entry.content != value:
                report.reused_versions.append(f"life {life}: L0 holds {iri} v{version} with another value than acknowledged")

        in_l0 = {
            e.iri: (e.version, e.named_graph or DEFAULT_GRAPH, e.content)
            for e in l0.query()
            if not is_archive_iri(e.iri)
        }
        in_graph = {n.iri: (n.version, n.graph, n.value) for n in memory.graph.lines()}
        if in_graph != in_l0:
            differ = sorted(k for k in set(in_graph) | set(in_l0) if in_graph.get(k) != in_l0.get(k))
            report.disagreements.append(f"life {life}: the L2 graph disagrees with LevelDB ({differ[:3]})")

        try:
            probe = memory.agent("probe", "SA")
            iri = f"urn:kill:probe-{life}"
            written = probe.write(iri, {"@id": iri, "life": life}, tags=[CRITICAL])
            reader = memory.agent("reader", "DA")
            read = reader.read(iri)
            rows = reader.query(f"SELECT ?life WHERE {{ <{iri}> ga:life ?life }}")["rows"]
            if (
                written["policy"] != "write_through"
                or l0.retrieve(iri, touch=False) is None
                or (read["value"], read["version"]) != ({"@id": iri, "life": life}, written["version"])
                or rows != [{"life": str(life)}]  # SPARQL rows carry literals as text
            ):
                report.not_serving.append(f"life {life}: the probe write/read/query gave {written!r}, {read!r}, {rows!r}")
        except GlidingError as exc:
            report.not_serving.append(f"life {life}: {type(exc).__name__}: {exc}")
    finally:
        memory.close()


def run_kills(
    workdir: Path,
    *,
    kills: int,
    seed: int,
    max_delay_s: float = 0.6,
    mode: str = "honest",
    progress: Callable[[int], None] | None = None,
) -> KillReport:
    """SIGKILL the workload ``kills`` times in ``workdir`` (one memory, one journal); check after each.

    ``mode="lying"`` runs a child that journals write-back writes as flushed
    without flushing them: the report must then show lost writes.
    ``progress`` is called with the number of kills done after each one.
    """
    if mode not in ("honest", "lying"):
        raise ValueError(f"mode is 'honest' or 'lying', not {mode!r}")
    rng = random.Random(seed)
    memory_path = workdir / "memory"
    journal = workdir / "journal"
    report = KillReport()
    started = time.perf_counter()
    for life in range(kills):
        died = _run_and_kill(memory_path, journal, seed + life, rng.uniform(0.0, max_delay_s), mode)
        if died is not None:
            report.early_deaths.append(f"life {life}: {died}")
        report.kills += 1
        promises, acknowledged = read_journal(journal)
        _check_after_restart(memory_path, promises, acknowledged, life, report)
        if progress is not None:
            progress(life + 1)
    promises, acknowledged = read_journal(journal)
    report.reused_versions += _reused(acknowledged)
    report.acknowledged = len(acknowledged)
    report.promises = len(promises)
    report.write_through = sum(1 for p in promises if p[3])
    report.flushed = report.promises - report.write_through
    report.seconds = time.perf_counter() - started
    return report

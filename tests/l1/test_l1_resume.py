"""A session survives a reopen: the chain, weak references, query and stale marks come back from L0."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from gliding_actors import InvalidInput, MemorySystem
from gliding_actors.clock import VirtualClock

_CONFIG = {"l1": {"token_budget": 100, "counter": "estimate-v1"}}


def _open(path: Path, runtime: str = "sim") -> MemorySystem:
    return MemorySystem.open(path, runtime=runtime, clock=VirtualClock(), config=_CONFIG)


@pytest.mark.parametrize("runtime", ["sim", "threads"])
def test_the_chain_weak_refs_query_and_stale_marks_come_back(tmp_path: Path, runtime: str) -> None:
    with _open(tmp_path, runtime) as first:
        pa = first.agent("pa", "PA")
        pa.write("plan:jwt", {"summary": "RS256"}, graph="plan")
        pa.read("plan:jwt")
        pa.turn("validated the JWT signatures in the auth middleware", tokens=25, cites=["plan:jwt"])
        pa.turn("picked the dashboard colour palette", tokens=25)
        pa.set_query(text="JWT signatures in the auth middleware")
        first.clock.advance(400)
        pa.write("plan:jwt", {"summary": "ES256"})  # the cited line changes: the first turn is stale
        first.quiesce()
        evicted = pa.turn("rotated the JWT signing keys", tokens=25, relevance=0.9)["evicted"]
        evicted += pa.turn("noted the on-call rota", tokens=25, relevance=0.8)["evicted"]
        assert evicted  # eviction ran before the reopen, so it is journaled
        before = pa.session()
        assert before["query"] is True and any(t["stale"] for t in before["turns"])
    with _open(tmp_path, runtime) as second:
        pa = second.agent("pa", "PA")
        after = pa.session()
        assert after == before
        # and it goes on from there: numbering, the query (the text is embedded again)
        assert pa.turn("merged the key rotation", tokens=5)["archive_iri"] == "memory:session-pa/block-5"
        assert pa.session()["query"] is True


def test_search_does_not_read_a_blocks_journal(tmp_path: Path) -> None:
    """The journal is bookkeeping: a query text kept there must not make the block a hit for it."""
    with _open(tmp_path) as memory:
        pa = memory.agent("pa", "PA")
        pa.set_query(text="zanzibar quokka")
        block = pa.turn("wrote the rate limiter", tokens=5)["archive_iri"]
        assert "journal" in pa.reload(block)
        assert pa.search("zanzibar quokka", 5)["iris"] == []
        assert pa.search("rate limiter", 5)["iris"] == [block]


def test_resume_false_archives_the_interrupted_session_and_starts_empty(tmp_path: Path) -> None:
    with _open(tmp_path) as first:
        pa = first.agent("pa", "PA")
        pa.turn("one", tokens=5)
        pa.turn("two", tokens=5)
    with _open(tmp_path) as second:
        with pytest.raises(InvalidInput, match="resume"):
            second.agent("pa", "PA", resume="yes")  # type: ignore[arg-type]
        pa = second.agent("pa", "PA", resume=False)
        assert pa.session()["turns"] == [] and pa.session()["weak_refs"] == []
        closed = pa.reload("memory:session-pa/session-1")
        assert closed["blocks"] == ["memory:session-pa/block-1", "memory:session-pa/block-2"]
        assert closed["chain"] == closed["blocks"]
        assert pa.turn("three", tokens=5)["archive_iri"] == "memory:session-pa/block-3"
    with _open(tmp_path) as third:  # block 3 alone is open now
        assert third.agent("pa", "PA").session()["summaries"] == ["three"]


def test_a_closed_session_is_not_resumed(tmp_path: Path) -> None:
    with _open(tmp_path) as first:
        pa = first.agent("pa", "PA")
        pa.turn("one", tokens=5)
        pa.close_session()
    with _open(tmp_path) as second:
        assert second.agent("pa", "PA").session()["turns"] == []


def test_a_block_that_does_not_read_as_a_turn_stays_out_of_the_chain(tmp_path: Path) -> None:
    with _open(tmp_path) as first:
        pa = first.agent("pa", "PA")
        pa.turn("one", tokens=5)
        pa.turn("two", tokens=5)
        node = first.l0.retrieve("memory:session-pa/block-1", touch=False)
        assert node is not None
        damaged: dict[str, Any] = {**node.content, "seq": "not a number"}
        first.l0.store(node.__class__(node.iri, damaged, named_graph=node.named_graph), merge=False)
    with _open(tmp_path) as second:
        assert second.agent("pa", "PA").session()["summaries"] == ["two"]


_CHILD = textwrap.dedent(
    """
    import sys
    from gliding_actors import MemorySystem
    memory = MemorySystem.open(sys.argv[1], runtime="threads", config={"l1": {"token_budget": 200}})
    pa = memory.agent("pa", "PA")
    n = 0
    while True:
        n += 1
        iri = pa.turn(f"step {n} of the rollout", thought="t" * 200, tokens=40)["archive_iri"]
        print(iri, flush=True)
    """
)


def test_a_killed_process_resumes_with_every_acknowledged_turn(tmp_path: Path) -> None:
    """SIGKILL mid-work: every turn the child was told was archived is in the chain or a weak reference."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(tmp_path)], stdout=subprocess.PIPE, text=True, env=env
    )
    acknowledged: list[str] = []
    try:
        assert child.stdout is not None
        while len(acknowledged) < 40:
            line = child.stdout.readline()
            assert line, f"the child stopped early (exit {child.poll()})"
            acknowledged.append(line.strip())
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
    with MemorySystem.open(tmp_path, runtime="threads", config={"l1": {"token_budget": 200}}) as memory:
        session = memory.agent("pa", "PA").session()
        held = [t["archive_iri"] for t in session["turns"]] + session["weak_refs"]
        assert set(acknowledged) <= set(held)
        assert session["tokens"] <= 200 and len(held) == len(set(held))

"""The embed worker: lines are indexed at once, embedded in batches off the search path; no search waits on a backlog."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gliding_actors.config import Config
from gliding_actors.hyperspace._embedders import EmbedderChain, HashEmbedder
from gliding_actors.hyperspace._engine import HyperspaceEngine, _digest, embed_batch
from gliding_actors.hyperspace._text import node_text
from gliding_actors.system import MemorySystem
from tests.hyperspace import _server


@pytest.fixture
def server() -> Iterator[_server.EmbeddingServer]:
    s = _server.EmbeddingServer()
    yield s
    s.close()


def _gated(server: _server.EmbeddingServer, **hyperspace: Any) -> dict[str, Any]:
    """A memory whose embedder is the local server; line texts (``note ...``) wait for ``server.gate``."""
    server.hold = lambda text: text.startswith("note")
    return {"hyperspace": {"embedder": "openai", "openai_url": server.url, "openai_model": "m", "fallback": [],
                           "embeddings": "thread", **hyperspace}}


def test_a_search_does_not_wait_for_an_embedding_backlog(server: _server.EmbeddingServer) -> None:
    """The embedder is stuck: lines are found by their words at once, by meaning once their vectors are in."""
    with MemorySystem.open(runtime="threads", config=_gated(server, embed_at_search=0)) as m:
        pa = m.agent("pa", "PA")
        for i in range(40):
            pa.write(f"note:{i}", {"summary": f"note {i} about the signing keys"}, graph="plan")
        found = pa.search("note 7", 3)  # would wait on the stuck embedder (and time out) if a search embedded
        assert found["iris"][0] == "note:7" and found["embedders"] == []
        stats = m.hyperspace.stats()
        assert stats["waiting_for_vectors"] == 40
        assert stats["embeddings_queued"] >= 40  # every line's text, queued or in the stuck worker's hand
        server.gate.set()
        assert m.hyperspace.wait_embeddings(timeout=30)
        found = pa.search("note 7", 3)
        assert found["iris"][0] == "note:7" and found["embedders"] == ["openai/m"]
        stats = m.hyperspace.stats()
        assert stats["waiting_for_vectors"] == 0 and stats["spaces"]["openai/m"]["vectors"] == 40
        assert stats["embeddings_queued"] == 0


def test_a_search_embeds_a_small_remainder_itself(server: _server.EmbeddingServer) -> None:
    """At most ``embed_at_search`` waiting lines: the search embeds them, so a fresh line is found by meaning."""
    server.hold = None
    with MemorySystem.open(runtime="threads", config=_gated(server, embed_at_search=8)) as m:
        server.hold = lambda text: False
        pa = m.agent("pa", "PA")
        pa.write("note:a", {"summary": "rotate the signing keys"}, graph="plan")
        found = pa.search("signing", 1)
        assert found["embedders"] == ["openai/m"] and m.hyperspace.stats()["waiting_for_vectors"] == 0


@pytest.mark.parametrize("reopen_on", ["threads", "sim"])
def test_vectors_not_made_by_close_are_made_after_the_next_open(
    server: _server.EmbeddingServer, tmp_path: Path, reopen_on: str
) -> None:
    config = _gated(server, embed_at_search=0, embed_batch=4)
    m = MemorySystem.open(tmp_path / "m", runtime="threads", config=config)
    pa = m.agent("pa", "PA")
    for i in range(20):
        # write-through; not with the intent tag, whose text the prefetcher would embed (and wait at the gate too)
        pa.write(f"note:{i}", {"summary": f"note {i} about the signing keys"}, graph="plan", tags=["confirmed_fact"])
    assert pa.search("note", 1)["iris"]  # every line indexed by words; the worker holds one batch at the gate
    hyperspace = m.hyperspace

    def open_gate_once_close_dropped_the_backlog() -> None:
        # close drops the queued texts, then waits for the batch in hand (at most embed_batch): only then
        # may that batch finish (a timer could fire before close gets there: the worker would embed all 20)
        deadline = time.monotonic() + 30.0
        while hyperspace.stats()["embeddings_queued"] > 4 and time.monotonic() < deadline:
            time.sleep(0.005)
        server.gate.set()

    threading.Thread(target=open_gate_once_close_dropped_the_backlog, daemon=True).start()
    m.close()
    server.gate.clear()  # the reopened memory's worker holds at the gate: what close saved stays countable
    with MemorySystem.open(tmp_path / "m", runtime=reopen_on, config=config) as m:
        waiting = m.hyperspace.stats()["waiting_for_vectors"]
        assert 0 < waiting < 20  # the batch in hand got its vectors; the queued rest was saved waiting
        server.gate.set()
        assert m.hyperspace.wait_embeddings(timeout=30)
        found = m.agent("pa", "PA").search("note 3", 20)
        assert set(found["iris"]) == {f"note:{i}" for i in range(20)}
        stats = m.hyperspace.stats()
        assert stats["waiting_for_vectors"] == 0 and stats["spaces"]["openai/m"]["vectors"] == 20


@pytest.mark.parametrize("mode", ["auto", "search", "inline"])
def test_on_the_simulator_only_the_text_a_search_needs_is_embedded(mode: str) -> None:
    """``search`` (the simulator's default): a line rewritten three times is embedded once, by the search;
    ``inline`` embeds each version the engine indexes."""
    config = {"hyperspace": {"embeddings": mode, "embedder": "hash"}}
    with MemorySystem.open(runtime="sim", config=config) as m:
        pa = m.agent("pa", "PA")
        for text in ("rotate the signing keys", "rotate the keys monthly", "rotate the keys weekly"):
            pa.write("note:keys", {"summary": text}, graph="plan", tags=["confirmed_fact"])  # home at once
            m.quiesce(5)
        before = m.hyperspace.engine.embedded
        found = pa.search("keys weekly", 1)
        assert found["iris"] == ["note:keys"] and found["embedders"] == ["hash-v1/384"]
        if mode == "inline":
            assert before == 3 and m.hyperspace.engine.embedded == 3
        else:
            assert before == 0 and m.hyperspace.engine.embedded == 1


def test_a_line_rewritten_while_queued_is_embedded_once_with_its_newest_text(server: _server.EmbeddingServer) -> None:
    """The worker is stuck on one batch while a line is rewritten five times: only the newest text gets a vector."""
    with MemorySystem.open(runtime="threads", config=_gated(server, embed_at_search=0, embed_batch=1)) as m:
        pa = m.agent("pa", "PA")
        pa.write("note:first", {"summary": "note that holds the worker at the gate"}, graph="plan")
        pa.search("gate", 1)  # queued; the worker takes it and waits at the gate
        for version in range(5):
            pa.write("note:keys", {"summary": f"note keys rotated {version} times"}, graph="plan")
            pa.search("keys", 1)  # brings the line home: each version is queued for the worker in turn
        server.gate.set()
        assert m.hyperspace.wait_embeddings(timeout=30)
        embedded = [text for call in server.calls for text in call]
        assert [t for t in embedded if "rotated" in t] == ["note keys rotated 4 times"]
        assert m.hyperspace.stats()["embeddings_superseded"] >= 4  # each older version (and repeats of the newest)
        found = pa.search("keys rotated", 1)
        assert found["iris"] == ["note:keys"] and found["embedders"] == ["openai/m"]
        assert m.hyperspace.stats()["waiting_for_vectors"] == 0


def test_a_line_rewritten_with_the_same_text_is_not_embedded_again(server: _server.EmbeddingServer) -> None:
    """Only numbers change (a counter, a stamp): the text is the same, and so is its vector."""
    with MemorySystem.open(runtime="threads", config=_gated(server, embed_at_search=0)) as m:
        server.hold = None
        pa = m.agent("pa", "PA")
        for n in range(6):
            pa.write("note:keys", {"summary": "note keys rotated weekly", "n": n}, graph="plan")
            m.quiesce(5)  # the line.changed event is handled: its text queued for the worker, or not
            assert m.hyperspace.wait_embeddings(timeout=30)
        embedded = [text for call in server.calls for text in call]
        assert embedded.count("note keys rotated weekly") == 1
        found = pa.search("keys rotated", 1)
        assert found["iris"] == ["note:keys"] and found["embedders"] == ["openai/m"]


# --- vectors made before their line is indexed -------------------------------------------------


class _CountingEmbedder(HashEmbedder):
    """The hash embedder, counting the texts it embeds."""

    def __init__(self) -> None:
        super().__init__(64)
        self.texts = 0

    def embed(self, texts: list[str]) -> Any:
        self.texts += len(texts)
        return super().embed(texts)


def _engine(embed_cache: int) -> tuple[HyperspaceEngine, _CountingEmbedder]:
    config = Config.from_dict({"hyperspace": {"embed_cache": embed_cache}}).hyperspace
    embedder = _CountingEmbedder()
    return HyperspaceEngine(config, EmbedderChain([embedder])), embedder


def _value(n: int, rewrite: int = 0) -> dict[str, Any]:
    return {"summary": f"note {n} about the signing keys, draft {rewrite}"}


def test_a_backlog_larger_than_the_embedding_cache_is_embedded_once() -> None:
    """The worker embeds six lines still on their way home; the cache keeps two texts, the lines keep all six."""
    engine, embedder = _engine(embed_cache=2)
    texts = {_digest(node_text(_value(n))): node_text(_value(n)) for n in range(6)}
    made = embed_batch(engine.chain, texts)  # what the worker does, off the actor
    assert embedder.texts == 6
    by_digest = {digest: (space, vector) for space, digest, vector in made}
    for n in range(6):
        digest = _digest(node_text(_value(n)))
        space, vector = by_digest[digest]
        engine.install(space, [(f"note:{n}", digest, vector)])  # no document yet: kept for the line
    assert engine.stats()["vectors_ahead"] == 6
    for n in range(6):  # the lines come home
        doc = engine.upsert(f"note:{n}", _value(n), version=1, graph="plan", defer=True)
        assert doc.space == embedder.name
    assert engine.waiting == {} and embedder.texts == 6  # none embedded again
    assert engine.stats()["vectors_ahead"] == 0


def test_a_warmed_line_is_embedded_once_whatever_the_cache() -> None:
    """Inline embedding: warm() on the event, upsert() when the line is home, six lines, a cache of two."""
    engine, embedder = _engine(embed_cache=2)
    for n in range(6):
        engine.warm(f"note:{n}", _value(n))
    for n in range(6):
        assert engine.upsert(f"note:{n}", _value(n), version=1, graph="plan").space == embedder.name
    assert embedder.texts == 6 and engine.stats()["vectors_ahead"] == 0


def test_a_vector_made_for_a_newer_text_waits_for_it_and_a_removed_line_drops_its_own() -> None:
    engine, embedder = _engine(embed_cache=1)
    engine.upsert("note:0", _value(0), version=1, graph="plan")
    engine.warm("note:0", _value(0, rewrite=2))  # version 2 is still in its writer's cache
    engine.warm("note:9", _value(9))  # cache of one: the first warm's vector is out of it
    engine.upsert("note:0", _value(0), version=1, graph="plan")  # version 1 again: the newer vector stays
    assert engine.stats()["vectors_ahead"] == 2
    before = embedder.texts
    assert engine.upsert("note:0", _value(0, rewrite=2), version=2, graph="plan").space == embedder.name
    assert embedder.texts == before  # version 2 came home and found its vector
    engine.remove("note:9")
    assert engine.stats()["vectors_ahead"] == 0

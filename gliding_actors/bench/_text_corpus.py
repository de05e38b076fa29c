"""Real text for the vector benchmark, found offline, and its embeddings cached outside the repository.

The passages are the docstrings of the Python running the bench: its
standard library and every installed package, split into paragraphs. That
text is on every machine that can run the bench, it is prose about code
(what users of an agent memory store too), and there is plenty of it: a
fresh venv with the ``bench`` extra holds about 100,000 distinct paragraphs.
The same installation gives the same corpus; another one gives another, so
the report states the corpus' size and digest.

Embedding 60,000 passages with the default model takes minutes on a small
machine, so vectors are cached per passage (keyed by a digest of the
embedder's name and the text) in a cache folder, never in the repository:
a second run embeds only passages it has not seen.
"""

from __future__ import annotations

import ast
import hashlib
import os
import random
import re
import sysconfig
import time
import warnings
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

__all__ = ["MAX_WORDS", "MIN_WORDS", "VectorCache", "default_cache_dir", "docstring_paragraphs", "split_corpus"]

#: a paragraph shorter than this is a signature or a one-liner, longer is truncated by the model anyway
MIN_WORDS = 8
MAX_WORDS = 150
_SKIPPED_DIRS = frozenset({"__pycache__", "test", "tests", "site-packages", "dist-packages"})
_PARAGRAPH = re.compile(r"\n\s*\n")


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/gliding-actors`` (``~/.cache/gliding-actors`` when unset)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "gliding-actors"


def _python_roots() -> list[Path]:
    """The standard library and the installed packages of the running Python, each once."""
    paths = sysconfig.get_paths()
    roots: list[Path] = []
    for key in ("stdlib", "purelib", "platlib"):
        root = Path(paths[key]).resolve()
        if root.is_dir() and root not in roots:
            roots.append(root)
    return roots


def _source_files(roots: Iterable[Path]) -> Iterable[Path]:
    """Every ``.py`` file under ``roots`` in a fixed order, test folders and nested site-packages left out."""
    for root in roots:
        for folder, dirs, files in os.walk(root):
            dirs[:] = sorted(d for d in dirs if d not in _SKIPPED_DIRS and not d.endswith((".dist-info", ".egg-info")))
            for name in sorted(files):
                if name.endswith(".py"):
                    yield Path(folder) / name


def _docstrings(source: str) -> Iterable[str]:
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            text = ast.get_docstring(node)
            if text:
                yield text


def docstring_paragraphs(roots: Iterable[Path] | None = None, enough: int | None = None) -> list[str]:
    """The distinct docstring paragraphs of ``MIN_WORDS``–``MAX_WORDS`` words under ``roots``, sorted.

    ``roots`` None: the running Python's standard library and installed
    packages. Whitespace is collapsed to single spaces; files that do not
    parse (another Python's syntax, another encoding) are skipped. ``enough``:
    stop after the file that brings the count to it (files are read in a fixed
    order, so the answer is still the same on every run); None reads them all.
    """
    found: set[str] = set()
    for path in _source_files(_python_roots() if roots is None else roots):
        if enough is not None and len(found) >= enough:
            break
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # invalid escape sequences in old sources
                texts = list(_docstrings(path.read_text(encoding="utf-8")))
        except (OSError, UnicodeDecodeError, SyntaxError, ValueError, RecursionError):
            continue
        for text in texts:
            for paragraph in _PARAGRAPH.split(text):
                words = paragraph.split()
                if MIN_WORDS <= len(words) <= MAX_WORDS:
                    found.add(" ".join(words))
    return sorted(found)


def split_corpus(paragraphs: Sequence[str], size: int, queries: int, seed: int = 0) -> tuple[list[str], list[str]]:
    """``(corpus, queries)``: the paragraphs shuffled with ``seed``, the first ``queries`` held apart as
    queries and the next ``size`` the corpus (fewer when there are not as many)."""
    shuffled = list(paragraphs)
    random.Random(seed).shuffle(shuffled)
    return shuffled[queries : queries + size], shuffled[:queries]


class VectorCache:
    """Vectors of texts by one embedder, kept in ``folder/vectors.npz`` (16-byte keys and their vectors).

    A text's key is a digest of the embedder's name and the text, so two
    embedders never share a vector. Keys are stored as raw bytes (numpy's
    fixed-length byte strings drop trailing zero bytes, and one digest in 256
    ends with one). A damaged cache is set aside with a warning and rebuilt:
    it only ever costs time.
    """

    FILE = "vectors.npz"

    def __init__(self, folder: Path, embedder_name: str) -> None:
        self.folder = folder
        self._salt = embedder_name.encode() + b"\0"
        self._row: dict[bytes, int] = {}
        self._vectors: npt.NDArray[np.float32] | None = None
        self._load()

    def key(self, text: str) -> bytes:
        return hashlib.blake2b(self._salt + text.encode("utf-8", "surrogatepass"), digest_size=16).digest()

    def _load(self) -> None:
        path = self.folder / self.FILE
        if not path.is_file():
            return
        try:
            with np.load(path, allow_pickle=False) as saved:
                keys, vectors = saved["keys"], saved["vectors"]
            if keys.dtype != np.uint8 or keys.ndim != 2 or keys.shape[1] != 16 or vectors.ndim != 2:
                raise ValueError("not a vector cache")
            if len(keys) != len(vectors):
                raise ValueError(f"{len(keys)} keys but {len(vectors)} vectors")
        except (OSError, ValueError, KeyError) as exc:
            warnings.warn(f"the vector cache at {path} does not load ({exc}): embedding again", stacklevel=3)
            return
        self._vectors = vectors.astype(np.float32, copy=False)
        self._row = {key.tobytes(): i for i, key in enumerate(keys)}

    def __len__(self) -> int:
        return len(self._row)

    def missing(self, texts: Sequence[str]) -> list[str]:
        """The distinct ``texts`` with no cached vector, in first-seen order."""
        return list(dict.fromkeys(t for t in texts if self.key(t) not in self._row))

    def add(self, texts: Sequence[str], vectors: npt.NDArray[np.float32]) -> None:
        """Remember ``vectors[i]`` as the vector of ``texts[i]`` (in memory; :meth:`save` writes).

        A text cached already, or given twice, keeps its first vector."""
        if len(texts) != len(vectors):
            raise ValueError(f"{len(texts)} texts but {len(vectors)} vectors")
        fresh: dict[bytes, int] = {}
        for i, text in enumerate(texts):
            key = self.key(text)
            if key not in self._row and key not in fresh:
                fresh[key] = i
        if not fresh:
            return
        old = self._vectors
        start = 0 if old is None else len(old)
        added = np.asarray(vectors, dtype=np.float32)[np.fromiter(fresh.values(), dtype=np.int64, count=len(fresh))]
        self._vectors = added if old is None else np.concatenate([old, added])
        for offset, key in enumerate(fresh):
            self._row[key] = start + offset

    def vectors_of(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """The cached vectors of ``texts``, in order; KeyError names a text not cached."""
        if self._vectors is None:
            raise KeyError("the cache is empty")
        rows = np.fromiter((self._row[self.key(t)] for t in texts), dtype=np.int64, count=len(texts))
        return self._vectors[rows]

    def save(self) -> None:
        """Write the cache: one file, replaced atomically, so keys and vectors always pair up."""
        if self._vectors is None:
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        keys = np.frombuffer(b"".join(self._row), dtype=np.uint8).reshape(-1, 16)
        rows = np.fromiter(self._row.values(), dtype=np.int64, count=len(self._row))
        target = self.folder / self.FILE
        tmp = target.with_name(f".{self.FILE}.{os.getpid()}.tmp")
        with open(tmp, "wb") as fh:
            np.savez(fh, keys=keys, vectors=self._vectors[rows])
        os.replace(tmp, target)

    def fill(
        self,
        texts: Sequence[str],
        embed: Callable[[Sequence[str]], npt.NDArray[np.float32]],
        progress: Callable[[str], None] | None = None,
        chunk: int = 1024,
        save_every: int = 16,
    ) -> int:
        """Embed the ``texts`` not cached yet, in chunks, saving now and then; returns how many were embedded."""
        todo = self.missing(texts)
        started = time.perf_counter()
        for n, start in enumerate(range(0, len(todo), chunk), start=1):
            part = todo[start : start + chunk]
            self.add(part, embed(part))
            done = start + len(part)
            if progress is not None:
                rate = done / max(time.perf_counter() - started, 1e-9)
                left = (len(todo) - done) / rate if rate else 0.0
                progress(f"embedded {done:,} of {len(todo):,} new passages ({rate:,.0f}/s, about {left:,.0f} s left)")
            if n % save_every == 0:
                self.save()
        if todo:
            self.save()
        return len(todo)

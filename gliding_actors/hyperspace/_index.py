"""One vector space's index: annoy for the bulk, an exact buffer for the rest.

* **Truth.** Every live vector sits in one contiguous float32 matrix (a row per
  key, freed rows reused). The matrix is what rebuilds read and what exact
  scoring uses.
* **Bulk.** An annoy forest built from a snapshot of the matrix. Each built
  item remembers the *stamp* of the vector it was built from; every
  :meth:`VectorIndex.add` gives the key a new stamp. A built item counts only
  while its key is live with that same stamp, so a delete or a newer vector
  hides it at once (a tombstone, no rebuild needed).
* **Delta.** Keys whose current vector is not in the forest are scored
  exactly with numpy on every search, so a vector is searchable the moment it
  is added. A boolean per row marks them, so the delta is scored and
  filtered by group as arrays, and the caller's filter is asked about its
  best rows only: a large delta costs a matrix product, not a Python loop.
* **Rebuilds** are due when the delta reaches ``rebuild_after`` vectors or
  ``rebuild_growth`` times the forest's size, whichever is larger: forests
  of geometrically growing sizes, so filling an index of n vectors builds
  O(n) items in all, not O(n²/rebuild_after) (50 rebuilds of up to 50,000
  vectors for 50,000 lines at a fixed spacing of 1,000). Each is three
  steps so the slow one runs off the hot path:
  :meth:`begin_rebuild` (copy a snapshot, under the lock, fast),
  :func:`build_forest` (annoy's build on the copy: pure, on any thread; annoy
  releases the GIL while it builds) and :meth:`install` (swap the forest in,
  under the lock; what changed since the snapshot stays in the delta).
* **Selective filters** (an allow-list of at most ``exact_limit`` keys) are
  answered exactly over those rows: filtering after an approximate search
  loses recall exactly when the filter is narrow.
* **Exact when it is cheaper.** annoy examines ``search_k`` candidates one by
  one; numpy scores the whole matrix in one product, several times faster per
  row. When ``search_k`` reaches the number of vectors (a small index, or a
  search asking for hundreds of answers, as a context's recall does), the
  matrix is scored instead: faster, and exact.

Thread-safe: one lock guards the state; searches hold it while they score.
"""

from __future__ import annotations

import os
import tempfile
import threading
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgpack
import numpy as np
import numpy.typing as npt
from annoy import AnnoyIndex

from gliding_actors.errors import CorruptRecord, InvalidInput, show

__all__ = ["BuiltForest", "RebuildJob", "VectorIndex", "build_forest"]

Vector = npt.NDArray[np.float32]
_FORMAT = 1


@dataclass(frozen=True)
class RebuildJob:
    """A copy of the live vectors to build a forest from (taken by :meth:`VectorIndex.begin_rebuild`)."""

    dim: int
    keys: tuple[str, ...]
    stamps: npt.NDArray[np.int64]
    vectors: npt.NDArray[np.float32]
    n_trees: int
    seed: int


@dataclass
class BuiltForest:
    """An annoy forest over ``keys`` (item i is ``keys[i]`` at ``stamps[i]``)."""

    forest: Any
    keys: tuple[str, ...]
    stamps: npt.NDArray[np.int64]


def _best_rows(scores: npt.NDArray[np.float32], n: int) -> npt.NDArray[np.intp]:
    """The rows of the ``n`` highest ``scores``, best first, and every row tied with the ``n``-th.

    Rows are where vectors happened to be stored, which depends on the order
    they were added; a cut through a tie made by row would make the answer
    depend on that order (templated texts tie often). With the whole tie in
    hand, the caller breaks it by key.
    """
    if n >= len(scores):
        top = np.arange(len(scores))
    else:
        cut = np.partition(scores, len(scores) - n)[len(scores) - n]
        top = np.flatnonzero(scores >= cut)
    best_first: npt.NDArray[np.intp] = top[np.argsort(-scores[top], kind="stable")]
    return best_first


def build_forest(job: RebuildJob) -> BuiltForest:
    """Build the forest of a snapshot. Pure: touches nothing but the job."""
    forest = AnnoyIndex(job.dim, "angular")
    forest.set_seed(job.seed)
    for i in range(len(job.keys)):
        forest.add_item(i, job.vectors[i])
    forest.build(job.n_trees, n_jobs=1)
    return BuiltForest(forest, job.keys, job.stamps)


class VectorIndex:
    """Nearest neighbours by cosine among unit vectors of dimension ``dim``.

    ``n_trees``: trees of each forest; ``search_k_per_result``: annoy's
    ``search_k`` is this × ``n_trees`` × the number of results asked (annoy's
    own default is 1 ×); ``rebuild_after`` and ``rebuild_growth``: the delta
    makes :meth:`needs_rebuild` true from ``max(rebuild_after, rebuild_growth
    × vectors in the forest)`` vectors; ``exact_limit``: an allow-list this
    small is scored exactly.
    """

    def __init__(
        self,
        dim: int,
        *,
        n_trees: int = 16,
        search_k_per_result: int = 8,
        rebuild_after: int = 1000,
        rebuild_growth: float = 0.1,
        exact_limit: int = 20_000,
        seed: int = 0,
    ) -> None:
        if isinstance(dim, bool) or not isinstance(dim, int) or dim < 1:
            raise InvalidInput(f"a vector index needs a dimension >= 1, not {show(dim)}")
        self.dim = dim
        self.n_trees = n_trees
        self.search_k_per_result = search_k_per_result
        self.rebuild_after = rebuild_after
        self.rebuild_growth = rebuild_growth
        self.exact_limit = exact_limit
        self.seed = seed
        self._lock = threading.Lock()
        self._matrix: npt.NDArray[np.float32] = np.zeros((0, dim), dtype=np.float32)
        self._row: dict[str, int] = {}
        self._keys: list[str | None] = []  # row -> key (None: free)
        #: row -> its key's group (an id of ``_group_names``), -1 for a free row
        self._group: npt.NDArray[np.int32] = np.zeros(0, dtype=np.int32)
        self._group_ids: dict[str, int] = {}
        self._group_names: list[str] = []
        self._group_count: list[int] = []  # live keys per group id
        self._used = 0  # rows below this have held a vector at some time (the exact scan's extent)
        self._free: list[int] = []
        self._stamp: dict[str, int] = {}
        self._next_stamp = 1
        self._forest: BuiltForest | None = None
        self._built_stamp: dict[str, int] = {}
        self._delta: set[str] = set()
        #: row -> its key is in the delta (the delta as an array, for scoring it without a loop)
        self._in_delta: npt.NDArray[np.bool_] = np.zeros(0, dtype=np.bool_)
        #: forests installed so far, and searches answered by scoring every vector (for stats and tests)
        self.builds = 0
        self.scans = 0
        #: :meth:`load` read an index saved before keys had groups (every key is in ``""`` until regrouped)
        self.loaded_without_groups = False

    # -- writes ---------------------------------------------------------------------
    def _check(self, vector: npt.ArrayLike) -> Vector:
        vec = np.asarray(vector, dtype=np.float32).reshape(-1)
        if vec.shape[0] != self.dim:
            raise InvalidInput(f"a vector of this index has {self.dim} dimensions, not {vec.shape[0]}")
        norm = float(np.linalg.norm(vec))
        if not np.isfinite(norm) or norm <= 1e-12:
            raise InvalidInput("a zero or non-finite vector cannot be indexed")
        checked: Vector = vec / norm
        return checked

    def add(self, key: str, vector: npt.ArrayLike, group: str = "") -> None:
        """Index (or re-index) ``key`` in ``group``; searchable at once, through the delta.

        Groups partition the keys for :meth:`search`'s ``groups`` filter (the
        hyperspace engine's are named graphs, what roles are allowed to read).
        """
        vec = self._check(vector)
        with self._lock:
            row = self._row.get(key)
            if row is None:
                row = self._free.pop() if self._free else self._grow()
                self._row[key] = row
                self._keys[row] = key
                self._used = max(self._used, row + 1)
            self._set_group(row, group)
            self._matrix[row] = vec
            self._stamp[key] = self._next_stamp
            self._next_stamp += 1
            self._delta.add(key)
            self._in_delta[row] = True

    def _grow(self) -> int:
        rows = int(self._matrix.shape[0])
        bigger = np.zeros((max(64, rows * 2), self.dim), dtype=np.float32)
        bigger[:rows] = self._matrix
        self._matrix = bigger
        groups = np.full(bigger.shape[0], -1, dtype=np.int32)
        groups[:rows] = self._group
        self._group = groups
        in_delta = np.zeros(bigger.shape[0], dtype=np.bool_)
        in_delta[:rows] = self._in_delta
        self._in_delta = in_delta
        self._keys.extend([None] * (bigger.shape[0] - rows))
        self._free = list(range(bigger.shape[0] - 1, rows, -1))
        return rows

    def remove(self, key: str) -> bool:
        """Forget ``key`` now: its forest item is ignored from this moment (a tombstone)."""
        with self._lock:
            row = self._row.pop(key, None)
            if row is None:
                return False
            self._keys[row] = None
            self._group_count[int(self._group[row])] -= 1
            self._group[row] = -1
            self._free.append(row)
            self._stamp.pop(key, None)
            self._delta.discard(key)
            self._in_delta[row] = False
            return True

    def _set_group(self, row: int, group: str) -> None:
        gid = self._group_ids.get(group)
        if gid is None:
            gid = self._group_ids[group] = len(self._group_names)
            self._group_names.append(group)
            self._group_count.append(0)
        old = int(self._group[row])
        if old >= 0:
            self._group_count[old] -= 1
        self._group[row] = gid
        self._group_count[gid] += 1

    def regroup(self, key: str, group: str) -> bool:
        """Move ``key`` to ``group`` (its vector unchanged); False when the key is not here."""
        with self._lock:
            row = self._row.get(key)
            if row is None:
                return False
            self._set_group(row, group)
            return True

    def group_of(self, key: str) -> str | None:
        with self._lock:
            row = self._row.get(key)
            return None if row is None else self._group_names[int(self._group[row])]

    def __contains__(self, key: object) -> bool:
        return key in self._row

    def __len__(self) -> int:
        return len(self._row)

    def vector(self, key: str) -> Vector | None:
        with self._lock:
            row = self._row.get(key)
            return None if row is None else self._matrix[row].copy()

    # -- rebuilds --------------------------------------------------------------------
    def needs_rebuild(self) -> bool:
        built = 0 if self._forest is None else len(self._forest.keys)
        return len(self._delta) >= max(self.rebuild_after, self.rebuild_growth * built)

    def begin_rebuild(self) -> RebuildJob:
        with self._lock:
            keys = tuple(sorted(self._row))
            rows = np.array([self._row[k] for k in keys], dtype=np.int64)
            stamps = np.array([self._stamp[k] for k in keys], dtype=np.int64)
            vectors = self._matrix[rows] if len(rows) else np.zeros((0, self.dim), dtype=np.float32)
            return RebuildJob(self.dim, keys, stamps, vectors, self.n_trees, self.seed)

    def install(self, built: BuiltForest) -> None:
        """Swap ``built`` in; vectors added or changed since its snapshot stay in the delta."""
        with self._lock:
            self._forest = built
            self._built_stamp = dict(zip(built.keys, built.stamps.tolist(), strict=True))
            self._set_delta({k for k, s in self._stamp.items() if self._built_stamp.get(k) != s})
            self.builds += 1

    def _set_delta(self, delta: set[str]) -> None:
        """Make ``delta`` the delta, and its rows the marked ones (under the lock)."""
        self._delta = delta
        self._in_delta[:] = False
        self._in_delta[[self._row[key] for key in delta]] = True

    def rebuild(self) -> None:
        """All three steps on the calling thread (tests, the simulator, a reload)."""
        self.install(build_forest(self.begin_rebuild()))

    # -- search ----------------------------------------------------------------------
    def search(
        self,
        query: npt.ArrayLike,
        k: int,
        *,
        allow: Collection[str] | Callable[[str], bool] | None = None,
        groups: Collection[str] | None = None,
    ) -> list[tuple[str, float]]:
        """The ``k`` best ``(key, cosine)`` pairs, best first; ``allow`` filters keys, ``groups`` (None:
        all) keeps the keys added in those groups.

        An allow-list of at most ``exact_limit`` keys is scored exactly; a
        predicate (or a larger list) filters the forest's answers, asking the
        forest for more the narrower the filter turns out to be. ``groups``
        is applied to the whole matrix at once, and the forest is asked as
        much wider as the groups are smaller than the index. Whenever the
        forest would examine as many candidates as there are vectors (a small
        index, many answers asked, narrow groups), every row is scored
        exactly instead.
        """
        q = self._check(query)
        if k <= 0:
            return []
        with self._lock:
            ids = None if groups is None else {self._group_ids[g] for g in groups if g in self._group_ids}
            if isinstance(allow, Collection) and not isinstance(allow, str) and len(allow) <= self.exact_limit:
                rows = [self._row[key] for key in allow if key in self._row]
                if ids is not None:
                    rows = [row for row in rows if int(self._group[row]) in ids]
                return self._best_of(q, k, np.unique(np.asarray(rows, dtype=np.intp)), _always)
            ok: Callable[[str], bool]
            if allow is None:
                ok = _always
            elif callable(allow):
                ok = allow
            else:
                ok = set(allow).__contains__
            in_groups = len(self._row) if ids is None else sum(self._group_count[gid] for gid in ids)
            if not in_groups:
                return []
            want = -(-k * len(self._row) // in_groups)  # a forest answer is in the groups at this rate
            forest = self._forest
            if forest is None or not len(forest.keys) or self._scan_is_cheaper(want):
                return self._exact_passing(q, k, ok, ids)
            if ids is not None:
                groups_of, row_of, passes = self._group, self._row, ok

                def ok(key: str) -> bool:
                    return int(groups_of[row_of[key]]) in ids and passes(key)

            found: dict[str, float] = dict(self._best_passing(q, k, ok, ids, self._in_delta)) if self._delta else {}
            while True:
                got = self._from_forest(forest, q, want, ok)
                found.update(got)
                if len(got) >= k or want >= len(forest.keys):
                    break
                want *= 4  # the filter or tombstones ate the answers: ask wider
                if self._scan_is_cheaper(want):
                    return self._exact_passing(q, k, ok, ids)
            ranked = sorted(found.items(), key=lambda kv: (-kv[1], kv[0]))
            return ranked[:k]

    def _from_forest(self, forest: BuiltForest, q: Vector, n: int, ok: Callable[[str], bool]) -> dict[str, float]:
        ids = forest.forest.get_nns_by_vector(
            q, n, search_k=self.search_k_per_result * self.n_trees * n
        )
        stamp = self._stamp
        out: dict[str, float] = {}
        candidates = [(i, forest.keys[i]) for i in ids]
        live = [(i, key) for i, key in candidates if stamp.get(key) == int(forest.stamps[i]) and ok(key)]
        if live:
            rows = np.array([self._row[key] for _, key in live], dtype=np.int64)
            scores = self._matrix[rows] @ q  # exact cosines, not annoy's float32 distance
            for (_, key), score in zip(live, scores.tolist(), strict=True):
                out[key] = float(score)
        return out

    def _scan_is_cheaper(self, n: int) -> bool:
        """Would annoy, asked for ``n`` answers, examine at least as many candidates as there are vectors?

        Then one matrix product over every row is cheaper (numpy scores a row
        several times faster than annoy a candidate) and exact. Searches that
        ask for many answers (a context's recall) cross over first.
        """
        return self.search_k_per_result * self.n_trees * n >= len(self._row)

    def _exact_passing(
        self, q: Vector, k: int, ok: Callable[[str], bool], ids: set[int] | None = None
    ) -> list[tuple[str, float]]:
        """The ``k`` best live keys (of the groups ``ids``, None: all) ``ok`` accepts, scored exactly
        over the whole matrix."""
        if not self._used or not self._row:
            return []
        self.scans += 1
        return self._best_passing(q, k, ok, ids)

    def _best_passing(
        self,
        q: Vector,
        k: int,
        ok: Callable[[str], bool],
        ids: set[int] | None,
        marked: npt.NDArray[np.bool_] | None = None,
    ) -> list[tuple[str, float]]:
        """The ``k`` best live keys of the rows ``marked`` (None: all) in the groups ``ids`` (None: all)
        that ``ok`` accepts (see :meth:`_best_of`)."""
        used = self._used
        groups = self._group[:used]
        kept = groups >= 0 if ids is None else np.isin(groups, np.fromiter(ids, dtype=np.int32, count=len(ids)))
        if marked is not None:
            kept &= marked[:used]
        return self._best_of(q, k, np.flatnonzero(kept), ok)

    def _best_of(
        self, q: Vector, k: int, rows: npt.NDArray[np.intp], ok: Callable[[str], bool]
    ) -> list[tuple[str, float]]:
        """The ``k`` best keys of live ``rows`` (sorted, distinct) that ``ok`` accepts, scored exactly,
        ties by key; ``ok`` is asked about the best rows only, widening while it refuses them."""
        if not len(rows):
            return []
        used = self._used
        scores = self._matrix[rows] @ q if len(rows) < used else self._matrix[:used] @ q
        keys = self._keys
        want = k
        while True:
            out: list[tuple[str, float]] = []
            for i in _best_rows(scores, want).tolist():
                key = keys[int(rows[i])]
                if key is not None and ok(key):
                    out.append((key, float(scores[i])))
            if len(out) >= k or want >= len(rows):
                out.sort(key=lambda kv: (-kv[1], kv[0]))
                return out[:k]
            want *= 4

    # -- persistence ------------------------------------------------------------------
    def save(self, directory: str | os.PathLike[str]) -> None:
        """Write the vectors and the forest under ``directory`` (replaced atomically, file by file)."""
        where = Path(directory)
        where.mkdir(parents=True, exist_ok=True)
        with self._lock:
            keys = sorted(self._row)
            rows = np.array([self._row[k] for k in keys], dtype=np.int64)
            vectors = self._matrix[rows] if keys else np.zeros((0, self.dim), dtype=np.float32)
            meta = {
                "format": _FORMAT,
                "dim": self.dim,
                "keys": keys,
                "stamps": [self._stamp[k] for k in keys],
                "groups": [self._group_names[int(self._group[self._row[k]])] for k in keys],
                "next_stamp": self._next_stamp,
                "built": None,
            }
            forest = self._forest
            if forest is not None:
                meta["built"] = {"keys": list(forest.keys), "stamps": forest.stamps.tolist()}
                _atomic(where / "forest.ann", lambda tmp: forest.forest.save(tmp))
        def write_vectors(tmp: str) -> None:
            with open(tmp, "wb") as fh:
                np.save(fh, vectors)

        _atomic(where / "vectors.npy", write_vectors)
        _atomic(where / "index.msgpack", lambda tmp: Path(tmp).write_bytes(msgpack.packb(meta, use_bin_type=True)))

    def load(self, directory: str | os.PathLike[str]) -> bool:
        """Replace this index with what :meth:`save` wrote; False (unchanged) when nothing is there.

        An index saved before keys had groups loads with every key in group
        ``""``: the owner puts them in theirs (:meth:`regroup`)."""
        where = Path(directory)
        if not (where / "index.msgpack").is_file():
            return False
        try:
            meta = msgpack.unpackb((where / "index.msgpack").read_bytes(), raw=False)
            vectors = np.load(where / "vectors.npy")
            grouped = "groups" in meta
            groups = meta["groups"] if grouped else [""] * len(meta["keys"])
            if (
                meta["format"] != _FORMAT
                or meta["dim"] != self.dim
                or not len(meta["keys"]) == len(vectors) == len(groups)
                or not all(isinstance(g, str) for g in groups)
            ):
                raise ValueError("format, dimension or count does not match")
            forest = None
            if meta["built"] is not None:
                annoy = AnnoyIndex(self.dim, "angular")
                annoy.load(str(where / "forest.ann"))
                forest = BuiltForest(
                    annoy, tuple(meta["built"]["keys"]), np.asarray(meta["built"]["stamps"], dtype=np.int64)
                )
        except (OSError, ValueError, KeyError, TypeError, msgpack.UnpackException) as exc:
            raise CorruptRecord(f"the vector index at {where} does not load: {exc}") from None
        with self._lock:
            n = len(meta["keys"])
            self._matrix = np.zeros((max(64, n), self.dim), dtype=np.float32)
            self._matrix[:n] = vectors
            self._keys = [*meta["keys"], *([None] * (self._matrix.shape[0] - n))]
            self._row = {k: i for i, k in enumerate(meta["keys"])}
            self._group = np.full(self._matrix.shape[0], -1, dtype=np.int32)
            self._group_ids, self._group_names, self._group_count = {}, [], []
            for row, group in enumerate(groups):
                self._set_group(row, group)
            self._used = n
            self.loaded_without_groups = not grouped
            self._free = list(range(self._matrix.shape[0] - 1, n - 1, -1))
            self._stamp = dict(zip(meta["keys"], meta["stamps"], strict=True))
            self._next_stamp = int(meta["next_stamp"])
            self._forest = forest
            self._built_stamp = {} if forest is None else dict(zip(forest.keys, forest.stamps.tolist(), strict=True))
            self._in_delta = np.zeros(self._matrix.shape[0], dtype=np.bool_)
            self._set_delta({k for k, s in self._stamp.items() if self._built_stamp.get(k) != s})
        return True

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {
                "vectors": len(self._row),
                "delta": len(self._delta),
                "built": 0 if self._forest is None else len(self._forest.keys),
                "builds": self.builds,
                "scans": self.scans,
            }


def _always(_key: str) -> bool:
    return True


def _atomic(target: Path, write: Callable[[str], Any]) -> None:
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=target.name + ".")
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise

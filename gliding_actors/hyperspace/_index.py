"""One vector space's index: an HNSW graph (usearch) for the bulk, an exact delta for the rest.

* **Truth.** Every live vector sits in one contiguous float32 matrix (a row per
  key, freed rows reused). Exact scoring, and the rescoring of every graph
  candidate, read it; the graph only proposes candidates.
* **Bulk.** A usearch HNSW graph of int8-quantised vectors (a quarter of the
  float32 bytes; rescoring from the matrix gives the exact cosines back).
  Each vector enters the graph under a *label*: the stamp
  :meth:`VectorIndex.add` gave it, new on every add. A graph item counts only
  while its label is the key's current one, so a delete or a newer vector
  hides the old item at once (a tombstone); the next :meth:`index_delta`
  removes it from the graph.
* **Delta.** Keys whose current vector is not in the graph yet are scored
  exactly with numpy on every search, so a vector is searchable the moment
  it is added. A boolean per row marks them, so the delta is scored and
  filtered by group as arrays, and the caller's filter is asked about its
  best rows only.
* **Incremental, off the hot path.** :meth:`index_delta` moves the delta into
  the graph one vector at a time, oldest first: HNSW inserts in place, so
  filling an index of n vectors inserts each once (O(n) inserts in all, no
  rebuilds). The insert, the slow part (a fraction of a millisecond), runs
  outside the index's lock, under a lock of the graph's own held for one
  vector, so a search waits at most one insert. The service runs it on a
  worker thread, or inline on the simulator: in one thread, inserts in a
  given order build the same graph, so replays stay reproducible.
* **Selective filters** (an allow-list of at most ``exact_limit`` keys) are
  answered exactly over those rows: filtering after an approximate search
  loses recall exactly when the filter is narrow.
* **Exact when it is cheaper.** A graph search costs about its breadth
  (``expansion_search``, or the answers asked when more) times a few dozen
  distance evaluations; numpy scores the whole matrix in one product. When
  the index holds fewer than ``scan_factor`` × that breadth vectors (a small
  index, or a search asking for hundreds of answers, as a context's recall
  does), the matrix is scored instead: faster, and exact.

Thread-safe: one lock guards the keys and rows; searches hold it while they
score; the graph's lock is only ever taken inside it or alone, never around it.
"""

from __future__ import annotations

import os
import tempfile
import threading
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

import msgpack
import numpy as np
import numpy.typing as npt
from usearch.index import Index

from gliding_actors.errors import CorruptRecord, InvalidInput, show

__all__ = ["VectorIndex"]

Vector = npt.NDArray[np.float32]
#: 1: an annoy forest beside the vectors (loads with every vector in the delta); 2: the HNSW graph
_FORMAT = 2
_GRAPH_FILE = "graph.usearch"


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


class VectorIndex:
    """Nearest neighbours by cosine among unit vectors of dimension ``dim``.

    ``connectivity``, ``expansion_add``, ``expansion_search``: the HNSW
    graph's links per node and search breadths when inserting and searching;
    ``index_after``: :meth:`needs_indexing` is true from this many vectors in
    the delta (or tombstones in the graph); ``scan_factor``: score every row
    instead of searching the graph when the index holds at most this × the
    search's breadth; ``exact_limit``: an allow-list this small is scored exactly.
    """

    def __init__(
        self,
        dim: int,
        *,
        connectivity: int = 16,
        expansion_add: int = 128,
        expansion_search: int = 48,
        index_after: int = 64,
        scan_factor: int = 40,
        exact_limit: int = 20_000,
    ) -> None:
        if isinstance(dim, bool) or not isinstance(dim, int) or dim < 1:
            raise InvalidInput(f"a vector index needs a dimension >= 1, not {show(dim)}")
        self.dim = dim
        self.connectivity = connectivity
        self.expansion_add = expansion_add
        self.expansion_search = expansion_search
        self.index_after = index_after
        self.scan_factor = scan_factor
        self.exact_limit = exact_limit
        self._lock = threading.Lock()
        self._graph_lock = threading.Lock()
        self._graph = self._new_graph()
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
        #: graph labels that count (the key's current vector) -> key, and back
        self._label_key: dict[int, str] = {}
        self._key_label: dict[str, int] = {}
        #: labels in the graph that no longer count (replaced or removed): the next insert drops them
        self._stale: list[int] = []
        #: keys whose current vector is not in the graph, oldest first (a dict as an ordered set)
        self._delta: dict[str, None] = {}
        #: row -> its key is in the delta (the delta as an array, for scoring it without a loop)
        self._in_delta: npt.NDArray[np.bool_] = np.zeros(0, dtype=np.bool_)
        #: vectors inserted into the graph, and searches answered by scoring every vector (stats, tests)
        self.inserts = 0
        self.scans = 0
        #: :meth:`load` read an index saved before keys had groups (every key is in ``""`` until regrouped)
        self.loaded_without_groups = False

    def _new_graph(self) -> Index:
        return Index(
            ndim=self.dim,
            metric="cos",
            dtype="i8",
            connectivity=self.connectivity,
            expansion_add=self.expansion_add,
            expansion_search=self.expansion_search,
        )

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
            self._retire_label(key)
            self._stamp[key] = self._next_stamp
            self._next_stamp += 1
            self._delta.pop(key, None)
            self._delta[key] = None  # to the end: the newest vector waits longest
            self._in_delta[row] = True

    def _retire_label(self, key: str) -> None:
        """The key's graph item stops counting now, and leaves the graph at the next insert (under the lock)."""
        label = self._key_label.pop(key, None)
        if label is not None:
            del self._label_key[label]
            self._stale.append(label)

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
        """Forget ``key`` now: its graph item is ignored from this moment (a tombstone)."""
        with self._lock:
            row = self._row.pop(key, None)
            if row is None:
                return False
            self._keys[row] = None
            self._group_count[int(self._group[row])] -= 1
            self._group[row] = -1
            self._free.append(row)
            self._stamp.pop(key, None)
            self._retire_label(key)
            self._delta.pop(key, None)
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

    # -- the graph -------------------------------------------------------------------
    def needs_indexing(self) -> bool:
        """``index_after`` vectors wait in the delta, or as many tombstones in the graph."""
        return len(self._delta) >= self.index_after or len(self._stale) >= self.index_after

    def index_delta(self, limit: int | None = None) -> int:
        """Insert the delta into the graph, oldest first (at most ``limit`` vectors); how many went in.

        Any thread may call it, one at a time (the service's worker, or the
        engine's own turn). Each insert runs outside the index's lock; a
        vector replaced or removed meanwhile goes in anyway and is dropped
        from the graph at the next insert.
        """
        done = 0
        while limit is None or done < limit:
            with self._lock:
                if not self._delta:
                    break
                key = next(iter(self._delta))
                label = self._stamp[key]
                vector = self._matrix[self._row[key]].copy()
                stale, self._stale = self._stale, []
            with self._graph_lock:
                if stale:
                    self._graph.remove(stale)
                self._graph.add(label, vector, threads=1)
            with self._lock:
                self.inserts += 1
                if self._stamp.get(key) == label and key in self._delta:
                    del self._delta[key]
                    self._in_delta[self._row[key]] = False
                    self._label_key[label] = key
                    self._key_label[key] = label
                else:
                    self._stale.append(label)
            done += 1
        with self._lock:
            stale, self._stale = self._stale, []
        if stale:
            with self._graph_lock:
                self._graph.remove(stale)
        return done

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
        predicate (or a larger list) filters the graph's answers, asking the
        graph for more the narrower the filter turns out to be. ``groups`` is
        applied to the whole matrix at once, and the graph is asked as much
        wider as the groups are smaller than the index. Whenever the graph
        search would be as costly as scoring every row (a small index, many
        answers asked, narrow groups), every row is scored exactly instead.
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
            want = -(-k * len(self._row) // in_groups)  # a graph answer is in the groups at this rate
            if not self._label_key or self._scan_is_cheaper(want):
                return self._exact_passing(q, k, ok, ids)
            if ids is not None:
                groups_of, row_of, passes = self._group, self._row, ok

                def ok(key: str) -> bool:
                    return int(groups_of[row_of[key]]) in ids and passes(key)

            from_delta = self._best_passing(q, k, ok, ids, self._in_delta) if self._delta else []
            while True:
                candidates = self._from_graph(q, want)
                found = [*from_delta, *_first_passing(candidates, k, ok)]
                if len(found) - len(from_delta) >= k or want >= len(self._label_key):
                    break
                want *= 4  # the filter or tombstones ate the answers: ask wider
                if self._scan_is_cheaper(want):
                    return self._exact_passing(q, k, ok, ids)
            found.sort(key=lambda kv: (-kv[1], kv[0]))
            return found[:k]

    def _from_graph(self, q: Vector, n: int) -> list[tuple[str, float]]:
        """The graph's best live candidates (at least ``n``, as many as its search breadth), rescored
        exactly from the matrix, best first (ties by key).

        The graph ranks by int8 distances, which misorder near ties; it has
        visited its whole breadth anyway, so taking all of it and rescoring
        finds the true best among them (on real text, recall@10 at a
        breadth of 64 went from 0.951 to 0.987 for the same time)."""
        breadth = max(self.expansion_search, n)
        with self._graph_lock:
            self._graph.expansion_search = breadth  # type: ignore[misc]  # has a setter; the stub misses it
            labels = self._graph.search(q, breadth, threads=1).keys.tolist()
        live = [(label, key) for label in labels if (key := self._label_key.get(label)) is not None]
        if not live:
            return []
        rows = np.array([self._row[key] for _, key in live], dtype=np.int64)
        scores = (self._matrix[rows] @ q).tolist()  # exact cosines, not the graph's int8 distances
        ranked = [(key, float(score)) for (_, key), score in zip(live, scores, strict=True)]
        ranked.sort(key=lambda kv: (-kv[1], kv[0]))
        return ranked

    def _scan_is_cheaper(self, n: int) -> bool:
        """Would a graph search of breadth ``max(expansion_search, n)`` cost as much as scoring every row?

        numpy scores a row far faster than the graph visits a node, and the
        graph visits a few dozen nodes per unit of breadth; searches that ask
        for many answers (a context's recall) cross over first.
        """
        return self.scan_factor * max(self.expansion_search, n) >= len(self._row)

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
        """Write the vectors and the graph under ``directory`` (replaced atomically, file by file).

        The graph is written first, the metadata last; :meth:`load` copes
        with a crash between them."""
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
            }
            with self._graph_lock:
                _atomic(where / _GRAPH_FILE, lambda tmp: self._graph.save(tmp))

        def write_vectors(tmp: str) -> None:
            with open(tmp, "wb") as fh:
                np.save(fh, vectors)

        _atomic(where / "vectors.npy", write_vectors)
        _atomic(where / "index.msgpack", lambda tmp: Path(tmp).write_bytes(msgpack.packb(meta, use_bin_type=True)))
        (where / "forest.ann").unlink(missing_ok=True)  # what an index of format 1 kept beside its vectors

    def load(self, directory: str | os.PathLike[str]) -> bool:
        """Replace this index with what :meth:`save` wrote; False (unchanged) when nothing is there.

        The vectors and their keys are the truth; the graph only saves
        inserting them again. So a graph that is missing, damaged, or saved
        with an annoy forest instead (format 1) loads as an empty graph with
        every vector in the delta, and :meth:`index_delta` builds it again; a
        graph saved after the metadata (a crash between the two writes) holds
        labels the metadata does not name, which never count. An index saved
        before keys had groups loads with every key in group ``""``: the
        owner puts them in theirs (:meth:`regroup`)."""
        where = Path(directory)
        if not (where / "index.msgpack").is_file():
            return False
        try:
            meta = msgpack.unpackb((where / "index.msgpack").read_bytes(), raw=False)
            matrix, saved = _read_matrix(where / "vectors.npy", self.dim)
            grouped = "groups" in meta
            groups = meta["groups"] if grouped else [""] * len(meta["keys"])
            if (
                meta["format"] not in (1, _FORMAT)
                or meta["dim"] != self.dim
                or not len(meta["keys"]) == saved == len(groups)
                or not all(isinstance(g, str) for g in groups)
            ):
                raise ValueError("format, dimension or count does not match")
            stamps = {str(k): int(s) for k, s in zip(meta["keys"], meta["stamps"], strict=True)}
            next_stamp = int(meta["next_stamp"])
        except (OSError, ValueError, KeyError, TypeError, msgpack.UnpackException) as exc:
            raise CorruptRecord(f"the vector index at {where} does not load: {exc}") from None
        graph, labels = self._load_graph(where / _GRAPH_FILE)
        with self._lock, self._graph_lock:
            n = len(meta["keys"])
            self._graph = graph
            self._matrix = matrix
            self._keys = [*meta["keys"], *([None] * (self._matrix.shape[0] - n))]
            self._row = {k: i for i, k in enumerate(meta["keys"])}
            self._group = np.full(self._matrix.shape[0], -1, dtype=np.int32)
            # what _set_group does row by row, at once: ids numbered in order of first appearance
            self._group_names = list(dict.fromkeys(groups))
            self._group_ids = {name: gid for gid, name in enumerate(self._group_names)}
            ids = np.fromiter((self._group_ids[g] for g in groups), dtype=np.int32, count=n)
            self._group[:n] = ids
            self._group_count = np.bincount(ids, minlength=len(self._group_names)).tolist()
            self._used = n
            self.loaded_without_groups = not grouped
            self._free = list(range(self._matrix.shape[0] - 1, n - 1, -1))
            self._stamp = stamps
            self._next_stamp = max([next_stamp, *(label + 1 for label in labels)])  # never reuse a label
            self._key_label = {k: s for k, s in stamps.items() if s in labels}
            self._label_key = {s: k for k, s in self._key_label.items()}
            self._stale = sorted(labels - set(self._label_key))
            self._delta = {k: None for k in meta["keys"] if k not in self._key_label}
            self._in_delta = np.zeros(self._matrix.shape[0], dtype=np.bool_)
            self._in_delta[[self._row[k] for k in self._delta]] = True
        return True

    def _load_graph(self, path: Path) -> tuple[Index, set[int]]:
        """The graph saved at ``path`` and its labels; an empty graph when there is none that loads."""
        graph = self._new_graph()
        if not path.is_file():
            return graph, set()
        try:
            graph.load(str(path))
            if graph.ndim != self.dim:
                raise ValueError(f"{graph.ndim} dimensions")
            return graph, {int(label) for label in np.asarray(graph.keys).tolist()}
        except (OSError, ValueError, RuntimeError):
            return self._new_graph(), set()

    def stats(self) -> dict[str, int]:
        with self._lock, self._graph_lock:
            return {
                "vectors": len(self._row),
                "delta": len(self._delta),
                "in_graph": len(self._label_key),
                "tombstones": len(self._graph) - len(self._label_key),
                "inserts": self.inserts,
                "scans": self.scans,
            }


def _read_matrix(path: Path, dim: int) -> tuple[npt.NDArray[np.float32], int]:
    """The ``n`` vectors :meth:`VectorIndex.save` wrote, read straight into the first rows of a
    matrix with room for at least 64; and ``n``. One copy from the file, where ``np.load`` then a
    copy into a larger matrix made two (a 50,000-vector index reads 77 MB). Raises ValueError
    for a file that is not a C-ordered float32 array of ``dim`` columns, or is cut short."""
    with open(path, "rb") as fh:
        version = np.lib.format.read_magic(fh)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(fh)
        elif version == (2, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(fh)
        else:
            raise ValueError(f"a .npy file of format {version}")
        if len(shape) != 2 or shape[1] != dim or fortran or dtype != np.float32:
            raise ValueError(f"vectors of shape {shape} and type {dtype}, not float32 rows of {dim}")
        n = int(shape[0])
        matrix = np.zeros((max(64, n), dim), dtype=np.float32)
        want = n * dim * 4
        if want and fh.readinto(matrix[:n].data.cast("B")) != want:
            raise ValueError("the vectors file is cut short")
    return matrix, n


def _first_passing(ranked: list[tuple[str, float]], k: int, ok: Callable[[str], bool]) -> list[tuple[str, float]]:
    """The first ``k`` of ``ranked`` that ``ok`` accepts, asking it about no more than that."""
    out: list[tuple[str, float]] = []
    for item in ranked:
        if ok(item[0]):
            out.append(item)
            if len(out) == k:
                break
    return out


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

"""VectorIndex: delta, tombstones, rebuilds (also off-thread), filters, persistence; BM25's formula."""

from __future__ import annotations

import math
import threading
from pathlib import Path

import numpy as np
import pytest

from gliding_actors.errors import CorruptRecord, InvalidInput
from gliding_actors.hyperspace import BM25Index, VectorIndex, build_forest


def _data(n: int, dim: int = 32, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _exact(x: np.ndarray, q: np.ndarray, k: int) -> list[int]:
    return [int(i) for i in np.argsort(-(x @ q))[:k]]


def test_a_vector_is_found_the_moment_it_is_added() -> None:
    index = VectorIndex(32, rebuild_after=10_000)
    data = _data(50)
    for i, v in enumerate(data):
        index.add(f"k{i}", v)
    hits = index.search(data[7], 3)
    assert hits[0][0] == "k7" and abs(hits[0][1] - 1.0) < 1e-5
    assert index.stats() == {"vectors": 50, "delta": 50, "built": 0, "builds": 0, "scans": 1}


def test_rebuild_moves_the_delta_into_the_forest_and_search_agrees_with_exact() -> None:
    data = _data(400)
    index = VectorIndex(32, n_trees=16, search_k_per_result=2)  # asks for 320 < 400 candidates: the forest answers
    for i, v in enumerate(data):
        index.add(f"k{i:03d}", v)
    index.rebuild()
    assert index.stats()["delta"] == 0 and index.stats()["built"] == 400
    rng = np.random.default_rng(5)
    recall = 0.0
    for _ in range(20):
        q = rng.standard_normal(32).astype(np.float32)
        q /= np.linalg.norm(q)
        got = {int(k[1:]) for k, _ in index.search(q, 10)}
        recall += len(got & set(_exact(data, q, 10))) / 10
    assert recall / 20 >= 0.8 and index.stats()["scans"] == 0
    # scores are exact cosines, best first
    hits = index.search(data[3], 5)
    assert [s for _, s in hits] == sorted((s for _, s in hits), reverse=True)
    assert np.isclose(hits[1][1], float(data[int(hits[1][0][1:])] @ data[3]), atol=1e-5)


def test_deletes_and_replacements_are_honoured_before_any_rebuild() -> None:
    data = _data(100)
    index = VectorIndex(32, n_trees=2, search_k_per_result=1)  # the forest answers (tombstones and all)
    for i, v in enumerate(data):
        index.add(f"k{i}", v)
    index.rebuild()
    assert index.remove("k5") and not index.remove("k5")
    assert "k5" not in {k for k, _ in index.search(data[5], 10)}  # a tombstone hides the built item
    index.add("k6", data[9])  # k6 now points where k9 does
    hits = dict(index.search(data[9], 3))
    assert hits["k6"] == pytest.approx(1.0, abs=1e-5)
    assert index.search(data[6], 1)[0][0] != "k6" or hits  # the old k6 vector is gone
    assert index.stats()["delta"] == 1 and len(index) == 99 and index.stats()["scans"] == 0


def test_filters_narrow_answers_and_small_allow_lists_are_exact() -> None:
    data = _data(300)
    index = VectorIndex(32, n_trees=2, search_k_per_result=1, exact_limit=100)
    for i, v in enumerate(data):
        index.add(f"k{i}", v)
    index.rebuild()
    allow = {f"k{i}" for i in range(0, 300, 5)}  # 60 keys: exact
    q = data[42]
    want = [i for i in _exact(data, q, 300) if i % 5 == 0][:10]
    assert [int(k[1:]) for k, _ in index.search(q, 10, allow=allow)] == want
    # a predicate goes through the forest, which is asked wider until it has enough
    got = index.search(q, 10, allow=lambda key: int(key[1:]) % 7 == 0)
    assert len(got) == 10 and all(int(k[1:]) % 7 == 0 for k, _ in got)


def test_a_background_rebuild_keeps_what_changed_after_its_snapshot() -> None:
    data = _data(200)
    index = VectorIndex(32, n_trees=2, search_k_per_result=1)
    for i, v in enumerate(data[:150]):
        index.add(f"k{i}", v)
    job = index.begin_rebuild()
    built: list[object] = []
    worker = threading.Thread(target=lambda: built.append(build_forest(job)))
    worker.start()
    for i, v in enumerate(data[150:], start=150):  # writes while the forest builds
        index.add(f"k{i}", v)
    index.remove("k3")
    index.add("k4", data[199])
    worker.join()
    index.install(built[0])  # type: ignore[arg-type]
    stats = index.stats()
    assert stats["built"] == 150 and stats["delta"] == 51  # 50 new + k4's new vector
    assert index.search(data[170], 1)[0][0] == "k170"
    assert "k3" not in {k for k, _ in index.search(data[3], 5)}
    assert {k for k, _ in index.search(data[199], 2)} == {"k4", "k199"}


def test_save_and_load_round_trip(tmp_path: Path) -> None:
    data = _data(120)
    index = VectorIndex(32, n_trees=2, search_k_per_result=1)
    for i, v in enumerate(data[:100]):
        index.add(f"k{i}", v)
    index.rebuild()
    for i, v in enumerate(data[100:], start=100):
        index.add(f"k{i}", v)
    index.remove("k1")
    index.save(tmp_path / "ix")
    again = VectorIndex(32, n_trees=2, search_k_per_result=1)
    assert again.load(tmp_path / "ix")
    assert {k: v for k, v in again.stats().items() if k not in ("builds", "scans")} == {
        k: v for k, v in index.stats().items() if k not in ("builds", "scans")
    }
    for probe in (0, 50, 110):
        assert again.search(data[probe], 5) == index.search(data[probe], 5)
    assert "k1" not in again
    assert not VectorIndex(32).load(tmp_path / "absent")
    (tmp_path / "ix" / "vectors.npy").write_bytes(b"garbage")
    with pytest.raises(CorruptRecord):
        VectorIndex(32).load(tmp_path / "ix")


def test_a_search_the_forest_would_answer_by_examining_everything_scores_every_vector_exactly() -> None:
    data = _data(300)
    index = VectorIndex(32, n_trees=2, search_k_per_result=1)
    for i, v in enumerate(data):
        index.add(f"k{i}", v)
    index.rebuild()
    q = data[17]
    index.search(q, 10)  # 2 trees x 10 = 20 candidates: the forest
    assert index.stats()["scans"] == 0
    many = index.search(q, 150)  # 300 candidates, as many as there are vectors: one exact product instead
    assert index.stats()["scans"] == 1
    assert [int(k[1:]) for k, _ in many] == _exact(data, q, 150)
    # a predicate that refuses most of the forest's answers widens the ask into a scan, and stays exact
    odd = index.search(q, 10, allow=lambda key: int(key[1:]) % 10 == 3)
    assert [int(k[1:]) for k, _ in odd] == [i for i in _exact(data, q, 300) if i % 10 == 3][:10]
    assert index.stats()["scans"] == 2
    # removed vectors stay out of a scan, and a freed row reused by another key scores as that key
    index.remove("k17")
    index.add("new", data[17])
    top = index.search(q, 150)
    assert top[0][0] == "new" and "k17" not in dict(top)


def test_forests_are_rebuilt_at_geometrically_growing_sizes() -> None:
    """Filling an index builds O(n) items in all: at a fixed spacing every rebuild re-added every vector,
    50 forests of up to 50,000 vectors for 50,000 lines."""
    data = _data(1000, dim=8)
    index = VectorIndex(8, rebuild_after=10, rebuild_growth=0.5)
    sizes = []
    for i, v in enumerate(data):
        index.add(f"k{i}", v)
        if index.needs_rebuild():
            index.rebuild()
            sizes.append(i + 1)
    assert sizes[:5] == [10, 20, 30, 45, 68]  # from 20 vectors built, the delta waits for half of them
    assert len(sizes) == index.stats()["builds"] <= 12 and sum(sizes) <= 3 * len(data)
    assert index.stats()["delta"] == len(data) - sizes[-1]
    # a fixed spacing is still there for whoever wants it
    fixed = VectorIndex(8, rebuild_after=100, rebuild_growth=0.0)
    for i, v in enumerate(data[:450]):
        fixed.add(f"k{i}", v)
        if fixed.needs_rebuild():
            fixed.rebuild()
    assert fixed.stats()["builds"] == 4


def test_a_large_delta_is_scored_as_arrays_and_the_filter_asked_about_its_best_rows_only() -> None:
    """With geometric spacing the delta can hold a quarter of the index: a search must not ask the
    caller's filter (a Python call) about every vector in it."""
    data = _data(2000, dim=16, seed=4)
    index = VectorIndex(16, n_trees=2, search_k_per_result=1, rebuild_after=10_000)
    for i, v in enumerate(data[:500]):
        index.add(f"k{i}", v, group="a" if i % 2 else "b")
    index.rebuild()
    for i, v in enumerate(data[500:], start=500):
        index.add(f"k{i}", v, group="a" if i % 2 else "b")
    assert index.stats()["delta"] == 1500
    asked: list[str] = []

    def ok(key: str) -> bool:
        asked.append(key)
        return int(key[1:]) % 3 != 0

    q = data[1201]  # in the delta, group "a", passes
    hits = index.search(q, 5, allow=ok, groups=["a"])
    assert hits[0][0] == "k1201" and len(hits) == 5
    assert all(int(k[1:]) % 2 == 1 and int(k[1:]) % 3 != 0 for k, _ in hits)
    best = [i for i in _exact(data, q, 2000) if i % 2 == 1 and i % 3 != 0][:5]
    assert {f"k{i}" for i in best if i >= 500} <= {k for k, _ in hits}  # the delta is scored exactly
    assert len(asked) < 100  # was: every one of the 1,500 in the delta, then the forest's answers
    assert index.stats()["scans"] == 0  # the forest answered; the delta beside it


def test_a_tie_at_the_cut_is_broken_by_key_whatever_order_the_vectors_came_in() -> None:
    """Templated texts ("output of cycle 13", "... cycle 43") can embed to equally close vectors; which of
    them an exact search keeps must not depend on the rows they happened to get (on threads the index fills
    in another order than on the simulator, and a recorded context then failed to replay)."""
    rng = np.random.default_rng(3)
    q = rng.standard_normal(8).astype(np.float32)
    tied = [f"t{i:02d}" for i in range(12)]  # all at the same distance from the query
    others = {f"o{i}": rng.standard_normal(8).astype(np.float32) for i in range(20)}
    answers = []
    for order in (tied, tied[::-1], tied[5:] + tied[:5]):
        index = VectorIndex(8, rebuild_after=10_000)
        for key in order:
            index.add(key, q)
        for key, vector in others.items():
            index.add(key, -vector if float(vector @ q) > 0 else vector)  # below every tied one
        answers.append((index.search(q, 3), index.search(q, 3, allow=[*tied, *others])))
    assert [k for k, _ in answers[0][0]] == ["t00", "t01", "t02"]
    assert all(a == answers[0] for a in answers) and answers[0][0] == answers[0][1]


@pytest.mark.parametrize("n_trees", [2, 64])  # 2 trees: the forest answers; 64: every search is a scan
def test_groups_confine_a_search_and_the_filter_is_never_asked_about_other_groups(n_trees: int) -> None:
    data = _data(400)
    index = VectorIndex(32, n_trees=n_trees, search_k_per_result=1)
    for i, v in enumerate(data):
        index.add(f"k{i}", v, group="mine" if i % 4 == 0 else "theirs")
    index.rebuild()
    asked: list[str] = []

    def ok(key: str) -> bool:
        asked.append(key)
        return True

    q = data[1]  # a vector of "theirs": its neighbours are mostly theirs
    got = index.search(q, 10, allow=ok, groups={"mine"})
    want = [i for i in _exact(data, q, 400) if i % 4 == 0][:10]
    assert [int(k[1:]) for k, _ in got] == want or n_trees == 2  # the forest is approximate
    assert len(got) == 10 and all(int(k[1:]) % 4 == 0 for k, _ in got)
    assert asked and all(int(k[1:]) % 4 == 0 for k in asked)
    # a key moved to another group (its vector unchanged) is found there only
    assert index.regroup("k1", "mine") and not index.regroup("absent", "mine")
    assert index.search(q, 1, groups={"mine"})[0][0] == "k1" and index.group_of("k1") == "mine"
    assert "k1" not in dict(index.search(q, 10, groups={"theirs"}))
    assert index.search(q, 5, groups={"nobody"}) == [] and index.search(q, 5, groups=set()) == []
    assert index.search(q, 5, allow={"k1", "k2"}, groups={"theirs"}) == [("k2", pytest.approx(float(data[2] @ q)))]


def test_groups_survive_a_save_and_an_index_saved_without_them_says_so(tmp_path: Path) -> None:
    import msgpack

    data = _data(50)
    index = VectorIndex(32)
    for i, v in enumerate(data):
        index.add(f"k{i}", v, group=f"g{i % 2}")
    index.save(tmp_path / "ix")
    again = VectorIndex(32)
    assert again.load(tmp_path / "ix") and not again.loaded_without_groups
    loaded, kept = again.search(data[3], 50, groups={"g1"}), index.search(data[3], 50, groups={"g1"})
    assert [k for k, _ in loaded] == [k for k, _ in kept] and len(kept) == 25
    assert [s for _, s in loaded] == pytest.approx([s for _, s in kept], abs=1e-6)
    meta = msgpack.unpackb((tmp_path / "ix" / "index.msgpack").read_bytes(), raw=False)
    del meta["groups"]  # as an index saved before groups were kept
    (tmp_path / "ix" / "index.msgpack").write_bytes(msgpack.packb(meta, use_bin_type=True))
    old = VectorIndex(32)
    assert old.load(tmp_path / "ix") and old.loaded_without_groups and old.group_of("k3") == ""


def test_bad_vectors_are_refused_and_change_nothing() -> None:
    index = VectorIndex(4)
    index.add("a", [1, 0, 0, 0])
    for bad in ([0, 0, 0, 0], [1, 2, 3], [math.nan, 0, 0, 1]):
        with pytest.raises(InvalidInput):
            index.add("b", bad)
    assert len(index) == 1 and "b" not in index


def test_bm25_matches_the_textbook_formula_and_updates_in_place() -> None:
    bm = BM25Index(k1=1.2, b=0.75)
    docs = {"d1": "jwt token rotation", "d2": "token token cache", "d3": "lunch menu"}
    for d, text in docs.items():
        bm.add(d, text.split())
    n, avgdl = 3, 8 / 3  # 3 + 3 + 2 words

    def expected(doc: str, term: str) -> float:
        tokens = docs[doc].split()
        tf = tokens.count(term)
        df = sum(term in t.split() for t in docs.values())
        idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
        return idf * tf * 2.2 / (tf + 1.2 * (1 - 0.75 + 0.75 * len(tokens) / avgdl))

    scores = bm.scores(["token"])
    assert scores == pytest.approx({"d1": expected("d1", "token"), "d2": expected("d2", "token")})
    assert scores["d2"] > scores["d1"]
    bm.add("d2", ["lunch"])  # replaced: no longer about tokens
    assert set(bm.scores(["token"])) == {"d1"}
    assert bm.remove("d1") and not bm.remove("d1")
    assert bm.scores(["token"]) == {} and len(bm) == 2

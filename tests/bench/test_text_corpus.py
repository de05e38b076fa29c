"""The real-text corpus of ``bench hyperspace``: which paragraphs it takes, and a vector cache that only costs time."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from gliding_actors.bench._text_corpus import VectorCache, docstring_paragraphs, split_corpus
from gliding_actors.hyperspace._embedders import HashEmbedder

LONG = "This paragraph explains at some length what the function does for its callers."


def _tree(root: Path) -> Path:
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "a.py").write_text(
        f'"""Short title.\n\n{LONG}\n"""\n\n'
        "class C:\n"
        '    """Whitespace   inside\n    is collapsed into single spaces, over several lines of text."""\n',
        encoding="utf-8",
    )
    (root / "pkg" / "b.py").write_text(f'def f():\n    """{LONG}"""\n', encoding="utf-8")  # the same paragraph again
    (root / "pkg" / "broken.py").write_text('def (:\n    """Never read because the file does not parse at all."""\n')
    for skipped in ("tests", "__pycache__"):
        (root / "pkg" / skipped).mkdir()
        (root / "pkg" / skipped / "c.py").write_text('"""A test module docstring that is long enough to count."""\n')
    return root


def test_paragraphs_are_distinct_collapsed_long_enough_and_sorted(tmp_path: Path) -> None:
    found = docstring_paragraphs([_tree(tmp_path)])
    assert found == [LONG, "Whitespace inside is collapsed into single spaces, over several lines of text."]


def test_enough_stops_after_the_file_that_reaches_it_in_a_fixed_order(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    assert docstring_paragraphs([root], enough=1) == docstring_paragraphs([root], enough=2)  # a.py gives both
    (root / "pkg" / "z.py").write_text('"""Another paragraph that only the last file in the folder holds."""\n')
    assert len(docstring_paragraphs([root], enough=2)) == 2
    assert len(docstring_paragraphs([root])) == 3


def test_the_split_is_seeded_and_holds_the_queries_apart() -> None:
    paragraphs = [f"paragraph {i}" for i in range(100)]
    corpus, queries = split_corpus(paragraphs, 80, 10, seed=3)
    assert (corpus, queries) == split_corpus(paragraphs, 80, 10, seed=3)
    assert len(corpus) == 80 and len(queries) == 10 and not set(corpus) & set(queries)
    assert split_corpus(paragraphs, 80, 10, seed=4) != (corpus, queries)


class _Counting:
    def __init__(self) -> None:
        self.inner = HashEmbedder(64)
        self.embedded = 0

    def __call__(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.embedded += len(texts)
        return self.inner.embed(texts)


def test_a_second_run_embeds_nothing_it_has_seen(tmp_path: Path) -> None:
    texts = [f"text number {i}" for i in range(50)]
    embed = _Counting()
    reports: list[str] = []
    first = VectorCache(tmp_path, "hash")
    assert first.fill(texts, embed, progress=reports.append, chunk=16) == 50
    assert embed.embedded == 50 and len(reports) == 4 and "50 of 50" in reports[-1]
    again = VectorCache(tmp_path, "hash")  # from disk
    assert again.fill([*texts, "one more"], embed) == 1 and embed.embedded == 51
    assert np.array_equal(again.vectors_of(texts), embed.inner.embed(texts))
    other = VectorCache(tmp_path / "other", "another-model")
    assert other.missing(texts) == texts  # a vector is the embedder's: never shared by name


def test_a_damaged_cache_is_set_aside_with_a_warning_and_filled_again(tmp_path: Path) -> None:
    texts = [f"text number {i}" for i in range(10)]
    VectorCache(tmp_path, "hash").fill(texts, _Counting())
    (tmp_path / VectorCache.FILE).write_bytes(b"not numpy")
    with pytest.warns(UserWarning, match="does not load"):
        cache = VectorCache(tmp_path, "hash")
    assert len(cache) == 0
    assert cache.fill(texts, _Counting()) == 10
    assert len(VectorCache(tmp_path, "hash")) == 10


def test_vectors_and_texts_must_pair_up(tmp_path: Path) -> None:
    cache = VectorCache(tmp_path, "hash")
    with pytest.raises(ValueError, match="2 texts but 1 vectors"):
        cache.add(["a", "b"], np.zeros((1, 4), dtype=np.float32))
    assert len(cache) == 0
    with pytest.raises(KeyError):
        cache.vectors_of(["a"])


def test_a_key_ending_in_a_zero_byte_is_found_again_after_a_reload(tmp_path: Path) -> None:
    """One digest in 256 ends with a zero byte; numpy's byte strings would drop it on the way back."""
    probe = VectorCache(tmp_path, "hash")
    zeroed = next(t for t in (f"text {i}" for i in range(100_000)) if probe.key(t).endswith(b"\0"))
    texts = [zeroed, "another text", "a third text"]
    embed = _Counting()
    assert probe.fill(texts, embed) == 3
    again = VectorCache(tmp_path, "hash")
    assert again.missing(texts) == [] and again.fill(texts, embed) == 0 and embed.embedded == 3
    assert np.array_equal(again.vectors_of(texts), embed.inner.embed(texts))


def test_a_text_given_twice_is_cached_once(tmp_path: Path) -> None:
    cache = VectorCache(tmp_path, "hash")
    vectors = HashEmbedder(64).embed(["a", "b"])
    cache.add(["a", "a"], vectors)  # the second vector of "a" is not kept
    assert len(cache) == 1 and np.array_equal(cache.vectors_of(["a"]), vectors[:1])
    cache.save()
    reloaded = VectorCache(tmp_path, "hash")
    assert len(reloaded) == 1 and np.array_equal(reloaded.vectors_of(["a"]), vectors[:1])

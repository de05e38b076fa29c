"""The scheduler's plain logic: one budget, marginal relevance per token, dedup, never over."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from gliding_actors.context import Candidate, assemble
from gliding_actors.context._service import _archive_parts
from gliding_actors.l1._tokens import EstimateCounter

COUNT = EstimateCounter().count


def cand(
    iri: str,
    text: str,
    source: str = "l0",
    rank: int = 1,
    covers: frozenset[str] = frozenset(),
    *,
    group: str = "",
    episode: str | None = None,
    order: int = 0,
) -> Candidate:
    return Candidate(iri, text, source, {source: rank}, covers or frozenset({iri}), 0, (order,), group, episode)


def test_a_turn_told_by_a_chosen_summary_adds_nothing() -> None:
    summary = cand("s", "- Caroline went to a support group", rank=1, covers=frozenset({"s", "t"}))
    turn = cand("t", "- Caroline: I went to a LGBTQ support group yesterday and it was powerful", rank=2)
    other = cand("u", "- Melanie: painting relaxes me", rank=3)
    out = assemble([summary, turn, other], 1000, COUNT)
    assert [c.iri for c in out.chosen] == ["s", "u"]  # t is covered by s: zero marginal gain


def test_the_same_node_from_two_sources_is_one_item_with_both_ranks() -> None:
    chain = Candidate("memory:session-pa/block-1", "- planned the rollout", "l1", {"l1": 1})
    found = Candidate("memory:session-pa/block-1", "- [x] pa: planned the rollout", "l0", {"recall": 1})
    out = assemble([chain, found], 100, COUNT)
    assert len(out.chosen) == 1
    assert out.chosen[0].source == "l1"
    assert out.chosen[0].ranks["l1"] == 1 and out.chosen[0].ranks["recall"] == 1  # and its place by episode
    assert out.text == "## session\n- planned the rollout"


def test_higher_ranked_items_win_the_budget() -> None:
    items = [cand(f"n{i}", f"- item number {i} " + "word " * 10, rank=i) for i in range(1, 30)]
    out = assemble(items, 60, COUNT)
    assert out.tokens <= 60
    assert [c.iri for c in out.chosen] == ["n1", "n2", "n3"][: len(out.chosen)]
    assert out.sources["l0"]["items"] == len(out.chosen)


def test_an_item_larger_than_the_budget_is_skipped_for_smaller_ones() -> None:
    big = cand("big", "- " + "lorem ipsum " * 200, rank=1)
    small = cand("small", "- short", rank=2)
    out = assemble([big, small], 30, COUNT)
    assert [c.iri for c in out.chosen] == ["small"]


def test_nothing_fits_is_an_empty_context() -> None:
    out = assemble([cand("a", "- " + "x " * 100)], 3, COUNT)
    assert out.chosen == [] and out.text == "" and out.tokens == 0


def test_an_item_of_the_best_hits_episode_rises_above_better_hits_of_other_episodes() -> None:
    # the best hit and the 10th share a session; hits 2-9 are alone in theirs. Every line costs
    # the same, and the budget holds six: the 10th takes the place of the 6th.
    line = "- a line of the same length"
    items = [cand("a", line, rank=1, episode="s1")]
    items += [cand(f"b{r}", line, rank=r, episode=f"s{r}") for r in range(2, 10)]
    items.append(cand("c", line, rank=10, episode="s1"))
    six = COUNT("## archive") + 6 * (COUNT(line) + 1)
    out = assemble(items, six, COUNT)
    assert sorted(c.iri for c in out.chosen) == ["a", "b2", "b3", "b4", "b5", "c"]
    alone = assemble([cand(c.iri, c.text, rank=c.ranks["l0"]) for c in items], six, COUNT)
    assert sorted(c.iri for c in alone.chosen) == ["a", "b2", "b3", "b4", "b5", "b6"]  # no episodes: by rank


def test_a_summary_found_below_its_turn_takes_the_turns_place() -> None:
    turn = cand("t", "- Caroline: I went to a LGBTQ support group yesterday and it was so powerful, really", rank=1)
    filler = [cand(f"f{i}", f"- Melanie: filler line number {i}", rank=i) for i in range(2, 10)]
    summary = cand("s", "- Caroline went to a support group", rank=10, covers=frozenset({"s", "t"}))
    out = assemble([turn, *filler, summary], COUNT("## archive") + COUNT(turn.text) + COUNT(summary.text) + 2, COUNT)
    chosen = [c.iri for c in out.chosen]
    assert "s" in chosen and "t" not in chosen  # the turn is told by the summary: it adds nothing


def test_lines_of_one_group_share_one_heading() -> None:
    items = [
        cand("a", "- Caroline: first", rank=1, group="8 May, 2023", order=1),
        cand("b", "- Melanie: second", rank=2, group="9 June, 2023", order=5),
        cand("c", "- Melanie: third", rank=3, group="8 May, 2023", order=2),
    ]
    out = assemble(items, 1000, COUNT)
    assert out.text == (
        "## archive\n### 8 May, 2023\n- Caroline: first\n- Melanie: third\n### 9 June, 2023\n- Melanie: second"
    )
    assert out.tokens == COUNT(out.text)


texts = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=0, max_size=120)


@settings(max_examples=150)
@given(
    items=st.lists(
        st.tuples(
            st.sampled_from(["l1", "l3", "l2", "l0"]),
            texts,
            st.integers(1, 50),
            st.integers(0, 30),
            st.sampled_from(["", "8 May", "9 June, 2023", "x"]),
            st.sampled_from([None, "s1", "s2"]),
            st.integers(0, 5),
        ),
        max_size=40,
    ),
    budget=st.integers(1, 400),
)
def test_assemble_never_exceeds_the_budget(
    items: list[tuple[str, str, int, int, str, str | None, int]], budget: int
) -> None:
    pool = [
        Candidate(
            f"iri:{n % 25}",
            "- " + text,
            source,
            {source: rank},
            frozenset({f"iri:{n % 25}", f"iri:{cover}"}),
            0,
            (order,),
            group,
            episode,
        )
        for n, (source, text, rank, cover, group, episode, order) in enumerate(items)
    ]
    out = assemble(pool, budget, COUNT)
    assert out.tokens == (COUNT(out.text) if out.text else 0)
    assert out.tokens <= budget
    assert len({c.iri for c in out.chosen}) == len(out.chosen)


def test_an_archived_line_names_its_speaker_once_and_leaves_the_date_to_its_heading() -> None:
    summary = {"speaker": "Caroline", "summary": "Caroline went to a support group", "sessionDate": "8 May, 2023"}
    assert _archive_parts(summary) == ("- Caroline went to a support group", "8 May, 2023")
    turn = {"speaker": "Al", "content": "Alright,  see you\nsoon"}  # a name is a whole word
    assert _archive_parts(turn) == ("- Al: Alright, see you soon", "")

"""``gliding-actors bench context --data FILE``: the agent's context on real conversations (LoCoMo).

The data is not shipped (:data:`LOCOMO_SOURCE` says where to get it and why):
``--data`` is required, and without it the suite raises :class:`InvalidInput`
naming the source. For each conversation of a LoCoMo-format file
(docs/CONTEXT.md, "Evaluation on real conversations"):

1. a **fresh memory** (threads runtime, default config, a temporary directory);
2. every dialogue turn **archived to L0** as an L1 archive node of its
   speaker (``memory:session-<speaker>/block-<n>``) with its ``diaId``,
   speaker, session date and text (an image's caption appended, as the data
   gives it), and the speaker's L1 session it belongs to (``session``, as every
   block the L1 session actor writes names its own); LoCoMo's ``observation`` facts archived the same way as the
   **summaries** an agent would have written, each linking the turns it cites
   (``summarizes``);
3. for each question of categories 1–4, ``reader.context(query=question,
   max_tokens=B)`` for every budget B, timed; the question scores **any** if
   the context cites at least one evidence turn — directly, or through a
   summary in it that summarises that turn — and **all** if it cites every one;
4. two **baselines** in the same run, over the raw turns only, within the same
   budget, rendered and counted the same way: BM25 (the hyperspace engine's
   :class:`BM25Index`, the same tokenizer), and BM25 fused by reciprocal rank
   (``rrf_k`` = ``hyperspace.rrf_k``) with the cosine of the engine's default
   embedder; turns are taken in rank order while they fit.

Nothing about the answers or the evidence reaches retrieval: ingestion reads
a :class:`ConversationMemory` (turns and observations only — it has no field
for questions), and the only thing of a QA item retrieval sees is its question
text. ``tests/context/test_context_bench.py`` proves it by running the whole
evaluation twice on a conversation whose answers and evidence differ between
the runs and finding every retrieval input and every context identical.

Nothing was tuned on the data: the scheduler has no knob fitted to it (the
assembly rule and ``rrf_k`` come from the library's defaults; docs/CONTEXT.md).
"""

from __future__ import annotations

import json
import re
import statistics
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from gliding_actors.context._assemble import Candidate, group_heading, render, section_heading
from gliding_actors.context._service import _archive_parts, _order_of
from gliding_actors.errors import InvalidInput
from gliding_actors.hyperspace import BM25Index, EmbedderChain
from gliding_actors.hyperspace._text import node_text, words
from gliding_actors.l1._archive import SessionArchive
from gliding_actors.l1._tokens import TokenCounter

__all__ = [
    "BUDGETS",
    "LOCOMO_SOURCE",
    "ConversationMemory",
    "LocomoConversation",
    "Question",
    "evaluate",
    "ingest",
    "load_locomo",
    "normalise_evidence",
    "run",
]

#: the context budgets evaluated, in tokens (the targets are judged at 1,000)
BUDGETS: tuple[int, ...] = (500, 1000, 2000)
#: question categories scored (5, adversarial, has no evidence to find)
CATEGORIES: tuple[int, ...] = (1, 2, 3, 4)
#: where a user gets the data: the project does not ship it (the licence
#: allows evaluation, not redistribution with the project)
LOCOMO_SOURCE = (
    "LoCoMo is not shipped with gliding-actors (licence CC BY-NC 4.0, evaluation only): download data/locomo10.json"
    " from the public LoCoMo repository, https://github.com/snap-research/locomo (Maharana et al., ACL 2024,"
    " arXiv:2402.17753)"
)

_DIA = re.compile(r"^D(\d+):(\d+)$")


@dataclass(frozen=True)
class Turn:
    dia_id: str
    speaker: str
    session: int
    date: str
    text: str


@dataclass(frozen=True)
class Observation:
    fact: str
    speaker: str
    session: int
    date: str
    cites: tuple[str, ...]


@dataclass(frozen=True)
class ConversationMemory:
    """What a memory may be given of a conversation: turns and observations. No questions, no answers."""

    sample_id: str
    turns: tuple[Turn, ...]
    observations: tuple[Observation, ...]


@dataclass(frozen=True)
class Question:
    question: str
    category: int
    evidence: tuple[str, ...]
    answer: str


@dataclass(frozen=True)
class LocomoConversation:
    memory: ConversationMemory
    questions: tuple[Question, ...]


def normalise_evidence(raw: object) -> list[str]:
    """Evidence ids as ``D<session>:<turn>``: ``"D8:6; D9:17"`` splits, ``"D:11:26"`` and ``"D30:05"`` mend."""
    items: list[str] = []
    for part in (raw if isinstance(raw, list) else [raw]):
        if not isinstance(part, str):
            continue
        for piece in re.split(r"[;,\s]+", part.strip()):
            if not piece:
                continue
            piece = piece.replace("D:", "D")
            match = _DIA.match(piece)
            if match:
                items.append(f"D{int(match.group(1))}:{int(match.group(2))}")
    return list(dict.fromkeys(items))


def _session_numbers(conversation: Mapping[str, Any]) -> list[int]:
    found = []
    for key, value in conversation.items():
        match = re.fullmatch(r"session_(\d+)", key)
        if match and isinstance(value, list):
            found.append(int(match.group(1)))
    return sorted(found)


def locomo_for(suite: str, data: str | None) -> tuple[Path, list[LocomoConversation]]:
    """The LoCoMo file ``bench <suite> --data FILE`` names, read; :class:`InvalidInput` saying where to
    get LoCoMo when no file is named or there is none at the path."""
    if data is None:
        raise InvalidInput(f"bench {suite} needs LoCoMo data: --data FILE (e.g. --data locomo10.json). {LOCOMO_SOURCE}.")
    path = Path(data)
    if not path.is_file():
        raise InvalidInput(f"bench {suite} needs LoCoMo data: no file at {path}. {LOCOMO_SOURCE}.")
    return path, load_locomo(path)


def load_locomo(path: str | Path) -> list[LocomoConversation]:
    """Read a LoCoMo-format file (a list of conversations); :class:`InvalidInput` naming what is wrong."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InvalidInput(f"cannot read LoCoMo data {path}: {exc}") from exc
    if not isinstance(data, list):
        raise InvalidInput(f"{path}: a LoCoMo file is a list of conversations")
    out = []
    for i, item in enumerate(data):
        if not isinstance(item, Mapping) or not isinstance(item.get("conversation"), Mapping):
            raise InvalidInput(f"{path}: conversation {i} has no 'conversation' object")
        conv = item["conversation"]
        turns: list[Turn] = []
        dates: dict[int, str] = {}
        for n in _session_numbers(conv):
            date = str(conv.get(f"session_{n}_date_time") or "")
            dates[n] = date
            for raw in conv[f"session_{n}"]:
                text = str(raw.get("text") or "")
                if raw.get("blip_caption"):
                    text += f" [shares a photo: {raw['blip_caption']}]"
                dia = normalise_evidence(raw.get("dia_id"))
                if not dia:
                    continue
                turns.append(Turn(dia[0], str(raw.get("speaker") or ""), n, date, text))
        observations: list[Observation] = []
        for key, per_speaker in (item.get("observation") or {}).items():
            match = re.fullmatch(r"session_(\d+)_observation", key)
            if not match or not isinstance(per_speaker, Mapping):
                continue
            n = int(match.group(1))
            for speaker, facts in per_speaker.items():
                for fact in facts or []:
                    if isinstance(fact, list) and len(fact) >= 2 and isinstance(fact[0], str):
                        cites = tuple(normalise_evidence(fact[1]))
                        observations.append(Observation(fact[0], str(speaker), n, dates.get(n, ""), cites))
        questions = []
        for qa in item.get("qa") or []:
            evidence = tuple(normalise_evidence(qa.get("evidence") or []))
            category = qa.get("category")
            if not evidence or category not in CATEGORIES:
                continue
            questions.append(Question(str(qa["question"]), int(category), evidence, str(qa.get("answer", ""))))
        memory = ConversationMemory(str(item.get("sample_id") or f"conv-{i}"), tuple(turns), tuple(observations))
        out.append(LocomoConversation(memory, tuple(questions)))
    return out


@dataclass
class Ingested:
    """Where each turn and summary went, for scoring (never shown to retrieval)."""

    turn_iri: dict[str, str] = field(default_factory=dict)
    #: IRI -> the dia_ids it tells (a turn: its own; a summary: those it cites)
    tells: dict[str, frozenset[str]] = field(default_factory=dict)
    #: the raw turns' archive nodes, in conversation order (the baselines' corpus)
    turn_nodes: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    #: every node written, in order (what retrieval was given)
    written: list[tuple[str, dict[str, Any]]] = field(default_factory=list)


def ingest(system: Any, memory: ConversationMemory) -> Ingested:
    """Archive the turns and the observations of ``memory`` into ``system``'s L0 (see the module docstring)."""
    out = Ingested()
    archives: dict[str, SessionArchive] = {}

    def archive(speaker: str) -> SessionArchive:
        if speaker not in archives:
            archives[speaker] = SessionArchive(system.l0, speaker)
        return archives[speaker]

    position: dict[str, int] = {}
    for i, turn in enumerate(memory.turns):
        node = {
            "agent": turn.speaker,
            "speaker": turn.speaker,
            "role": "user",
            "diaId": turn.dia_id,
            "session": archive(turn.speaker).session_iri(turn.session),
            "sessionDate": turn.date,
            "content": turn.text,
            "createdAt": float(i),
        }
        iri = archive(turn.speaker).write_block(node)
        out.turn_iri[turn.dia_id] = iri
        out.tells[iri] = frozenset({turn.dia_id})
        out.turn_nodes.append((iri, {"@type": "SessionTurn", **node}))
        out.written.append((iri, {"@type": "SessionTurn", **node}))
        position[turn.dia_id] = i
    for obs in memory.observations:
        cited = [d for d in obs.cites if d in out.turn_iri]
        at = max((position[d] for d in cited), default=len(memory.turns)) + 0.5
        node = {
            "agent": obs.speaker,
            "speaker": obs.speaker,
            "role": "summary",
            "summary": obs.fact,
            "summarizes": [{"@id": out.turn_iri[d]} for d in cited],
            "session": archive(obs.speaker).session_iri(obs.session),
            "sessionDate": obs.date,
            "createdAt": float(at),
        }
        iri = archive(obs.speaker).write_block(node)
        out.tells[iri] = frozenset(cited)
        out.written.append((iri, {"@type": "SessionTurn", **node}))
    return out


def _pack(
    order: Iterable[str], items: Mapping[str, Candidate], budget: int, count: Callable[[str], int]
) -> tuple[list[str], int]:
    """Take ``order``'s items while they fit (an item that does not fit is skipped, as the scheduler does).

    Rendered as the scheduler renders the archive (``render``: the section's
    heading, each session's date once over its turns), and paid for the same
    way: an item's own count, plus a heading's when it is the first under it.
    The text is counted at the end and the last items dropped while it is over
    (a join may count more than its parts), so a baseline is held to exactly
    the scheduler's bound.
    """
    chosen: list[Candidate] = []
    opened: set[str] = set()
    spent = 0
    for iri in order:
        item = items[iri]
        cost = item.tokens + 1  # the newline before it
        if not chosen:
            cost += count(section_heading(item.source))
        if item.group and item.group not in opened:
            cost += count(group_heading(item.group)) + 1
        if spent + cost <= budget:
            chosen.append(item)
            opened.add(item.group)
            spent += cost
    tokens = count(render(chosen)) if chosen else 0
    while chosen and tokens > budget:
        chosen.pop()
        tokens = count(render(chosen)) if chosen else 0
    return [c.iri for c in chosen], tokens


class Baselines:
    """BM25 and BM25 + dense (RRF) over one conversation's raw turns."""

    def __init__(
        self,
        turn_nodes: Sequence[tuple[str, dict[str, Any]]],
        chain: EmbedderChain,
        rrf_k: int,
        count: Callable[[str], int],
    ) -> None:
        self.iris = [iri for iri, _ in turn_nodes]
        self.items: dict[str, Candidate] = {}
        for iri, node in turn_nodes:
            line, when = _archive_parts(node)
            tokens = max(1, count(line))
            self.items[iri] = Candidate(iri, line, "l0", tokens=tokens, order=_order_of(node, iri), group=when)
        texts = [node_text(node) for _, node in turn_nodes]
        self.bm25 = BM25Index()
        for iri, text in zip(self.iris, texts, strict=True):
            self.bm25.add(iri, words(text))
        self.chain = chain
        self.space, self.vectors = chain.embed(texts)
        self.rrf_k = rrf_k

    def bm25_order(self, query: str) -> list[str]:
        scores = self.bm25.scores(words(query))
        return [iri for iri, _ in sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))]

    def dense_order(self, query: str) -> list[str]:
        _space, q = self.chain.embed([query])
        sims = self.vectors @ q[0]
        idx = np.argsort(-sims, kind="stable")
        return [self.iris[int(i)] for i in idx]

    def fusion_order(self, query: str) -> list[str]:
        fused: dict[str, float] = {}
        for order in (self.bm25_order(query), self.dense_order(query)):
            for rank, iri in enumerate(order, start=1):
                fused[iri] = fused.get(iri, 0.0) + 1.0 / (self.rrf_k + rank)
        return [iri for iri, _ in sorted(fused.items(), key=lambda kv: (-kv[1], kv[0]))]


#: How long the warm-up search (indexing a whole conversation) may take.
WARM_UP_TIMEOUT_S = 900.0


def _score(iris: Iterable[str], tells: Mapping[str, frozenset[str]], evidence: Sequence[str]) -> tuple[bool, bool]:
    told: set[str] = set()
    for iri in iris:
        told |= tells.get(iri, frozenset())
    hit = [e in told for e in evidence]
    return any(hit), all(hit)


def evaluate(
    conversations: Sequence[LocomoConversation],
    budgets: Sequence[int] = BUDGETS,
    *,
    max_questions: int | None = None,
    trace: Callable[[str, Any], None] | None = None,
    progress: Callable[[int], None] | None = None,
    embedder: str | None = None,
) -> dict[str, Any]:
    """Run the evaluation; ``trace(kind, payload)`` sees every retrieval input and output (for the leak test).

    ``embedder`` replaces the library's default text embedder (``onnx``) for
    the memory *and* the fusion baseline alike, so both use the same vectors.
    """
    from gliding_actors.system import MemorySystem

    config: dict[str, Any] = {} if embedder is None else {"hyperspace": {"embedder": embedder, "fallback": []}}

    rows: list[dict[str, Any]] = []
    history_tokens: list[int] = []
    counter_name = embedder_name = ""
    for conv in conversations:
        with MemorySystem.open(runtime="threads", config=config) as memory:
            counter: TokenCounter = memory.context.counter
            counter_name = counter.name
            ingested = ingest(memory, conv.memory)
            if trace is not None:
                for iri, node in ingested.written:
                    trace("node", (iri, node))
            reader = memory.agent("reader", "PA")
            chain = memory.hyperspace.engine.chain
            baselines = Baselines(ingested.turn_nodes, chain, memory.config.hyperspace.rrf_k, counter.count)
            embedder_name = baselines.space
            history_tokens.append(counter.count(render(list(baselines.items.values()))))
            # Indexes every archive once, vectors included, outside the timings; a
            # model embedder may need minutes for a whole conversation, hence the long wait.
            memory.hyperspace.wait_indexed(WARM_UP_TIMEOUT_S)
            questions = conv.questions if max_questions is None else conv.questions[:max_questions]
            for q in questions:
                row: dict[str, Any] = {"conversation": conv.memory.sample_id, "category": q.category, "budgets": {}}
                if trace is not None:
                    trace("query", q.question)
                bm25 = baselines.bm25_order(q.question)
                fusion = baselines.fusion_order(q.question)
                for budget in budgets:
                    start = time.perf_counter()
                    result = reader.context(q.question, budget)
                    elapsed = time.perf_counter() - start
                    if trace is not None:
                        trace("context", (budget, result["iris"], result["text"]))
                    any_, all_ = _score(result["iris"], ingested.tells, q.evidence)
                    b_iris, b_tokens = _pack(bm25, baselines.items, budget, counter.count)
                    f_iris, f_tokens = _pack(fusion, baselines.items, budget, counter.count)
                    row["budgets"][budget] = {
                        "any": any_,
                        "all": all_,
                        "tokens": result["tokens"],
                        "ms": elapsed * 1000.0,
                        "bm25": _score(b_iris, ingested.tells, q.evidence),
                        "fusion": _score(f_iris, ingested.tells, q.evidence),
                        "baseline_tokens": (b_tokens, f_tokens),
                        "sources": {s: v["tokens"] for s, v in result["sources"].items()},
                    }
                rows.append(row)
                if progress is not None:
                    progress(1)
    return _report(rows, budgets, history_tokens, counter_name, embedder_name)


def _frac(flags: Iterable[bool]) -> float:
    items = list(flags)
    return round(sum(items) / len(items), 4) if items else 0.0


def _report(
    rows: list[dict[str, Any]], budgets: Sequence[int], history: list[int], counter: str, embedder: str
) -> dict[str, Any]:
    full_mean = statistics.fmean(history) if history else 0.0
    report: dict[str, Any] = {
        "questions": len(rows),
        "conversations": len(history),
        "embedder": embedder,
        "counter": counter,
        "full_history_tokens_mean": round(full_mean, 1),
        "budgets": {},
    }
    all_ms: list[float] = []
    for budget in budgets:
        per = [r["budgets"][budget] for r in rows]
        ms = sorted(p["ms"] for p in per)
        all_ms += ms
        tokens_mean = statistics.fmean(p["tokens"] for p in per) if per else 0.0
        by_category = {}
        for cat in CATEGORIES:
            sel = [r["budgets"][budget] for r in rows if r["category"] == cat]
            if sel:
                by_category[str(cat)] = {
                    "n": len(sel),
                    "any": _frac(p["any"] for p in sel),
                    "all": _frac(p["all"] for p in sel),
                    "bm25_any": _frac(p["bm25"][0] for p in sel),
                    "fusion_any": _frac(p["fusion"][0] for p in sel),
                }
        entry: dict[str, Any] = {
            "any": _frac(p["any"] for p in per),
            "all": _frac(p["all"] for p in per),
            "by_category": by_category,
            "baselines": {
                "bm25": {
                    "any": _frac(p["bm25"][0] for p in per),
                    "all": _frac(p["bm25"][1] for p in per),
                    "tokens_mean": round(statistics.fmean(p["baseline_tokens"][0] for p in per), 1) if per else 0.0,
                },
                "fusion": {
                    "any": _frac(p["fusion"][0] for p in per),
                    "all": _frac(p["fusion"][1] for p in per),
                    "tokens_mean": round(statistics.fmean(p["baseline_tokens"][1] for p in per), 1) if per else 0.0,
                },
            },
            "tokens_mean": round(tokens_mean, 1),
            "full_history_tokens_mean": round(full_mean, 1),
            "share_of_history": round(tokens_mean / full_mean, 4) if full_mean else 0.0,
            "sources_tokens_mean": {
                s: round(statistics.fmean(p["sources"][s] for p in per), 1) for s in (per[0]["sources"] if per else {})
            },
            "latency_p50_ms": round(_pct(ms, 50), 2),
            "latency_p95_ms": round(_pct(ms, 95), 2),
        }
        best_any = max(entry["baselines"]["bm25"]["any"], entry["baselines"]["fusion"]["any"])
        best_all = max(entry["baselines"]["bm25"]["all"], entry["baselines"]["fusion"]["all"])
        entry["margin_any"] = round(entry["any"] - best_any, 4)
        entry["margin_all"] = round(entry["all"] - best_all, 4)
        report["budgets"][str(budget)] = entry
    all_ms.sort()
    report["latency_p50_ms"] = round(_pct(all_ms, 50), 2)
    report["latency_p95_ms"] = round(_pct(all_ms, 95), 2)
    at = report["budgets"].get("1000")
    if at is not None:
        report["targets_at_1000"] = {
            "any_ge_0.90": at["any"] >= 0.90,
            "all_ge_0.78": at["all"] >= 0.78,
            "any_5pts_over_best_baseline": at["margin_any"] >= 0.05,
            "all_5pts_over_best_baseline": at["margin_all"] >= 0.05,
            "p50_le_50ms": at["latency_p50_ms"] <= 50.0,
        }
    at500 = report["budgets"].get("500")
    if at500 is not None:
        report["targets_at_500"] = {"any_ge_0.85": at500["any"] >= 0.85}
    return report


def _pct(sorted_ms: Sequence[float], q: float) -> float:
    if not sorted_ms:
        return 0.0
    index = min(len(sorted_ms) - 1, max(0, int(round(q / 100.0 * (len(sorted_ms) - 1)))))
    return float(sorted_ms[index])


def run(quick: bool = False, data: str | None = None, embedder: str | None = None) -> dict[str, Any]:
    """The suite: ``data`` a LoCoMo-format file (required; :data:`LOCOMO_SOURCE`); ``quick``: one conversation,
    40 questions; ``embedder``: the text embedder of the memory and of the fusion baseline (default: the library's).

    Without ``data``, or with a path that is not a file, :class:`InvalidInput` says where to get LoCoMo.
    """
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    path, conversations = locomo_for("context", data)
    max_q = None
    if quick:
        conversations, max_q = conversations[:1], 40
    total = sum(len(c.questions) if max_q is None else min(max_q, len(c.questions)) for c in conversations)
    console = Console(stderr=True)
    with Progress(
        TextColumn("context"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console, transient=True
    ) as bar:
        task = bar.add_task("questions", total=total)
        report = evaluate(
            conversations, max_questions=max_q, progress=lambda n: bar.advance(task, n), embedder=embedder
        )
    report["data"] = str(path)
    return report

"""``bench scale``: how search, context, reopen and resident memory grow with the memory.

A memory for an agent team grows for as long as the team works, so what
matters is the ratio between a small and a large memory measured the same
way in the same run, not either figure alone. Each measurement runs in a
fresh process (``spawn``), so resident memory is the memory's own and one
size's caches do not warm the next.

* **Lines** (``lines.<n>``): one writer (role PA) writes ``n`` lines into its
  ``plan`` graph through ``Agent.write``; the values are LoCoMo turns (a turn's
  text, joined with a second turn's once every turn has been used, so no two
  lines say the same thing). Then the index settles (``wait_indexed``) and a
  reader in role DA runs each question of the file's first ``questions`` as
  ``search(k=10)`` and ``context(max_tokens=1000)``: ``search_p50_ms``,
  ``context_p50_ms`` (medians of one timed call per question, each question
  asked once untimed before, so its embedding is made: that costs the same at
  any size, and is left out of every figure alike). ``rss_kb_per_line``:
  resident memory after the fill minus before it (the memory open, its
  embedder loaded), per line;
  ``rss_kb_per_line_after_queries``: the same once the questions ran, which
  adds the pages of the saved graph and keyword files that the searches
  mapped in (file-backed: the system can take them back under pressure).
  ``reopen_s``: the memory closed (flushed), then ``MemorySystem.open`` and
  the first search, wall time.
* **Turns** (``turns.<n>``): one agent archives ``n`` conversation turns
  through ``Agent.turn``; ``first_context_s`` is the first ``context`` after
  them, then ``context_p50_ms`` and ``search_p50_ms`` over the questions.
* **First search after writes** (``first_search_after_1k_writes_s``): a new
  memory, 1,000 lines written, the first search timed at once (no settling):
  no search may wait on an embedding backlog.

Sizes: lines 1,000 and 50,000, turns 100 and 10,000 (``--quick``: 200 and
2,000, 50 and 500). The embedder is the library's default unless
``--embedder`` names another.
"""

from __future__ import annotations

import functools
import multiprocessing
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any

from gliding_actors.bench._context import locomo_for
from gliding_actors.bench._progress import say
from gliding_actors.errors import InvalidInput

__all__ = ["run"]

#: (lines small, lines large, turns small, turns large) — full / quick
SIZES = {False: (1_000, 50_000, 100, 10_000), True: (200, 2_000, 50, 500)}
QUESTIONS = 50
#: the fewest questions a file must hold to measure with
MIN_QUESTIONS = 5
WRITES_BEFORE_FIRST_SEARCH = 1_000


def _rss_kb() -> int:
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS in /proc/self/status")  # pragma: no cover - Linux only


def line_texts(turns: Sequence[str], n: int) -> list[str]:
    """``n`` texts from ``turns``: each turn once, then pairs of turns, so no two lines repeat."""
    count = len(turns)
    out = list(turns[:n])
    step = 1
    while len(out) < n:
        for i in range(count):
            if len(out) == n:
                break
            out.append(f"{turns[i]} {turns[(i + step) % count]}")
        step += 1
    return out


#: how long an index may take to settle: a model embedder on a small machine makes ~100 vectors a second
SETTLE_S_PER_DOCUMENT = 0.05
SETTLE_S_MIN = 120.0
#: how often a long settle says how far it is
PROGRESS_EVERY_S = 30.0


def _settle(memory: Any, what: str, documents: int) -> None:
    """Wait until the search index holds all ``documents`` with their vectors, saying every half minute
    how many lines still wait to be indexed and how many texts wait for their vectors."""
    import threading

    service = memory.hyperspace
    done = threading.Event()

    def report() -> None:
        while not done.wait(PROGRESS_EVERY_S):
            stats = service.stats()
            _say(f"{what}: {stats['embeddings_queued']:,} texts queued for embedding, "
                 f"{stats['pending']:,} lines waiting to be indexed, "
                 f"{stats['waiting_for_vectors']:,} indexed lines waiting for their vectors")

    reporter = threading.Thread(target=report, name="bench-scale-progress", daemon=True)
    reporter.start()
    try:
        service.wait_indexed(timeout=SETTLE_S_MIN + SETTLE_S_PER_DOCUMENT * documents)
    finally:
        done.set()
        reporter.join(timeout=5.0)


def _p50_ms(call: Callable[[str], Any], questions: Sequence[str]) -> float:
    """The median of one timed ``call`` per question, each question asked once untimed first.

    The untimed round makes every question's embedding (a model embedder takes
    milliseconds a text, the same at any size of memory), so every figure and
    ratio is the search's own cost, which is what may grow with the memory,
    whichever of search and context asks a question first."""
    for q in questions:
        call(q)
    times = []
    for q in questions:
        t0 = time.perf_counter()
        call(q)
        times.append((time.perf_counter() - t0) * 1000)
    return round(statistics.median(times), 3)


def _config(embedder: str | None) -> dict[str, Any]:
    return {} if embedder is None else {"hyperspace": {"embedder": embedder, "fallback": []}}


_say = functools.partial(say, "scale")


def measure_lines(texts: list[str], questions: list[str], embedder: str | None) -> dict[str, Any]:
    """One size of the lines measurement (in its own process: see the module docstring)."""
    from gliding_actors import MemorySystem

    n = len(texts)
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
        memory = MemorySystem.open(tmp, runtime="threads", config=_config(embedder))
        try:
            pa, da = memory.agent("pa", "PA"), memory.agent("da", "DA")
            pa.write("note:warm-up", {"text": "warm up the embedder"}, graph="plan")
            da.search("warm up", k=1)
            before = _rss_kb()
            t0 = time.perf_counter()
            every = max(1, n // 10)
            for i, text in enumerate(texts):
                pa.write(f"note:{i}", {"text": text}, graph="plan")
                if (i + 1) % every == 0:
                    _say(f"{n:,} lines: {i + 1:,} written")
            fill_s = time.perf_counter() - t0
            _settle(memory, f"{n:,} lines", n)
            settle_s = time.perf_counter() - t0 - fill_s
            rss = _rss_kb() - before
            search = _p50_ms(lambda q: da.search(q, k=10), questions)
            context = _p50_ms(lambda q: da.context(q, max_tokens=1000), questions)
            rss_queried = _rss_kb() - before
        finally:
            memory.close()
        t0 = time.perf_counter()
        with MemorySystem.open(tmp, runtime="threads", config=_config(embedder)) as again:
            opened = time.perf_counter() - t0
            again.agent("da", "DA").search(questions[0], k=10)
            reopen = time.perf_counter() - t0
    return {
        "lines": n,
        "fill_s": round(fill_s, 2),
        "settle_s": round(settle_s, 2),
        "search_p50_ms": search,
        "context_p50_ms": context,
        "rss_kb_per_line": round(rss / n, 2),
        "rss_kb_per_line_after_queries": round(rss_queried / n, 2),
        "open_s": round(opened, 3),
        "reopen_s": round(reopen, 3),
    }


def measure_turns(texts: list[str], questions: list[str], embedder: str | None) -> dict[str, Any]:
    """One size of the session measurement (its own process)."""
    from gliding_actors import MemorySystem

    n = len(texts)
    with (
        tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp,
        MemorySystem.open(tmp, runtime="threads", config=_config(embedder)) as memory,
    ):
        pa = memory.agent("pa", "PA")
        every = max(1, n // 10)
        for i, text in enumerate(texts):
            pa.turn(text[:200], content=text, role="user")
            if (i + 1) % every == 0:
                _say(f"{n:,} turns: {i + 1:,} archived")
        t0 = time.perf_counter()
        pa.context(questions[0], max_tokens=1000)
        first = time.perf_counter() - t0
        _settle(memory, f"{n:,} turns", n)
        context = _p50_ms(lambda q: pa.context(q, max_tokens=1000), questions)
        search = _p50_ms(lambda q: pa.search(q, k=10), questions)
    return {"turns": n, "first_context_s": round(first, 3), "context_p50_ms": context, "search_p50_ms": search}


def measure_first_search(texts: list[str], question: str, embedder: str | None) -> dict[str, Any]:
    """Write ``texts`` to a new memory and time the first search at once (its own process)."""
    from gliding_actors import MemorySystem

    with (
        tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp,
        MemorySystem.open(tmp, runtime="threads", config=_config(embedder)) as memory,
    ):
        pa = memory.agent("pa", "PA")
        for i, text in enumerate(texts):
            pa.write(f"note:{i}", {"text": text}, graph="plan")
        t0 = time.perf_counter()
        pa.search(question, k=10)
        return {"writes": len(texts), "first_search_s": round(time.perf_counter() - t0, 3)}


def _size_name(n: int) -> str:
    """``50000`` → ``50k`` (the target keys' spelling); sizes that are not whole thousands as they are."""
    return f"{n // 1000}k" if n >= 1000 and n % 1000 == 0 else str(n)


def _in_fresh_process(fn: Callable[..., dict[str, Any]], *args: Any) -> dict[str, Any]:
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(1) as pool:
        result: dict[str, Any] = pool.apply(fn, args)
        return result


def run(quick: bool = False, data: str | None = None, embedder: str | None = None) -> dict[str, Any]:
    """The suite (module docstring). ``data``: a LoCoMo-format file (required)."""
    path, conversations = locomo_for("scale", data)
    turns = [t.text for c in conversations for t in c.memory.turns if t.text.strip()]
    questions = [q.question for c in conversations for q in c.questions][:QUESTIONS]
    if len(turns) < 2 or len(questions) < MIN_QUESTIONS:
        raise InvalidInput(f"{path} holds too few turns or questions to measure with")
    small, large, few_turns, many_turns = SIZES[quick]
    report: dict[str, Any] = {"suite": "scale", "data": str(path), "embedder": embedder or "default"}
    lines: dict[str, Any] = {}
    for n in (small, large):
        _say(f"{n:,} lines")
        lines[str(n)] = _in_fresh_process(measure_lines, line_texts(turns, n), questions, embedder)
    sessions: dict[str, Any] = {}
    for n in (few_turns, many_turns):
        _say(f"{n:,} turns")
        sessions[str(n)] = _in_fresh_process(measure_turns, line_texts(turns, n), questions, embedder)
    _say(f"first search after {WRITES_BEFORE_FIRST_SEARCH:,} writes")
    first = _in_fresh_process(
        measure_first_search, line_texts(turns, WRITES_BEFORE_FIRST_SEARCH), questions[0], embedder
    )
    lo, hi = lines[str(small)], lines[str(large)]
    t_lo, t_hi = sessions[str(few_turns)], sessions[str(many_turns)]
    big, small_name, many = _size_name(large), _size_name(small), _size_name(many_turns)
    report.update(
        {
            "lines": lines,
            "turns": sessions,
            "first_search": first,
            f"search_p50_ratio_{big}_vs_{small_name}": round(hi["search_p50_ms"] / lo["search_p50_ms"], 2),
            f"context_p50_ratio_{big}_vs_{small_name}": round(hi["context_p50_ms"] / lo["context_p50_ms"], 2),
            f"context_p50_ratio_{many}_turns_vs_{few_turns}": round(
                t_hi["context_p50_ms"] / t_lo["context_p50_ms"], 2
            ),
            f"reopen_s_{big}": hi["reopen_s"],
            f"reopen_ratio_{big}_vs_{small_name}": round(hi["reopen_s"] / lo["reopen_s"], 2),
            f"rss_kb_per_line_{big}": hi["rss_kb_per_line"],
            f"rss_kb_per_line_after_queries_{big}": hi["rss_kb_per_line_after_queries"],
            "first_search_after_1k_writes_s": first["first_search_s"],
        }
    )
    return report

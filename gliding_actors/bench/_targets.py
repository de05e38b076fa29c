"""Every benchmark target, declared once, and the figures docs/BENCHMARKS.md shows.

Why here and not in the suites' JSON: a suite prints what it measured, and
some print a ``targets`` field, but a target is the project's promise, not the
benchmark's opinion of itself. Declaring each one here, with the comparison it
asks for, means the renderer judges every figure by the same rule, a suite
cannot move its own goalposts, and a target whose figure is missing from a run
shows as "not measured" rather than vanishing.

``TARGETS[entry][key]`` is the target of the figure at ``key`` (a dotted path
into the entry's ``result``; ``a|b`` tries ``a`` then ``b``, for figures whose
key depends on the run's size). ``FIGURES[entry]`` lists the table rows, in
order: a row shows its value, the baseline measured beside it in the same run,
the ratio, and the target of its ratio key or, failing that, of its value key.
A test checks every target has a row.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["FIGURES", "SECTIONS", "TARGETS", "Figure", "Section", "Target"]

Op = Literal[">=", "<=", "=="]


@dataclass(frozen=True)
class Target:
    """``value op threshold`` (or ``value op <figure at ref>``), with the condition it holds under."""

    op: Op
    threshold: float | bool | None
    ref: str | None = None  # compare against another figure of the same result (ours vs gensim)
    note: str = ""  # the target's condition, when the bare comparison does not say it all

    def text(self) -> str:
        sign = {">=": "≥", "<=": "≤", "==": "="}[self.op]
        against = f"`{self.ref}` (same run)" if self.ref is not None else _plain(self.threshold)
        return f"{sign} {against}" + (f" ({self.note})" if self.note else "")


def _plain(value: float | bool | None) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return f"{value:,}"
    return f"{value}"  # a float as the target is written: 1.0, 0.95


@dataclass(frozen=True)
class Figure:
    """One row of a suite's table; ``unit`` and ``baseline_unit`` follow the numbers."""

    key: str
    label: str
    unit: str = ""
    baseline: str | None = None
    baseline_label: str = ""
    baseline_unit: str | None = None  # None: the value's unit
    ratio: str | None = None  # a ratio the suite computed; else value / baseline when both are numbers
    ratio_unit: str = ""
    show_ratio: bool = True  # False where value / baseline means nothing (a percentage beside a published one)


@dataclass(frozen=True)
class Section:
    """A suite's heading: its title and the command that reruns it."""

    title: str
    command: str


SECTIONS: dict[str, Section] = {
    "runtime": Section("runtime", "gliding-actors bench runtime --json"),
    "l0": Section("l0", "gliding-actors bench l0 --json"),
    "l1": Section("l1", "gliding-actors bench l1 --json"),
    "l2": Section("l2", "gliding-actors bench l2 --json"),
    "l3": Section("l3", "gliding-actors bench l3 --json"),
    "coherence": Section("coherence", "gliding-actors bench coherence --json"),
    "hyperspace": Section("hyperspace", "gliding-actors bench hyperspace --json"),
    # LoCoMo is not shipped (docs/CONTEXT.md says where to get it); the notes
    # say how locomo-dev.json is cut from the public locomo10.json
    "context": Section("context", "gliding-actors bench context --data locomo-dev.json --json"),
    "context-hash": Section(
        "context, with the fallback hash embedder",
        "gliding-actors bench context --data locomo-dev.json --embedder hash --json",
    ),
    "reliability": Section("reliability", "gliding-actors bench reliability --quick --json"),
    "tokens": Section("tokens saved by coherence", "gliding-actors bench tokens --json"),
    "team": Section("team workload", "gliding-actors bench team --json"),
    "agents": Section("a write beside idle agents", "gliding-actors bench agents --json"),
    "replay": Section("replay", "gliding-actors bench replay --json"),
    "scaling": Section("scaling (Ray)", "gliding-actors bench scaling --json"),
}

_PYKKA = "raw Pykka ask"

#: bench tokens' sequences compared on this project and agent-coherence (``workloads.<name>``)
_TOKEN_WORKLOADS: tuple[tuple[str, str], ...] = (
    ("ac_planning", "agent-coherence's planning graph (4 agents, 12 : 1)"),
    ("ac_code_review", "agent-coherence's code-review graph (4 agents, 15 : 4)"),
    ("ac_high_churn", "agent-coherence's high-churn graph (5 agents, 8 : 5)"),
    ("planning", "planning"),
    ("reviewing", "reviewing"),
    ("high_churn", "high churn"),
)

_CONTEXT_ACCURACY: dict[str, Target] = {
    "budgets.1000.any": Target(">=", 0.90, note="B = 1,000, categories 1–4"),
    "budgets.1000.all": Target(">=", 0.78, note="B = 1,000, categories 1–4"),
    "budgets.500.any": Target(">=", 0.85, note="B = 500, categories 1–4"),
    "budgets.1000.margin_any": Target(">=", 0.05, note="5 points over the better baseline"),
    "budgets.1000.margin_all": Target(">=", 0.05, note="5 points over the better baseline"),
}

#: the context suite's rows, with the default embedder and with onnx alike
_CONTEXT_FIGURES: tuple[Figure, ...] = (
    Figure("budgets.1000.any", "any evidence turn cited, B = 1,000", "", "budgets.1000.baselines.bm25.any",
           "BM25 over raw turns"),
    Figure("budgets.1000.all", "all evidence turns cited, B = 1,000", "", "budgets.1000.baselines.bm25.all",
           "BM25 over raw turns"),
    Figure("budgets.500.any", "any evidence turn cited, B = 500", "", "budgets.500.baselines.bm25.any",
           "BM25 over raw turns"),
    Figure("budgets.1000.margin_any", "any: margin over the better baseline"),
    Figure("budgets.1000.margin_all", "all: margin over the better baseline"),
    Figure("budgets.1000.latency_p50_ms", "context p50, B = 1,000", "ms"),
)

TARGETS: dict[str, dict[str, Target]] = {
    "runtime": {
        "ask_rtt_ratio": Target("<=", 1.3),
        "sim_msgs_per_s": Target(">=", 100_000),
    },
    "l0": {
        "put_ratio": Target(">=", 0.6, note="two tags per node"),
        "bulk_put_ratio": Target(">=", 0.3),
        "get_ratio": Target(">=", 0.7),
        "prefix_scan_ratio": Target(">=", 0.7),
    },
    "l1": {
        "savings": Target(">=", 0.9, note="2,000 turns, 2,000-token budget"),
    },
    "l2": {},  # figures without a target: what a coherent query costs over a raw one
    "l3": {
        "hit_vs_cold": Target(">=", 50),
        "invalidate_flatness": Target("<=", 1.5),
        "pool_speedup": Target(">=", 1.4, note="on 2 cores"),
    },
    "coherence": {
        "hit_ratio": Target("<=", 3),
        "miss_rtts": Target("<=", 4),
        "write_shared4_rtts": Target("<=", 6),
        "msgs_per_write.1.messages": Target("<=", 4, note="2k+2, k = 1"),
        "msgs_per_write.4.messages": Target("<=", 10, note="2k+2, k = 4"),
        "msgs_per_write.16.messages": Target("<=", 34, note="2k+2, k = 16"),
        "throughput_vs_lock": Target(">=", 1.0),
    },
    "hyperspace": {
        "real.recall_at_10": Target(">=", 0.95, note="embeddings of real text"),
        "real.qps_vs_exact": Target(">=", 10),
        "real.corpus_size": Target(">=", 50_000),
        "filtered_recall_at_10": Target(">=", 0.95),
        "poincare_map": Target(">=", None, ref="gensim_map"),
    },
    "context": {
        **_CONTEXT_ACCURACY,
        "budgets.1000.latency_p50_ms": Target("<=", 50, note="default embedder"),
    },
    # the fallback embedder is measured for comparison: the targets are the default's
    "context-hash": {},
    "reliability": {
        "kills": Target(">=", 100, note="SIGKILL at ≥ 100 random points"),
        "lost_writes": Target("==", 0),
        "reused_versions": Target("==", 0, note="no (line, version) acknowledged with two values"),
        "invariant_violations": Target("==", 0),
        "hung_ops": Target("==", 0, note="every op completes or fails with a typed error"),
        "untyped_errors": Target("==", 0),
        "changed_on_refusal": Target("==", 0, note="a refused input changes nothing"),
        "linearizable": Target("==", True),
        "total_s": Target("<=", 300, note="--quick runs in under 5 minutes"),
    },
    "tokens": {},  # ours beside agent-coherence's published figures: a comparison, not a target
    "team": {},  # a curve over team sizes, no target
    "agents": {
        "write_p50_ratio_1000_vs_1": Target("<=", 1.5, note="1,000 agents, all but the writer idle"),
    },
    "replay": {
        "sim.events_per_s": Target(">=", 20_000, note="10,000-event recorded trace on sim"),
    },
    "scaling": {},  # a curve over shard counts and its 100-node projection, no target
}

FIGURES: dict[str, tuple[Figure, ...]] = {
    "runtime": (
        Figure("ask_rtt_p50_us", "ask round trip p50 (threads runtime, echo actor)", "µs",
               "pykka_ask_rtt_p50_us", _PYKKA + " to an echo actor", ratio="ask_rtt_ratio"),
        Figure("sim_msgs_per_s", "simulator throughput (ping-pong + fan-out, log hash on)", "msgs/s"),
    ),
    "l0": (
        Figure("put_nodes_per_s", "put", "nodes/s", "raw_put_nodes_per_s", "raw plyvel write_batch + msgpack",
               ratio="put_ratio"),
        Figure("get_nodes_per_s", "get (counting the access)", "nodes/s", "raw_get_nodes_per_s",
               "raw get + unpack", ratio="get_ratio"),
        Figure("get_untouched_nodes_per_s", "get without counting", "nodes/s", ratio="get_untouched_ratio"),
        Figure("prefix_scan_nodes_per_s", "prefix scan", "nodes/s", "raw_prefix_scan_nodes_per_s",
               "raw prefix iteration + unpack", ratio="prefix_scan_ratio"),
        Figure("bulk_put_nodes_per_s", "bulk put (one batch per block)", "nodes/s", "raw_bulk_put_nodes_per_s",
               "raw bulk write_batch", ratio="bulk_put_ratio"),
        Figure("tag_query_nodes_per_s", "tag query", "nodes/s"),
        Figure("put_floor_ratio", "put floor: LevelDB alone, L0's batches, ratio to raw"),
        Figure("bulk_put_floor_ratio", "bulk put floor: LevelDB alone, ratio to raw"),
        Figure("get_floor_ratio", "get floor: LevelDB alone (record, access key, write-down), ratio to raw"),
        Figure("prefix_scan_floor_ratio", "prefix scan floor: LevelDB alone (records, access keys), ratio to raw"),
    ),
    "l1": (
        Figure("savings", "savings = 1 − tokens_in_chain / tokens_full_history"),
        Figure("tokens_in_chain", "tokens in the chain after the last turn", "tokens",
               "tokens_full_history", "the full history (thought + content of every turn)"),
        Figure("add_turn_p50_us", "add_turn p50 (count, L0 archive write, append, evict)", "µs"),
        Figure("add_turn_p99_us", "add_turn p99", "µs"),
        Figure("agent_turn_p50_us", "Agent.turn p50 (threads runtime)", "µs"),
        Figure("reload_p50_us", "reload of an evicted turn p50 (one L0 read)", "µs"),
        Figure("chains_agree", "both chains ended identical"),
        Figure("reloads_ok", "every sampled evicted turn came back in full"),
    ),
    "l2": (
        Figure("coherent_query_p50_us_0_dirty", "coherent query, 0 dirty lines", "µs",
               "raw_oxigraph_query_p50_us", "raw pyoxigraph, same text, same store",
               ratio="coherent_query_overhead_ratio"),
        Figure("coherent_query_p50_us_100_dirty", "coherent query, 100 dirty lines held by 4 other agents", "µs",
               "raw_oxigraph_query_p50_us", "raw pyoxigraph", ratio="coherent_query_100_dirty_ratio"),
        Figure("raw_oxigraph_confined_query_p50_us", "raw query confined to the role's graphs (dataset arguments)",
               "µs", "raw_oxigraph_query_p50_us", "raw pyoxigraph", ratio="confinement_ratio"),
        Figure("recall_p50_us_0_dirty", "bare recall, nothing dirty", "µs"),
        Figure("recall_us_per_dirty_line", "recall cost per dirty line ((100-dirty − 0-dirty) / 100)", "µs"),
        Figure("write_p50_us", "write of a new node (write-back, GetM miss)", "µs", "pykka_ask_p50_us", _PYKKA,
               ratio="write_rtts", ratio_unit="RTTs"),
        Figure("write_held_m_p50_us", "rewrite of a line held in M", "µs"),
        Figure("recalled_lines_min_100_dirty", "fewest lines recalled by one 100-dirty query (must be 100)"),
        Figure("dirty_lines_max_0_dirty", "most lines in M before a 0-dirty round (must be 0)"),
        Figure("coherent_results_ok", "every query returned every row, newest revisions"),
    ),
    "l3": (
        Figure("cold_p50_ms", "cold projection p50 (ca_review, cache emptied)", "ms"),
        Figure("cached_p50_us", "cached projection p50 (view hit, no message)", "µs", "cold_p50_ms", "cold p50",
               baseline_unit="ms", ratio="hit_vs_cold", ratio_unit="× faster"),
        Figure("invalidate_us_100000|invalidate_us_10000", "one line.changed applied, 100,000 views reading the node "
               "(10,000 with --quick)", "µs", "invalidate_us_100", "the same with 100 views",
               ratio="invalidate_flatness"),
        Figure("pool_throughput_2_per_s", "throughput, query-heavy frame, 2 workers", "projections/s",
               "pool_throughput_1_per_s", "1 worker", ratio="pool_speedup"),
    ),
    "coherence": (
        Figure("hit_p50_us", "read hit p50", "µs", "locked_dict_p50_us", "dict lookup under a threading.Lock",
               ratio="hit_ratio"),
        Figure("miss_p50_us", "read miss p50", "µs", "pykka_ask_p50_us", _PYKKA, ratio="miss_rtts",
               ratio_unit="RTTs"),
        Figure("write_shared4_p50_us", "write to a line shared by 4", "µs", "pykka_ask_p50_us", _PYKKA,
               ratio="write_shared4_rtts", ratio_unit="RTTs"),
        Figure("msgs_per_write.1.messages", "messages per write, 1 sharer", "msgs"),
        Figure("msgs_per_write.4.messages", "messages per write, 4 sharers", "msgs"),
        Figure("msgs_per_write.16.messages", "messages per write, 16 sharers", "msgs"),
        Figure("throughput_ops_per_s", "16 threads, 90 % reads / 10 % writes, 1,000 IRIs", "ops/s",
               "lock_baseline_ops_per_s", "dict + pyoxigraph behind one lock", ratio="throughput_vs_lock"),
    ),
    "hyperspace": (
        Figure("real.corpus_size", "real corpus: docstring passages embedded by the default model", "passages"),
        Figure("real.recall_at_10", "real corpus: recall@10 (int8 HNSW + exact rescoring, default settings)"),
        Figure("real.index_ms", "real corpus: query latency, index", "ms", "real.exact_ms", "numpy brute force",
               ratio="real.qps_vs_exact", ratio_unit="× the exact qps"),
        Figure("real.peers.hnswlib.qps_at_recall", "hnswlib at the same recall", "qps", "real.qps",
               "this project's index"),
        Figure("real.peers.usearch.qps_at_recall", "usearch at the same recall", "qps", "real.qps",
               "this project's index"),
        Figure("recall_at_10", "stress case, not a target: recall@10, i.i.d. random unit vectors"),
        Figure("index_ms", "stress case: query latency, index", "ms", "exact_ms", "numpy brute force",
               ratio="qps_vs_exact", ratio_unit="× the exact qps"),
        Figure("filtered_recall_at_10", "filtered recall@10 (10 % allow-list)"),
        Figure("filtered_qps_vs_exact", "filtered qps / exact qps", "×"),
        Figure("build_s", "stress case: adds + graph inserts, one thread", "s"),
        Figure("structured.recall_at_10", "structured data (16-d latent + noise): recall@10"),
        Figure("structured.qps_vs_exact", "structured data: qps / exact qps", "×"),
        Figure("poincare_map", "Poincaré MAP, tree reconstruction", "", "gensim_map",
               "gensim PoincareModel, same edges, dims, epochs"),
        Figure("poincare_mean_rank", "Poincaré mean rank", "", "gensim_mean_rank", "gensim"),
    ),
    "context": (*_CONTEXT_FIGURES, Figure("budgets.1000.latency_p95_ms", "context p95, B = 1,000", "ms")),
    "context-hash": _CONTEXT_FIGURES,
    "reliability": (
        Figure("kills", "SIGKILLs survived"),
        Figure("lost_writes", "acknowledged writes lost"),
        Figure("reused_versions", "versions acknowledged with two values"),
        Figure("faults_injected", "faults injected in the simulator"),
        Figure("invariant_violations", "invariant violations"),
        Figure("hung_ops", "hung ops"),
        Figure("fuzz_inputs", "fuzz inputs tried"),
        Figure("untyped_errors", "untyped errors"),
        Figure("changed_on_refusal", "refused inputs that changed something"),
        Figure("linearizable", "load history linearizable"),
        Figure("total_s", "run time of the suite", "s"),
    ),
    "tokens": (
        Figure("planning.saved_pct", "planning (4 agents, 12 : 1): tokens saved", "%", "planning.published_pct",
               "agent-coherence (published, not measured here)", show_ratio=False),
        Figure("reviewing.saved_pct", "reviewing (3 agents, 8 : 3): tokens saved", "%", "reviewing.published_pct",
               "agent-coherence (published, not measured here)", show_ratio=False),
        Figure("high_churn.saved_pct", "high churn (4 agents, 8 : 4): tokens saved", "%", "high_churn.published_pct",
               "agent-coherence (published, not measured here)", show_ratio=False),
        *(
            figure
            for name, label in _TOKEN_WORKLOADS
            for figure in (
                Figure(f"workloads.{name}.saved_full", f"{label}: share of the re-send baseline saved",
                       "", f"workloads.{name}.saved_agent_coherence_lazy",
                       "agent-coherence lazy, same sequence, same estimator", show_ratio=False),
                Figure(f"workloads.{name}.saved_agent_coherence_eager", f"{label}: agent-coherence eager, saved"),
            )
        ),
    ),
    "team": (
        Figure("peak_throughput_ops_s", "peak throughput", "ops/s"),
        Figure("peak_at_agents", "at team size", "agents"),
        Figure("median_messages_per_op", "protocol messages per op (median over sizes)", "msgs"),
        Figure("memory_marginal_kib_per_agent", "memory per additional agent (slope 1 → largest team)", "KiB"),
    ),
    "agents": (
        Figure("write_p50_ms_1000", "Agent.write p50 beside 999 idle agents", "ms", "write_p50_ms_1",
               "the same writes with the writer alone", ratio="write_p50_ratio_1000_vs_1"),
        Figure("setup_s", "making the 999 idle agents", "s"),
    ),
    "replay": (
        Figure("sim.events_per_s", "replay on sim", "events/s"),
        Figure("threads.events_per_s", "replay on threads", "events/s"),
        Figure("sim.events", "events replayed", "events"),
        Figure("sim_messages_per_event", "protocol messages per event on sim", "msgs"),
    ),
    "scaling": (
        *(
            Figure(f"ray.{n}.ops_per_s", f"Ray, two nodes, {n} directory shard{'s' if n > 1 else ''}", "ops/s",
                   f"threads.{n}.ops_per_s", "threads runtime, same workload and shards", ratio=f"ray.{n}.vs_threads")
            for n in (1, 2, 4)
        ),
        *(
            Figure(f"ray.{n}.miss_p50_us", f"Ray, {n} shard{'s' if n > 1 else ''}: read miss p50", "µs",
                   f"threads.{n}.miss_p50_us", "threads runtime")
            for n in (1, 2, 4)
        ),
        Figure("ray.1.cpu_ms_per_op", "CPU per op on Ray (the actors' processes, 1 shard)", "ms",
               "threads.1.cpu_ms_per_op", "threads runtime (this process)"),
        Figure("ray_call_rtt_p50_us", "plain Ray actor call round trip p50", "µs", "pykka_ask_rtt_p50_us", _PYKKA),
        Figure("projection.ops_per_s", "projected at 100 nodes (docs/SCALING.md's arithmetic)", "ops/s"),
    ),
}

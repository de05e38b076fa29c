"""A Prometheus endpoint over ``MemorySystem.stats()`` (the optional ``metrics`` extra).

``serve(system, port=0)`` starts ``prometheus_client``'s HTTP server on its
own registry (never the process-wide default one, so two memories in one
process, or a test, cannot collide) with one custom collector. The collector
calls ``system.stats()`` on every scrape and turns it into metric families
named ``gliding_actors_<layer>_<name>``, labelled by ``agent``, ``kind`` or
``policy`` where a figure has parts: nothing is copied between scrapes, so a
scrape shows exactly what ``stats()`` says at that instant.

The mapping from the stats dict to samples is :func:`samples`, a pure
function with no dependency on ``prometheus_client``; only :func:`serve`
imports it, lazily, and says what to install when it is missing.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Self

from gliding_actors.errors import ActorUnavailable, InvalidInput, show

if TYPE_CHECKING:
    from gliding_actors.system import MemorySystem

__all__ = ["INSTALL_HINT", "Family", "MetricsServer", "samples", "serve"]

INSTALL_HINT = "pip install 'gliding-actors[metrics]'"
PREFIX = "gliding_actors"


@dataclasses.dataclass(frozen=True)
class Family:
    """One metric family: ``kind`` is ``counter`` (monotonic) or ``gauge``.

    ``name`` is without the ``_total`` suffix Prometheus adds to counter samples.
    """

    name: str
    kind: str
    help: str
    samples: list[tuple[dict[str, str], float]]


def _one(layer: str, name: str, kind: str, text: str, value: float) -> Family:
    return Family(f"{PREFIX}_{layer}_{name}", kind, text, [({}, float(value))])


def _by(layer: str, name: str, kind: str, text: str, label: str, values: dict[str, Any]) -> Family:
    return Family(
        f"{PREFIX}_{layer}_{name}", kind, text, [({label: str(k)}, float(v)) for k, v in sorted(values.items())]
    )


def samples(stats: dict[str, Any]) -> list[Family]:
    """The metric families of one ``stats()`` dict (docs/METRICS.md has the table)."""
    co = stats["coherence"]
    agents: dict[str, dict[str, int]] = co["agents"]
    latency = co["miss_latency_us"]
    l1, l2, l3 = stats["l1"], stats["l2"], stats["l3"]
    tokens = stats["tokens"]

    def per_agent(key: str) -> dict[str, Any]:
        return {agent: figures[key] for agent, figures in agents.items()}

    families = [
        _by("coherence", "reads", "counter", "Reads by agent (hits + misses).", "agent", per_agent("reads")),
        _by("coherence", "hits", "counter", "Reads served with no protocol message, by agent.", "agent", per_agent("hits")),
        _by("coherence", "misses", "counter", "Reads that needed protocol messages, by agent.", "agent", per_agent("misses")),
        _one("coherence", "hit_rate", "gauge", "Hits / reads over every agent since open.", co["hit_rate"]),
        Family(
            f"{PREFIX}_coherence_miss_latency_seconds",
            "gauge",
            "Read-miss latency over the last misses (wall clock, time.perf_counter), by quantile.",
            [({"quantile": "0.5"}, latency["p50"] / 1e6), ({"quantile": "0.99"}, latency["p99"] / 1e6)],
        ),
        _one("coherence", "evictions", "counter", "Copies given up by caches (PutS/PutE/PutM).", co["evictions"]),
        _by("coherence", "messages", "counter", "Protocol messages sent, by kind.", "kind", co["messages"]),
        _by("coherence", "writes", "counter", "Completed writes, by policy.", "policy", co["writes"]),
        _by("coherence", "tokens_saved", "counter", "Tokens of artifacts served by hits, by agent.", "agent", per_agent("tokens_saved")),
        _by("coherence", "tokens_fetched", "counter", "Tokens of artifacts re-sent by misses, by agent.", "agent", per_agent("tokens_fetched")),
        _one("l0", "records", "gauge", "Nodes stored in L0.", stats["l0"]["records"]),
        _one("l0", "bytes", "gauge", "Bytes of L0's files on disk.", stats["l0"]["bytes"]),
        _by("l1", "turns", "gauge", "Turns in each agent's summary chain.", "agent", {a: f["turns"] for a, f in l1["agents"].items()}),
        _by("l1", "evictions", "counter", "Turns evicted from each agent's chain this session.", "agent", {a: f["evictions"] for a, f in l1["agents"].items()}),
        _by("l1", "tokens", "gauge", "Tokens in each agent's chain.", "agent", {a: f["tokens"] for a, f in l1["agents"].items()}),
        _one("l2", "lines", "gauge", "Lines the memory knows.", l2["lines"]),
        _one("l2", "resident", "gauge", "Lines held in the L2 node maps.", l2["resident"]),
        _one("l2", "dirty", "gauge", "Lines in L2 newer than L0.", l2["dirty"]),
        _one("l2", "drops", "counter", "Clean lines dropped from L2 for capacity.", l2["drops"]),
        _one("l2", "reloads", "counter", "L2 loads that found the line in L0.", l2["reloads"]),
        _one("l2", "lock_waits", "counter", "Lock requests that had to wait.", l2["lock_waits"]),
        _one("l2", "locks_waiting", "gauge", "Lock requests waiting now.", l2["locks_waiting"]),
        _one("l2", "locks_held", "gauge", "Leases held now.", l2["locks_held"]),
        _one("l2", "tasks", "gauge", "Tasks in the DAG.", l2["tasks"]),
        _one("l3", "view_hits", "counter", "Projections served from the view cache.", l3["view_hits"]),
        _one("l3", "view_misses", "counter", "Projections computed.", l3["view_misses"]),
        _one("l3", "views", "gauge", "Views cached.", l3["views"]),
        _one("hyperspace", "queries", "counter", "Searches answered.", stats["hyperspace"]["queries"]),
        _one("hyperspace", "docs", "gauge", "Documents indexed.", stats["hyperspace"]["docs"]),
        _one("context", "assembled", "counter", "Contexts assembled.", stats["context"]["assembled"]),
        _one("context", "tokens_assembled", "counter", "Tokens of the contexts assembled.", stats["context"]["tokens_assembled"]),
        _one("tokens", "saved", "counter", "Tokens hits saved (an orchestrator re-sending every read would have sent them).", tokens["saved"]),
        _one("tokens", "fetched", "counter", "Tokens misses re-sent.", tokens["fetched"]),
        _one("tokens", "saved_ratio", "gauge", "saved / (saved + fetched).", tokens["saved_ratio"]),
    ]
    return families


class _Collector:
    """prometheus_client's custom-collector protocol: ``collect()`` yields families on each scrape."""

    def __init__(self, system: MemorySystem, timeout: float | None) -> None:
        self._system = system
        self._timeout = timeout

    def describe(self) -> list[Any]:
        return []  # no registration-time scrape (it would send asks before serve() returns)

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        if self._system.closed:
            return
        try:
            stats = self._system.stats(timeout=self._timeout)
        except ActorUnavailable:  # closed during the scrape: an empty page, not a 500
            return
        for family in samples(stats):
            labels = sorted(family.samples[0][0]) if family.samples else []
            if family.kind == "counter":
                metric: Any = CounterMetricFamily(family.name, family.help, labels=labels)
            else:
                metric = GaugeMetricFamily(family.name, family.help, labels=labels)
            for values, value in family.samples:
                metric.add_metric([values[k] for k in labels], value)
            yield metric


class MetricsServer:
    """A running exporter: ``url`` to scrape, :meth:`stop` to shut it down (also a context manager)."""

    def __init__(self, httpd: Any, thread: threading.Thread, addr: str) -> None:
        self._httpd = httpd
        self._thread = thread
        self.addr = addr
        self.port: int = int(httpd.server_port)
        self._stopped = False

    @property
    def url(self) -> str:
        return f"http://{self.addr}:{self.port}/metrics"

    def stop(self, timeout: float = 5.0) -> None:
        """Stop serving and close the socket; a second call does nothing."""
        if self._stopped:
            return
        self._stopped = True
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()


def serve(system: MemorySystem, port: int = 0, addr: str = "127.0.0.1", *, timeout: float | None = None) -> MetricsServer:
    """Serve ``system.stats()`` for Prometheus at ``http://addr:port/metrics``; ``port=0`` picks a free one.

    Needs the ``metrics`` extra; without it this raises ``InvalidInput``
    saying what to install, having started nothing. ``timeout`` bounds the
    asks one scrape makes (the runtime's ask timeout when None).
    """
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise InvalidInput(f"metrics port is an integer 0..65535 (0: any free port), not {show(port)}")
    if not isinstance(addr, str) or not addr:
        raise InvalidInput(f"metrics addr is a host address such as '127.0.0.1', not {show(addr)}")
    if system.closed:
        raise ActorUnavailable("the memory system is closed")
    try:
        from prometheus_client import CollectorRegistry, start_http_server
    except ImportError as exc:
        raise InvalidInput(f"the Prometheus exporter needs prometheus_client: {INSTALL_HINT}") from exc
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector(system, timeout))
    httpd, thread = start_http_server(port, addr=addr, registry=registry)
    return MetricsServer(httpd, thread, addr)

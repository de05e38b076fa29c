"""Runtime metrics: ``MemorySystem.stats()`` and an optional Prometheus exporter.

* :mod:`._counters` — the counters the layers bump (kept cheap: a read hit
  stays one board lookup, see that module's docstring);
* :mod:`._stats` — :func:`collect`, the body of ``MemorySystem.stats()``;
* :mod:`._exporter` — :func:`serve`, a ``prometheus_client`` HTTP endpoint
  whose custom collector reads ``stats()`` on every scrape (the ``metrics``
  extra: ``pip install 'gliding-actors[metrics]'``);
* :mod:`._process` — :func:`rss_mb`, this process's resident set (benchmarks
  and soaks).

docs/METRICS.md lists every figure.
"""

from __future__ import annotations

from gliding_actors.metrics._counters import ActorTally, AgentCounters, SystemCounters, line_text
from gliding_actors.metrics._exporter import INSTALL_HINT, MetricsServer, samples, serve
from gliding_actors.metrics._process import rss_mb

__all__ = [
    "INSTALL_HINT",
    "ActorTally",
    "AgentCounters",
    "MetricsServer",
    "SystemCounters",
    "line_text",
    "rss_mb",
    "samples",
    "serve",
]

"""The Prometheus exporter, scraped over real HTTP and parsed with prometheus_client's parser."""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest

from gliding_actors.metrics import samples, serve
from gliding_actors.system import MemorySystem

parser = pytest.importorskip("prometheus_client.parser")  # the metrics extra (in the test extra: CI has it)


def _scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(url, timeout=10) as response:
        assert response.status == 200
        text = response.read().decode("utf-8")
    out: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for family in parser.text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.endswith("_created"):
                continue
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def test_scrape_matches_stats_and_stop_closes_the_port() -> None:
    with MemorySystem.open(runtime="threads") as memory:
        writer, reader = memory.agent("writer", "DA"), memory.agent("reader", "DA")
        server = serve(memory, port=0, addr="127.0.0.1")
        try:
            assert server.port > 0
            for i in range(3):
                writer.write(f"artifact:doc-{i}", {"text": "rotate refresh tokens " * (i + 1)}, graph="execution")
            for _ in range(4):
                for i in range(3):
                    reader.read(f"artifact:doc-{i}")
            writer.write("artifact:doc-0", {"text": "revoked"}, graph="execution", tags=["confirmed_fact"])
            reader.read("artifact:doc-0")
            writer.lock("res:doc", timeout_s=0.0)
            memory.quiesce(5.0)
            scraped = _scrape(server.url)
            stats = memory.stats()  # nothing ran in between: the same figures
            expected: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
            for family in samples(stats):
                suffix = "_total" if family.kind == "counter" else ""
                for labels, value in family.samples:
                    expected[(family.name + suffix, tuple(sorted(labels.items())))] = value
            assert scraped == pytest.approx(expected)
            # and the figures are the work done, not zeros
            assert scraped[("gliding_actors_coherence_misses_total", (("agent", "reader"),))] == 4.0
            assert scraped[("gliding_actors_coherence_hits_total", (("agent", "reader"),))] == 9.0
            assert scraped[("gliding_actors_coherence_writes_total", (("policy", "write_through"),))] == 1.0
            assert scraped[("gliding_actors_l2_locks_held", ())] == 1.0
            assert scraped[("gliding_actors_tokens_saved_total", ())] == stats["tokens"]["saved"] > 0
            assert scraped[("gliding_actors_coherence_miss_latency_seconds", (("quantile", "0.99"),))] > 0
        finally:
            server.stop()
        server.stop()  # a second stop does nothing
        with pytest.raises(urllib.error.URLError):
            urllib.request.urlopen(server.url, timeout=2)

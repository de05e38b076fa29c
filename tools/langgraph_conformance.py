"""Run LangGraph's own store tests against GlidingStore, beside LangGraph's InMemoryStore.

    python tools/langgraph_conformance.py [--json] [--keep DIR]

needs the ``conformance`` extra (``pip install -e '.[conformance]'``:
LangGraph, its SQLite store, pytest-asyncio and pytest-mock) and the package
index. LangGraph's tests are not copied into this repository (their code is
not ours to commit): the source distributions of ``langgraph-checkpoint``
(the installed version) and ``langgraph-checkpoint-sqlite`` ship them, so they
are downloaded at run time (``pip download --no-deps --no-binary :all:``)
into a scratch folder and run there, test bodies unchanged:

* ``langgraph-checkpoint``: ``tests/test_store.py``;
* ``langgraph-checkpoint-sqlite``: ``tests/test_store.py``, ``tests/test_async_store.py`` and
  ``tests/test_ttl.py`` (time to live: ``ttl=`` configs, ``put(ttl=)``, ``refresh_ttl``,
  ``sweep_ttl()`` and the sweeper thread; with real sleeps of a few seconds).

Only the store is swapped: a ``conftest.py`` written beside them replaces the
names the tests build their stores with (``InMemoryStore(...)``,
``SqliteStore.from_conn_string(...)``, ``AsyncSqliteStore.from_conn_string(...)``)
by a factory of the store under test, passing on exactly what the test passes
(``index=``, ``ttl=``; the async SQLite store's sweeper methods are coroutines,
so under those tests GlidingStore's sweeper methods are wrapped in coroutines
that run them on the loop's executor). Each file runs twice, once per store (``GlidingStore`` over a
``system`` agent of a new memory on the default configuration, on the
threads runtime; then ``InMemoryStore``), and the report lists, per test,
both outcomes: the tests InMemoryStore passes and GlidingStore does not are
the conformance gaps. Exit 0 when there are none, 1 otherwise, 2 when the
tests could not be fetched or run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import textwrap
import xml.etree.ElementTree as ET
from importlib import metadata
from pathlib import Path
from typing import Any

#: (distribution, test files) whose tests run against the swapped store
SOURCES = (
    ("langgraph-checkpoint", ("tests/test_store.py",)),
    ("langgraph-checkpoint-sqlite", ("tests/test_store.py", "tests/test_async_store.py", "tests/test_ttl.py")),
)
STORES = ("gliding", "inmemory")

#: the conftest.py that swaps the store (the environment variable names the store under test)
_CONFTEST = textwrap.dedent(
    '''
    """Written by gliding-actors' tools/langgraph_conformance.py: swaps the store the tests build."""
    import atexit
    import contextlib
    import os

    from langgraph.store.memory import InMemoryStore as _InMemoryStore

    STORE = os.environ["GLIDING_CONFORMANCE_STORE"]
    _opened = []


    def _close_all():
        for memory in _opened:
            memory.close(flush=False)


    atexit.register(_close_all)


    class _Done:
        """What setup() answers: nothing to wait for, awaited or not (the SQLite tests do both)."""

        def __await__(self):
            return iter(())


    class InMemoryUnderTest(_InMemoryStore):
        def setup(self):
            return _Done()


    def make_store(index=None, ttl=None, asynchronous=False, **kwargs):
        """The store under test, given exactly what the test gave its own store."""
        given = dict(kwargs, **({"index": index} if index is not None else {}), **({"ttl": ttl} if ttl is not None else {}))
        if STORE == "inmemory":
            return InMemoryUnderTest(**given)
        from gliding_actors import MemorySystem
        from gliding_actors.integrations.langgraph import GlidingStore

        class GlidingUnderTest(GlidingStore):
            def setup(self):
                return _Done()

        class AsyncGlidingUnderTest(GlidingUnderTest):
            """AsyncSqliteStore's sweeper methods are coroutines: the same calls, awaited."""

            async def sweep_ttl(self):
                return await self.asweep_ttl()

            async def start_ttl_sweeper(self, sweep_interval_minutes=None):
                GlidingStore.start_ttl_sweeper(self, sweep_interval_minutes)

            async def stop_ttl_sweeper(self, timeout=None):
                return GlidingStore.stop_ttl_sweeper(self, timeout)

        memory = MemorySystem.open(runtime="threads")
        _opened.append(memory)
        kind = AsyncGlidingUnderTest if asynchronous else GlidingUnderTest
        return kind(memory.agent("langgraph", "system"), **given)


    class SqliteStoreShim:
        @staticmethod
        @contextlib.contextmanager
        def from_conn_string(conn_string, *, index=None, ttl=None, **kwargs):
            yield make_store(index=index, ttl=ttl)


    class AsyncSqliteStoreShim:
        @staticmethod
        @contextlib.asynccontextmanager
        async def from_conn_string(conn_string, *, index=None, ttl=None, **kwargs):
            yield make_store(index=index, ttl=ttl, asynchronous=True)


    def pytest_collection_modifyitems(session, config, items):
        for module in {item.module for item in items if getattr(item, "module", None) is not None}:
            if hasattr(module, "InMemoryStore"):
                module.InMemoryStore = make_store
            if hasattr(module, "SqliteStore"):
                module.SqliteStore = SqliteStoreShim
            if hasattr(module, "AsyncSqliteStore"):
                module.AsyncSqliteStore = AsyncSqliteStoreShim
    '''
)


class ConformanceError(Exception):
    """The tests could not be fetched or run (exit 2)."""


def _download(dist: str, version: str | None, into: Path) -> Path:
    """The unpacked source distribution of ``dist`` (``==version`` when given)."""
    spec = f"{dist}=={version}" if version else dist
    done = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:", spec, "-d", str(into)],
        capture_output=True, text=True, timeout=600, check=False,
    )
    archives = sorted(into.glob(dist.replace("-", "_") + "-*.tar.gz"))
    if done.returncode or not archives:
        raise ConformanceError(f"pip download {spec} failed: {done.stderr.strip()[-400:]}")
    with tarfile.open(archives[-1]) as archive:
        archive.extractall(into, filter="data")
    return into / archives[-1].name.removesuffix(".tar.gz")


def _installed(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _run(root: Path, files: tuple[str, ...], store: str) -> dict[str, str]:
    """``{test id: passed | failed | error | skipped}`` of ``files`` under ``root`` against ``store``."""
    report = root / f"junit-{store}.xml"
    env = {**os.environ, "GLIDING_CONFORMANCE_STORE": store}
    command = [
        sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "asyncio_mode=auto",
        f"--junitxml={report}", "--rootdir", str(root), *files,
    ]
    subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=1800, check=False)
    if not report.is_file():
        raise ConformanceError(f"pytest wrote no report for {root.name} ({store})")
    outcomes: dict[str, str] = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        name = f"{case.get('classname')}::{case.get('name')}"
        kinds = {child.tag for child in case}
        outcomes[name] = (
            "failed" if "failure" in kinds else "error" if "error" in kinds else "skipped" if "skipped" in kinds else "passed"
        )
    return outcomes


def run(keep: Path | None = None) -> dict[str, Any]:
    """Fetch the tests, run them against both stores, and compare."""
    scratch = Path(keep) if keep else Path(tempfile.mkdtemp(prefix="gliding-lg-conformance-"))
    scratch.mkdir(parents=True, exist_ok=True)
    tests: dict[str, dict[str, str]] = {}
    sources = []
    for dist, files in SOURCES:
        version = _installed(dist)
        if version is None:
            raise ConformanceError(f"{dist} is not installed: pip install -e '.[conformance]'")
        root = _download(dist, version, scratch / dist)
        (root / "conftest.py").write_text(_CONFTEST, encoding="utf-8")
        sources.append(f"{dist}=={version}")
        for store in STORES:
            for test, outcome in _run(root, files, store).items():
                tests.setdefault(f"{dist}/{test}", {})[store] = outcome
    gaps = sorted(t for t, o in tests.items() if o.get("inmemory") == "passed" and o.get("gliding") != "passed")
    return {
        "sources": sources,
        "tests": len(tests),
        "passed": {store: sum(1 for o in tests.values() if o.get(store) == "passed") for store in STORES},
        "gaps": gaps,
        "outcomes": tests,
        "scratch": str(scratch),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--keep", default=None, metavar="DIR", help="download and run in DIR (kept afterwards)")
    args = parser.parse_args(argv)
    try:
        result = run(Path(args.keep) if args.keep else None)
    except (ConformanceError, OSError, subprocess.TimeoutExpired) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"LangGraph's store tests ({', '.join(result['sources'])}): {result['tests']} tests")
        print(f"  InMemoryStore passes {result['passed']['inmemory']}, GlidingStore passes {result['passed']['gliding']}")
        for test in result["gaps"]:
            print(f"  InMemoryStore passes, GlidingStore does not: {test} ({result['outcomes'][test]['gliding']})")
    return 0 if not result["gaps"] else 1


if __name__ == "__main__":
    sys.exit(main())

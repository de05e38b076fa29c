"""The package's import graph keeps the layering the design promises.

Read from the source with ``ast`` (every ``import`` statement, including those
inside functions and under ``TYPE_CHECKING``: a lazy or type-only import is
still a dependency a reader has to follow). An edge goes to the module named,
not to the packages around it. The rules:

* **the façade is on top**: no module below it imports ``gliding_actors.system``;
* **no cycle between folders**: modules of different folders (a top-level
  module is a folder of its own) never import each other in a circle;
* **layers know nothing of scenarios**: no layer imports ``scenario``;
* **the runtime is at the bottom**: it imports nothing of the package but
  itself, errors and clocks;
* **L0 does not reach L2**, not even through another module;
* **the package imports neither ``tools`` nor ``tests``**.

``python tests/core/test_import_graph.py`` prints the violations, if any.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "gliding_actors"
ROOT = PACKAGE.name

#: modules at or above the façade: the façade itself and what is built on it
#: (command line, benchmarks, scenario replay, integrations, test rigs); a
#: name ending in ``.*`` is a folder
ABOVE_FACADE = (
    "gliding_actors",
    "gliding_actors.system",
    "gliding_actors.agent",
    "gliding_actors.cli",
    "gliding_actors.bench.*",
    "gliding_actors.scenario.*",
    "tools.reliability.*",
    "gliding_actors.integrations.*",
    "gliding_actors.metrics._exporter",
    "gliding_actors.skills._cli",
    "gliding_actors._window_cli",
)
#: the layers: what the memory is made of
LAYERS = ("l0", "l1", "l2", "l3", "coherence", "hyperspace", "context", "skills", "metrics")
#: what the runtime may import besides itself
RUNTIME_MAY_IMPORT = ("gliding_actors.errors", "gliding_actors.clock")
RUNTIME = ("gliding_actors.runtime",)



def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def _within(module: str, prefixes: Iterable[str]) -> bool:
    """Whether ``module`` is one of ``prefixes`` or inside one of them (a ``.*`` entry is a folder only)."""
    for prefix in prefixes:
        if prefix.endswith(".*"):
            if module == prefix[:-2] or module.startswith(prefix[:-1]):
                return True
        elif module == prefix or (prefix != ROOT and module.startswith(prefix + ".")):
            return True
    return False


def _imported_names(module: str, path: Path) -> Iterator[tuple[str, ...]]:
    """For each name an import statement of ``module`` binds, the dotted names it may come
    from, most specific first (``from pkg import x``: the module ``pkg.x``, else ``pkg``)."""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            yield from ((alias.name,) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            yield from ((f"{base}.{alias.name}", base) for alias in node.names)


def import_graph() -> dict[str, set[str]]:
    """module -> the package modules it imports. A name resolves to the first of its
    candidates that is a module, else to the longest module its last candidate names."""
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        targets: set[str] = set()
        for candidates in _imported_names(module, path):
            exact = next((name for name in candidates if name in modules), None)
            if exact is None:
                parts = candidates[-1].split(".")
                while parts and ".".join(parts) not in modules:
                    parts.pop()
                exact = ".".join(parts) or None
            if exact is not None:
                targets.add(exact)
        targets.discard(module)
        graph[module] = targets
    return graph


def foreign_imports() -> dict[str, set[str]]:
    """module -> the top-level names of ``tools`` or ``tests`` it imports."""
    out: dict[str, set[str]] = {}
    for module, path in _modules().items():
        bad = {
            candidates[-1]
            for candidates in _imported_names(module, path)
            if candidates[-1].split(".")[0] in ("tools", "tests")
        }
        if bad:
            out[module] = bad
    return out


def folder(module: str) -> str:
    """The folder a module belongs to; a module at the top is a folder of its own."""
    parts = module.split(".")
    if len(parts) == 1:
        return ROOT
    return parts[1] if (PACKAGE / parts[1]).is_dir() else module


def _strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's components of more than one module, iteratively (no recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _shortest_paths(graph: dict[str, set[str]], starts: Iterable[str]) -> dict[str, list[str]]:
    """Every module reachable from ``starts``, with a shortest import path to it (breadth first)."""
    paths = {start: [start] for start in sorted(starts)}
    queue = list(paths)
    while queue:
        node = queue.pop(0)
        for child in sorted(graph[node]):
            if child not in paths:
                paths[child] = [*paths[node], child]
                queue.append(child)
    return paths


def violations(graph: dict[str, set[str]] | None = None) -> set[str]:
    """Every broken rule, one line each."""
    graph = import_graph() if graph is None else graph
    out: set[str] = set()
    for module, targets in graph.items():
        if "gliding_actors.system" in targets and not _within(module, ABOVE_FACADE):
            out.add(f"below the facade, {module} imports gliding_actors.system")
        if _within(module, [f"{ROOT}.{layer}" for layer in LAYERS]):
            for target in sorted(targets):
                if _within(target, [f"{ROOT}.scenario"]):
                    out.add(f"layer module {module} imports {target}")
    for component in _strongly_connected(graph):
        folders = sorted({folder(m) for m in component})
        if len(folders) > 1:
            out.add(f"import cycle between {', '.join(folders)}: {', '.join(component)}")
    for module in sorted(graph):
        if _within(module, RUNTIME):
            for target in sorted(graph[module]):
                if not _within(target, RUNTIME) and target not in RUNTIME_MAY_IMPORT:
                    out.add(f"runtime module {module} imports {target}")
    l0 = [m for m in graph if _within(m, [f"{ROOT}.l0"])]
    for target, path in _shortest_paths(graph, l0).items():
        if _within(target, [f"{ROOT}.l2"]):
            out.add(f"L0 reaches L2: {' -> '.join(path)}")
    for module, names in foreign_imports().items():
        out.add(f"{module} imports {', '.join(sorted(names))} (outside the package)")
    return out


def test_the_import_graph_keeps_the_layering() -> None:
    found = sorted(violations())
    assert not found, "layering violations:\n" + "\n".join(found)


def test_the_checker_sees_each_kind_of_violation() -> None:
    """Each rule fires on a graph that breaks it, so a rule that can never fail is caught here."""
    graph = {
        "gliding_actors.system": set(),
        "gliding_actors.l1._actor": {"gliding_actors.system", "gliding_actors.scenario._ops"},
        "gliding_actors.scenario._ops": set(),
        "gliding_actors.config": {"gliding_actors.l2._permissions"},
        "gliding_actors.l0._store": {"gliding_actors.config"},
        "gliding_actors.l2._permissions": {"gliding_actors.l0._store"},
        "gliding_actors.runtime._cell": {"gliding_actors.errors", "gliding_actors.coherence._cache"},
        "gliding_actors.errors": set(),
        "gliding_actors.coherence._cache": set(),
    }
    found = "\n".join(sorted(violations(graph)))
    assert "below the facade, gliding_actors.l1._actor imports gliding_actors.system" in found
    assert "layer module gliding_actors.l1._actor imports gliding_actors.scenario._ops" in found
    assert "import cycle between gliding_actors.config, l0, l2" in found
    assert "runtime module gliding_actors.runtime._cell imports gliding_actors.coherence._cache" in found
    assert "L0 reaches L2: gliding_actors.l0._store -> gliding_actors.config -> gliding_actors.l2._permissions" in found
    assert "gliding_actors.errors" not in found  # what the runtime may import is not reported


if __name__ == "__main__":
    for line in sorted(violations()):
        print(line)
    sys.exit(0)

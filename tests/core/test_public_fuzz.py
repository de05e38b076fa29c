"""Every public method of an agent handle refuses bad arguments with a typed error, and nothing dies.

Each parameter of each public method is given each of a set of hostile values
(wrong types, inf/NaN, huge integers, lone surrogates, NUL, empty and huge
strings, 10,000-deep nesting, bytes, arbitrary objects) while the others hold
good ones. A call may succeed (some values are valid somewhere) or raise a
:class:`GlidingError`; anything else — a TypeError, an OverflowError, a
RecursionError from an error message's repr — is a defect. Afterwards no
system actor has crashed and the memory still serves.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from typing import Any

import pytest

from gliding_actors import Agent, GlidingError, MemorySystem
from gliding_actors._operation import Operation


def _deep(levels: int) -> Any:
    value: Any = "x"
    for _ in range(levels):
        value = {"a": value}
    return value



@pytest.fixture(autouse=True)
def _in_a_scratch_folder(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """A hostile value is often a good relative path: whatever it makes lands in a scratch folder."""
    monkeypatch.chdir(tmp_path_factory.mktemp("cwd"))

HOSTILE: list[Any] = [
    None, 5, -1, 2**70, math.inf, -math.inf, math.nan, True, 1.5, "", " ", "\ud800", "a\x00b", "x" * 100_000,
    [], [5], ["\ud800"], ("t",), {}, {"k": math.nan}, {"\ud800": 1}, _deep(10_000), b"bytes", object(),
]

#: a good value for each required parameter, so that each call tests one bad argument
GOOD: dict[str, Any] = {
    "iri": "plan:p", "value": {"n": 2}, "version": 1, "sparql": "ASK { ?s ?p ?o }", "resource": "r",
    "task": "task:t", "on": "task:t", "iris": ["plan:p"], "topic": "t", "message": {"m": 1},
    "summary": "s", "text": "x", "entities": ["plan:p"], "embedding": [0.1] * 8,
}


def _public_methods() -> list[str]:
    members = {name: m for cls in reversed(Agent.__mro__) for name, m in vars(cls).items()}
    return sorted(
        name
        for name, member in members.items()
        if not name.startswith("_") and (isinstance(member, Operation) or inspect.isfunction(member))
    )


def _state(memory: MemorySystem) -> Any:
    """What an agent's refused call could have changed: lines and their graphs, locks, tasks, cached copies."""
    memory.quiesce(10.0)
    board = memory.board_state
    return memory.line_graphs.snapshot(), board.locks.snapshot(), board.tasks.snapshot(), memory.board.holders()


def _hostile_calls(target: Any, names: list[str], state: Callable[[], Any] | None = None) -> tuple[list[str], list[str]]:
    """Call each method of ``target`` with each hostile value in each parameter (the others good).

    Returns the calls that raised something other than a GlidingError, and (with ``state``)
    the refused calls after which ``state()`` differed from before.
    """
    untyped: list[str] = []
    changed: list[str] = []
    for name in names:
        method = getattr(target, name)
        parameters = [p for p in inspect.signature(method).parameters.values() if p.name != "timeout"]
        waits = "timeout" in inspect.signature(method).parameters
        for parameter in parameters:
            for bad in HOSTILE:
                args = {p.name: GOOD.get(p.name, "x") for p in parameters if p.default is inspect.Parameter.empty}
                args[parameter.name] = bad
                before = None if state is None else state()
                try:
                    method(**args, timeout=5.0) if waits else method(**args)
                except GlidingError:
                    if state is not None and state() != before:
                        changed.append(f"{name}({parameter.name}={type(bad).__name__})")
                except Exception as exc:  # noqa: BLE001 - collected: the defect this test looks for
                    untyped.append(f"{name}({parameter.name}={type(bad).__name__}): {type(exc).__name__}: {exc!s:.80}")
    return untyped, changed


def test_every_public_method_of_an_agent_refuses_bad_arguments_with_typed_errors() -> None:
    with MemorySystem.open(runtime="threads") as memory:
        pa = memory.agent("pa", "PA")
        pa.write("plan:p", {"n": 1})
        pa.create_task("task:t")
        names = _public_methods()
        assert len(names) > 30
        untyped, changed = _hostile_calls(pa, names, lambda: _state(memory))
        assert untyped == []
        assert changed == [], "refused, yet something changed"
        crashed = {actor: a["crashes"] for actor, a in memory.supervision()["actors"].items() if a["crashes"]}
        assert crashed == {}
        # and the memory serves
        pa.write("plan:after", {"n": 3})
        assert memory.agent("ca", "CA").read("plan:after")["value"] == {"n": 3}
        assert pa.lock("after", "write") is not None


@pytest.mark.parametrize("role", [None, 5, "\ud800", "pa", ["PA"]])
@pytest.mark.parametrize("agent_id", ["ok", "", " x", "@x", "\ud800", "a\x00b", "x" * 500, 5, _deep(10_000)])
def test_the_memory_refuses_a_bad_agent_with_a_typed_error_and_makes_nothing(agent_id: Any, role: Any) -> None:
    with MemorySystem.open(runtime="sim") as memory:
        with pytest.raises(GlidingError):
            memory.agent(agent_id, role)
        assert memory.agents() == {} and memory.board.holders() == {}


#: façade methods a fuzz must not call with good-looking values: they end or take down the memory
_DESTRUCTIVE = {"close", "crash_process", "open"}


def _facade_methods() -> list[str]:
    members = {name: m for cls in reversed(MemorySystem.__mro__) for name, m in vars(cls).items()}
    return sorted(
        name
        for name, member in members.items()
        if not name.startswith("_") and inspect.isfunction(member) and name not in _DESTRUCTIVE
    )


def test_every_public_method_of_the_memory_refuses_bad_arguments_with_typed_errors_and_changes_nothing() -> None:
    with MemorySystem.open(runtime="threads") as memory:
        pa = memory.agent("pa", "PA")
        pa.write("plan:p", {"n": 1})
        memory.flush(timeout=10.0)
        before = memory.l0.query(), memory.line_graphs.snapshot(), sorted(memory.agents())
        names = _facade_methods()
        assert {"agent", "inspect", "may_read", "submit_flush", "crash", "spawn_supervised"} <= set(names)
        untyped, _ = _hostile_calls(memory, names)
        assert untyped == []
        # nothing a refusal could change did: L0, the line registry, the agents
        memory.flush(timeout=10.0)
        assert (memory.l0.query(), memory.line_graphs.snapshot(), sorted(memory.agents())) == before
        crashed = {actor: a["crashes"] for actor, a in memory.supervision()["actors"].items() if a["crashes"]}
        assert crashed == {}
        pa.write("plan:after", {"n": 3})
        assert memory.agent("ca", "CA").read("plan:after")["value"] == {"n": 3}


def test_opening_a_memory_refuses_bad_arguments_with_typed_errors(tmp_path: Any) -> None:
    untyped: list[str] = []
    for parameter in ("path", "config", "runtime", "clock", "seed", "trace", "record", "address", "progress"):
        for bad in HOSTILE:
            try:
                args: dict[str, Any] = {"path": tmp_path / "m", "runtime": "sim", parameter: bad}
                if parameter in ("path", "record") and isinstance(bad, str) and bad.strip() and "\x00" not in bad:
                    continue  # a plain string is a good path: it would make a file or folder named after it
                with MemorySystem.open(**args):
                    pass
            except GlidingError:
                pass
            except Exception as exc:  # noqa: BLE001 - collected: the defect this test looks for
                untyped.append(f"open({parameter}={type(bad).__name__}): {type(exc).__name__}: {exc!s:.80}")
    assert untyped == []

"""The blackboard's typed requests: checked at its door, so no agent's input crashes it or changes anything."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from gliding_actors import InvalidInput, MemorySystem
from gliding_actors.l2._awareness import KEEP
from gliding_actors.l2._blackboard import BLACKBOARD_ACTOR
from gliding_actors.l2._board_requests import (
    Agents,
    Fence,
    Heartbeat,
    Lock,
    Register,
    TaskAttach,
    TaskComplete,
    TaskCreate,
    TaskDepend,
    TaskLayers,
    TaskMembers,
    TaskScope,
    Tick,
    Unlock,
    parse_request,
)


def _deep(levels: int) -> Any:
    value: Any = "x"
    for _ in range(levels):
        value = {"a": value}
    return value


#: malformed requests an agent could send; each must be refused, none may crash the blackboard
MALFORMED: list[Any] = [
    {"t": "heartbeat"},  # no agent
    {"t": "heartbeat", "agent": 7},
    {"t": "lock", "agent": "da", "resource": "r", "mode": "write", "timeout_s": "x"},
    {"t": "lock", "agent": "da", "resource": "r", "mode": "write", "timeout_s": float("nan")},
    {"t": "lock", "agent": "da", "resource": "r"},  # no mode
    {"t": "unlock", "agent": ["da"], "resource": "r"},
    {"t": "fence", "resource": "r", "token": "1"},
    {"t": "fence", "resource": "r", "token": True},
    {"t": "task.create", "task": "task:x", "depends_on": [_deep(10_000)]},
    {"t": "task.create", "task": _deep(10_000)},
    {"t": "task.attach", "task": "task:x", "iris": "task:y"},
    {"t": "task.complete", "task": "task:x", "status": 3},
    {"t": "no such request"},
    {"t": ["heartbeat"]},
    {},
    ["heartbeat"],
    "heartbeat",
]


@pytest.fixture
def memory() -> Iterator[MemorySystem]:
    with MemorySystem.open(runtime="sim") as system:
        yield system


def test_each_request_travels_as_an_object_and_parses_back_to_itself() -> None:
    requests = [
        Register("da", "DA"),
        Heartbeat("da", "busy", "coding"),
        Heartbeat("da"),
        Agents(),
        Lock("da", "repo", "write", 1.5),
        Unlock("da", "repo"),
        Fence("repo", 4),
        TaskCreate("task:a", "task:root", ("task:b",)),
        TaskDepend("task:a", "task:b"),
        TaskLayers(None),
        TaskAttach("task:a", ("plan:1",)),
        TaskScope("task:a", "failed"),
        TaskComplete("task:a"),
        TaskMembers("task:a"),
        Tick(),
    ]
    for request in requests:
        message = request.message()
        assert list(message)[0] == "t" and message["t"] == request.KIND
        assert parse_request(message) == request
    assert "operation" not in Heartbeat("da").message()  # KEEP is left out: the registry keeps its operation
    assert parse_request({"t": "heartbeat", "agent": "da"}) == Heartbeat("da", None, KEEP)


@pytest.mark.parametrize("message", MALFORMED, ids=range(len(MALFORMED)))
def test_a_malformed_request_is_refused_by_the_parser(message: Any) -> None:
    with pytest.raises(InvalidInput):
        parse_request(message)


def test_malformed_requests_never_crash_the_blackboard_and_change_nothing(memory: MemorySystem) -> None:
    ca, da = memory.agent("ca", "CA"), memory.agent("da", "DA")
    ca.create_task("task:review")
    token = ca.lock("repo", "write")
    assert token is not None
    before = memory.board_state.locks.snapshot(), memory.board_state.tasks.layers(None)
    board = memory.runtime.lookup(BLACKBOARD_ACTOR)
    for message in MALFORMED * 2:  # more than the restart intensity allows, had any crashed it
        with pytest.raises(InvalidInput):
            board.ask(message).get(5.0)
    assert memory.supervision()["actors"][BLACKBOARD_ACTOR]["crashes"] == 0
    assert (memory.board_state.locks.snapshot(), memory.board_state.tasks.layers(None)) == before
    assert da.lock("repo", "write") is None  # still CA's
    da.heartbeat("working")  # and the blackboard serves
    assert memory.agent("pa", "PA").task_layers() == [["task:review"]]


def test_an_agent_sends_only_task_requests_through_submit_task(memory: MemorySystem) -> None:
    ca, da = memory.agent("ca", "CA"), memory.agent("da", "DA")
    assert ca.lock("repo", "write") is not None
    for forged in (
        {"t": "unlock", "agent": "ca", "resource": "repo"},
        {"t": "lock", "agent": "ca", "resource": "other", "mode": "write"},
        {"t": "heartbeat", "agent": "ca", "status": "forged"},
        {"t": "register", "agent": "ca", "role": "SA"},
    ):
        with pytest.raises(InvalidInput, match="task-DAG request"):
            da.submit_task(forged)
    assert da.lock("repo", "write") is None  # CA's lock was never released in its name
    assert da.submit_task({"t": "task.create", "task": "task:t"}).get(5.0) == {"task": "task:t"}

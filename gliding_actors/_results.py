"""What agent operations answer and what their callers get: the typed results, and the steps between."""

from __future__ import annotations

from typing import Any, TypedDict

__all__ = ["ModifyResult", "ReadResult", "WriteResult"]


class ReadResult(TypedDict):
    """What a read returns (the scenario op ``read``'s result keys)."""

    #: the line's value as written, or None when absent or deleted
    value: dict[str, Any] | None
    #: 0 while never written, +1 per completed write or delete
    version: int
    #: this agent's copy after the read: S, E or M (I for a line nobody wrote)
    state: str
    #: coherence-protocol messages the read caused (0 for a hit)
    messages: int


class WriteResult(TypedDict):
    """What a write or cas returns."""

    version: int
    state: str
    messages: int
    #: ``write_through`` (critical tag: durable in L0 before completing) or ``write_back``
    policy: str
    #: the named graph the line is in after the write (the one it was in when none was named)
    graph: str


class ModifyResult(WriteResult):
    """What a modify returns: a write's result and the value the function made."""

    value: dict[str, Any]


class UpdateResult(TypedDict):
    """What a SPARQL update returns: the lines it changed, each sorted, and their new versions."""

    #: lines the update created (statements about an IRI no line held)
    created: list[str]
    #: lines whose values it changed
    changed: list[str]
    #: lines it emptied, so deleted (a tombstone, as :meth:`Agent.delete`)
    deleted: list[str]
    #: the version each of those lines is at after the update
    versions: dict[str, int]


# -- finishing steps: how an operation's answer becomes its caller's result
def nothing(_answer: object) -> None:
    return None


def version_of(answer: dict[str, Any]) -> int:
    return int(answer["version"])


def token_of(answer: dict[str, Any]) -> int | None:
    return int(answer["token"]) if answer["granted"] else None


def layers_of(answer: dict[str, Any]) -> list[list[str]]:
    return [list(layer) for layer in answer["layers"]]


def ready_of(answer: dict[str, Any]) -> list[str]:
    return list(answer["ready"])


def seq_of(answer: dict[str, int]) -> int:
    return answer["seq"]


def released_of(answer: dict[str, Any]) -> list[str]:
    return list(answer["released"])


def evicted_of(answer: dict[str, Any]) -> list[str]:
    return list(answer["evicted"])


def absent(state: str, messages: int) -> ReadResult:
    """The answer to a read of a line nobody wrote: also what a line the reader may not see reads as.

    A copy held M or E of such a line reads as E would (an absent line is never M).
    """
    return {"value": None, "version": 0, "state": "S" if state == "S" else "E", "messages": messages}


def read_result(result: dict[str, Any]) -> ReadResult:
    return {
        "value": result["value"],
        "version": result["version"],
        "state": result["state"],
        "messages": result["messages"],
    }

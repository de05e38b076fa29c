"""The one exception tree of gliding_actors.

Every error the library raises on purpose is a :class:`GlidingError`, so an
orchestrator can catch the library's failures in one ``except`` clause and still
tell them apart::

    GlidingError
    ├── InvalidInput            bad input; nothing was changed
    │   ├── ConfigError         a configuration key or value is wrong
    │   ├── ScenarioFormatError a scenario file is malformed (FILE:LINE:COL)
    │   └── MalformedAnswer     an LLM's answer is not {thought, content, summary}
    ├── PermissionDenied        the agent's role may not touch that graph
    │   └── SignatureError      a skill's signature is missing, malformed, untrusted or wrong
    ├── ConflictError           a compare-and-set or fencing check lost a race
    │   └── DeadlockError       a lock wait would close a cycle in the wait-for graph
    ├── ModifyFailed            the function a modify applies raised; nothing was changed
    ├── CycleError              a task dependency would close a cycle
    ├── Timeout                 a wait ran out of time (also a TimeoutError)
    ├── ActorUnavailable        the actor is stopped, crashed or unknown
    │   └── ActorCrashed        the actor failed while handling this request
    ├── StorageError            durable storage cannot be used as it is
    │   ├── IncompatibleFormat  written by a newer format version
    │   └── CorruptRecord       a stored record does not decode
    ├── EmbeddingError          an embedder could not embed a text (never a zero vector)
    └── LLMError                an LLM endpoint could not be asked, or answered no chat reply

The scenario format names errors by class name (``error: ConflictError``), so
these names are part of the public contract: never rename one.

Errors that cross an actor boundary are re-raised in the caller as the same
class; an exception that is *not* a ``GlidingError`` escaping an actor's handler
is a bug in that actor and reaches callers as :class:`ActorCrashed`.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "ActorCrashed",
    "ActorUnavailable",
    "ConfigError",
    "ConflictError",
    "CorruptRecord",
    "CycleError",
    "DeadlockError",
    "EmbeddingError",
    "GlidingError",
    "IncompatibleFormat",
    "InvalidInput",
    "LLMError",
    "MalformedAnswer",
    "ModifyFailed",
    "PermissionDenied",
    "ScenarioFormatError",
    "SignatureError",
    "StorageError",
    "Timeout",
]


class GlidingError(Exception):
    """Base class of every error gliding_actors raises on purpose."""


class InvalidInput(GlidingError, ValueError):
    """Input was refused before anything changed.

    ``path`` locates the offending part inside a nested input (for example
    ``("l1", "beta")`` in a config), when there is one.
    """

    def __init__(self, message: str, *, path: Sequence[str | int] = ()) -> None:
        super().__init__(message)
        self.message = message
        self.path: tuple[str | int, ...] = tuple(path)


class ConfigError(InvalidInput):
    """A configuration key is unknown or a value has the wrong type or range."""


class ScenarioFormatError(InvalidInput):
    """A scenario file does not follow the format; says where, as FILE:LINE:COL."""

    def __init__(
        self,
        message: str,
        *,
        file: str,
        line: int,
        col: int,
        path: Sequence[str | int] = (),
    ) -> None:
        super().__init__(message, path=path)
        self.file = file
        self.line = line
        self.col = col

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}: {self.message}"


class PermissionDenied(GlidingError):
    """The agent's role may not perform this operation on that named graph."""


class SignatureError(PermissionDenied):
    """A skill may not be used: its signature is missing, malformed, made with a
    key the caller does not trust, or does not match the skill's content.

    A :class:`PermissionDenied` because it is one: the content may be perfectly
    well-formed, the caller is just not allowed to act on it. ``key_id`` names
    the key the skill claims (None when it names none); ``iri`` the skill.
    """

    def __init__(self, message: str, *, key_id: str | None = None, iri: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.key_id = key_id
        self.iri = iri


class ConflictError(GlidingError):
    """A version or fencing-token check failed because someone else moved first."""


class DeadlockError(ConflictError):
    """Waiting for this lock would close a cycle of agents waiting on each other.

    Raised at once instead of waiting; nothing was granted or queued.
    """


class ModifyFailed(GlidingError):
    """The function an ``Agent.modify`` applies raised: the line is as it was, and the message
    names the function's exception (its type and text)."""


class CycleError(GlidingError):
    """Adding this task dependency would close a cycle; nothing was added."""


class Timeout(GlidingError, TimeoutError):
    """A wait outside the actor system ran out of time."""


class ActorUnavailable(GlidingError):
    """The addressed actor is not running (never started, stopped, or crashed)."""


class ActorCrashed(ActorUnavailable):
    """The actor raised an unexpected exception while handling the request.

    ``actor`` names the actor; ``cause`` is ``"ExceptionType: message"`` of the
    original exception (a string, so the error can cross process boundaries).
    """

    def __init__(self, actor: str, cause: str) -> None:
        super().__init__(f"actor {actor!r} crashed: {cause}")
        self.actor = actor
        self.cause = cause


class StorageError(GlidingError):
    """Durable storage cannot be used as it is; nothing was silently dropped."""


class IncompatibleFormat(StorageError):
    """The store was written by a newer on-disk format version than this build reads."""


class CorruptRecord(StorageError):
    """A stored record does not decode; the key is named in the message."""


class EmbeddingError(GlidingError):
    """An embedder could not turn a text into a vector (a model missing, an
    endpoint down or answering nonsense). Never papered over with a zero or
    random vector: the caller falls back to another embedder or indexes nothing."""


class LLMError(GlidingError):
    """An LLM could not be asked (an endpoint down, refusing, timing out) or
    its reply was not a chat answer at all. The text of a well-formed reply
    that is not the expected ``{thought, content, summary}`` answer is a
    :class:`MalformedAnswer` instead."""


class MalformedAnswer(InvalidInput):
    """An LLM's answer is not the ``{thought, content, summary}`` object, even
    after the repairs :func:`gliding_actors.llm.parse_answer` tries; refused
    before anything changed. The message says what was wrong."""


def show(value: object) -> str:
    """(Not an error: a helper every refusal uses.) A short, safe picture of a refused value for an error message.

    A hostile value may be huge, 10,000 levels deep (``repr`` would recurse
    out) or hold lone surrogates: containers are shown by type and size only.
    """
    if isinstance(value, (str, int, float, bool, type(None))):
        text = repr(value)
        return text if len(text) <= 80 else text[:77] + "..."
    size = len(value) if isinstance(value, (dict, list, tuple, set, frozenset)) else None
    return type(value).__name__ + ("" if size is None else f" of {size}")

"""gliding_actors: a CPU-cache-style memory for teams of LLM agents, built on actors."""

from gliding_actors._progress import Progress
from gliding_actors._version import __version__
from gliding_actors.agent import ROLES, Agent, AsyncAgent
from gliding_actors.clock import Clock, SystemClock, VirtualClock
from gliding_actors.config import Config
from gliding_actors.errors import (
    ActorCrashed,
    ActorUnavailable,
    ConfigError,
    ConflictError,
    CorruptRecord,
    CycleError,
    DeadlockError,
    GlidingError,
    IncompatibleFormat,
    InvalidInput,
    PermissionDenied,
    ScenarioFormatError,
    SignatureError,
    StorageError,
    Timeout,
)
from gliding_actors.system import MemorySystem

__all__ = [
    "ROLES",
    "ActorCrashed",
    "ActorUnavailable",
    "Agent",
    "AsyncAgent",
    "Clock",
    "Config",
    "ConfigError",
    "ConflictError",
    "CorruptRecord",
    "CycleError",
    "DeadlockError",
    "GlidingError",
    "IncompatibleFormat",
    "InvalidInput",
    "MemorySystem",
    "PermissionDenied",
    "Progress",
    "ScenarioFormatError",
    "SignatureError",
    "StorageError",
    "SystemClock",
    "Timeout",
    "VirtualClock",
    "__version__",
]

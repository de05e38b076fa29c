"""MemorySystem: wiring and lifecycle of one memory shared by a team of agents.

An orchestrator embeds the whole system in a few lines::

    with MemorySystem.open() as memory:          # temp dir, threads runtime
        planner = memory.agent("pa", "PA")
        checker = memory.agent("ca", "CA")
        checker.subscribe("review-requests")
        planner.publish("review-requests", {"artifact": "artifact:jwt"})
        print(checker.inbox())

The system owns the runtime (threads by default, the deterministic simulator
with ``runtime="sim"``), the clock, the configuration and the system actors;
each layer adds its actors here as it is built.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

from gliding_actors.agent import ROLES, Agent
from gliding_actors.bus import BUS_ACTOR, MemoryBus
from gliding_actors.clock import Clock, VirtualClock
from gliding_actors.config import Config
from gliding_actors.errors import ActorUnavailable, InvalidInput
from gliding_actors.runtime import Runtime, create_runtime

__all__ = ["MemorySystem"]


class MemorySystem:
    """One memory hierarchy and the actors that serve it. Use :meth:`open`."""

    def __init__(self, *, runtime: Runtime, config: Config, path: Path, owns_path: bool) -> None:
        self._runtime = runtime
        self._config = config
        self._path = path
        self._owns_path = owns_path
        self._agents: dict[str, Agent] = {}
        self._lock = threading.Lock()
        self._closed = False
        runtime.spawn(BUS_ACTOR, MemoryBus)

    @classmethod
    def open(
        cls,
        path: str | Path | None = None,
        config: Config | Mapping[str, Any] | None = None,
        runtime: str = "threads",
        *,
        clock: Clock | None = None,
        seed: int = 0,
        trace: int = 0,
    ) -> MemorySystem:
        """Open (or create) a memory at ``path``; a temporary directory when None.

        ``config`` is a :class:`Config` or a nested mapping of overrides.
        ``runtime`` is ``"threads"`` or ``"sim"``; ``seed`` drives the
        simulator's scheduling; ``clock`` is injected (a :class:`VirtualClock`
        by default on ``sim``); ``trace`` keeps that many recent protocol
        messages for failure reports on ``threads``.
        """
        if config is None:
            cfg = Config()
        elif isinstance(config, Config):
            cfg = config
        elif isinstance(config, Mapping):
            cfg = Config.from_dict(config)
        else:
            raise InvalidInput(f"config must be a Config or a mapping, not {type(config).__name__}")
        if runtime == "sim" and clock is None:
            clock = VirtualClock()
        rt = create_runtime(runtime, clock=clock, seed=seed, ask_timeout_s=cfg.runtime.ask_timeout_s, trace=trace)
        if path is None:
            where = Path(tempfile.mkdtemp(prefix="gliding-actors-"))
            owns = True
        else:
            where = Path(path)
            try:
                where.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                rt.shutdown()
                raise InvalidInput(f"cannot use {where} as the memory's directory: {exc}") from exc
            owns = False
        try:
            return cls(runtime=rt, config=cfg, path=where, owns_path=owns)
        except BaseException:
            rt.shutdown()
            raise

    # -- properties --------------------------------------------------------
    @property
    def runtime(self) -> Runtime:
        return self._runtime

    @property
    def config(self) -> Config:
        return self._config

    @property
    def clock(self) -> Clock:
        return self._runtime.clock

    @property
    def path(self) -> Path:
        """The directory holding the durable layers."""
        return self._path

    @property
    def closed(self) -> bool:
        return self._closed

    # -- agents ------------------------------------------------------------
    def agent(self, agent_id: str, role: str) -> Agent:
        """The handle of agent ``agent_id`` with ``role`` (SA, PA, DA, CA, AA or system).

        Asking again for the same id and role returns the same handle; the same
        id with another role is ``InvalidInput``.
        """
        if self._closed:
            raise ActorUnavailable("the memory system is closed")
        if not isinstance(agent_id, str) or not agent_id or agent_id.startswith("@") or any(
            c.isspace() for c in agent_id
        ):
            raise InvalidInput(f"an agent id is a non-empty string without spaces or a leading '@': {agent_id!r}")
        if role not in ROLES:
            raise InvalidInput(f"unknown role {role!r}; roles are {', '.join(ROLES)}")
        with self._lock:
            existing = self._agents.get(agent_id)
            if existing is not None:
                if existing.role != role:
                    raise InvalidInput(f"agent {agent_id!r} already has role {existing.role}, not {role}")
                return existing
            handle = Agent(self, agent_id, role)
            self._agents[agent_id] = handle
            return handle

    def agents(self) -> dict[str, Agent]:
        """Every agent handle created so far, by id."""
        with self._lock:
            return dict(self._agents)

    # -- lifecycle ---------------------------------------------------------
    def close(self) -> None:
        """Stop every actor; remove the directory if :meth:`open` made a temporary one."""
        if self._closed:
            return
        self._closed = True
        self._runtime.shutdown()
        if self._owns_path:
            shutil.rmtree(self._path, ignore_errors=True)

    def __enter__(self) -> MemorySystem:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<MemorySystem {state} runtime={self._runtime.kind} path={str(self._path)!r}>"

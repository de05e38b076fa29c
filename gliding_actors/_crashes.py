"""Crashing a memory on purpose: one actor (:meth:`CrashOps.crash`) or the whole process.

Part of the :class:`~gliding_actors.MemorySystem` façade (a mixin), kept apart
because it is the one part that reaches across every layer's actors: scenario
replay's ``crash`` op and the reliability tests use it; an orchestrator in
production does not.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from gliding_actors._supervision import SUPERVISOR_ACTOR
from gliding_actors.bus import BUS_ACTOR
from gliding_actors.coherence._home import DEFAULT_GRAPH, LayeredHome
from gliding_actors.coherence._hosting import SnapshotBoard, cache_name
from gliding_actors.config import Config
from gliding_actors.context._service import PREFETCH_ACTOR, SCHEDULER_ACTOR
from gliding_actors.errors import ActorCrashed, ActorUnavailable, InvalidInput, show
from gliding_actors.hyperspace._service import HYPERSPACE_ACTOR
from gliding_actors.l0 import L0Store
from gliding_actors.l1 import session_actor_name
from gliding_actors.l2._blackboard import BLACKBOARD_ACTOR
from gliding_actors.l2._graph import GraphStore
from gliding_actors.l2._graph_writer import GRAPH_ACTOR
from gliding_actors.l2._registry import LineGraphs
from gliding_actors.l3 import VIEWS_ACTOR, ProjectionService
from gliding_actors.runtime import Runtime

if TYPE_CHECKING:
    from gliding_actors.scenario._record import Recorder

__all__ = ["CrashOps"]


class CrashOps:
    """Fault injection of the façade: what it reads of the memory is declared here."""

    _closed: bool
    _runtime: Runtime
    _config: Config
    _path: Path
    _owns_path: bool
    _address: str | None
    _recorder: Recorder | None
    _graph_writer: bool
    _graph_lock: threading.Lock
    _l0: L0Store
    _homes: dict[str, LayeredHome]
    graph: GraphStore
    line_graphs: LineGraphs
    board: SnapshotBoard
    directories: tuple[str, ...]
    l3: ProjectionService
    lost_in_crash: list[str]
    agents: Callable[[], dict[str, Any]]
    supervision: Callable[[], dict[str, Any]]
    directory_for: Callable[[str], str]
    durable_version: Callable[..., int]
    _release: Callable[..., None]

    #: a new memory over the same L0, configuration, runtime kind, clock and seed
    _reopen: Callable[[], Self]

    def quiesce(self, timeout: float | None = None) -> None:
        """Wait until no message is in flight (on ``sim``: deliver them all now)."""
        self._runtime.wait_quiescent(timeout)

    def _home_versions(self, iris: Iterable[str], timeout: float) -> dict[str, int]:
        """Each line's version at home (in L2, else in L0), asked of its shard."""
        return self._ask_shards("l2.versions", iris, timeout)

    def _l0_versions(self, iris: Iterable[str], timeout: float) -> dict[str, int]:
        """Each line's version in L0, asked of its shard (whose home reads its L0)."""
        return self._ask_shards("l0.versions", iris, timeout)

    def _ask_shards(self, kind: str, iris: Iterable[str], timeout: float) -> dict[str, int]:
        by_shard: dict[str, list[str]] = {}
        for iri in iris:
            by_shard.setdefault(self.directory_for(iri), []).append(iri)
        rt = self._runtime
        asks = [rt.lookup(shard).ask({"t": kind, "iris": part}) for shard, part in sorted(by_shard.items())]
        found: dict[str, int] = {}
        for ask in asks:
            found.update(ask.get(timeout))
        return found

    def crash(self, target: str, *, timeout: float | None = None) -> dict[str, Any]:
        """Crash one actor on purpose and wait until the system serves again.

        For tests and scenario replay (op ``crash``). Messages in flight are
        delivered first, so the crash falls between protocol transactions.
        The protocol also recovers from a crash in the middle of one (a
        reborn cache answers what was sent to its dead self; a rebuilt
        directory places copies caught mid-transaction); the simulator's
        fault injector exercises that (``tools.reliability._faults``,
        docs/COHERENCE.md "Crashes").

        * ``agent:ID``: the agent's cache crashes and restarts empty; every
          directory forgets its copies, so the last version home holds comes
          back. Returns ``{"lost": [IRIs]}``: the lines whose only newest copy
          (a write-back write in M) died with it.
        * ``directory`` (every shard) or a shard name (``dir:0``): the directory
          crashes and rebuilds its sharers and owners from the agent caches
          before serving again; home (L2) and the caches keep every value, so
          nothing is lost. Returns ``{"lost": [], "notes": [...]}``.
        * ``bus``, ``blackboard``, ``l1:ID`` (the agent's session actor),
          ``l3`` (every worker, framer and the views actor), ``graph`` (the
          graph writer, when the memory has one), ``hyperspace``,
          ``context`` (scheduler and prefetcher), ``supervisor``: an
          ``InjectedCrash`` inside the actor; its supervisor rebuilds it over
          the state that outlives it (docs/RELIABILITY.md, "Supervision").
          Returns ``{"lost": [], "notes": [...]}``, the notes being what each
          rebuilt actor checked or repaired, or ``"NAME: stopped (...)"`` when
          the restart intensity was exceeded and it stays down.

        A whole process is :meth:`crash_process`. Other targets (``l0``,
        ``l2``: stores, not actors) are ``InvalidInput`` and change nothing.
        """
        if self._closed:
            raise ActorUnavailable("the memory system is closed")
        if not isinstance(target, str):
            raise InvalidInput(f"a crash target is a string, not {show(target)}")
        if target.startswith("agent:"):
            agent_id = target.removeprefix("agent:")
            if agent_id not in self.agents():
                raise InvalidInput(f"crash: no agent {show(agent_id)} (agents: {', '.join(sorted(self.agents()))})")
            victims = [cache_name(agent_id)]
        elif target == "directory":
            victims = list(self.directories)
        elif target in self.directories:
            victims = [target]
        else:
            victims = self._component_victims(target)  # InvalidInput for an unknown target
        wait = self._runtime.ask_timeout_s if timeout is None else timeout
        self.quiesce(wait)
        lost: list[str] = []
        if target.startswith("agent:"):
            view = self.board.holders().get(target.removeprefix("agent:"), {})
            modified = {iri: version for iri, (state, _value, version) in view.items() if state == "M"}
            at_home = self._home_versions(modified, wait)
            lost = sorted(iri for iri, version in modified.items() if version > at_home[iri])
        coherent = target.startswith("agent:") or target == "directory" or target in self.directories
        for name in victims:
            with contextlib.suppress(ActorCrashed):  # what we asked for
                # caches and directories crash in their own handler, the others in the supervisor's shell
                self._runtime.lookup(name).ask({"t": "crash"} if coherent else {"t": "supervision.crash"}).get(wait)
        self.quiesce(wait)
        for iri in lost:  # the registry recorded the lost write; home's version is the truth now
            self._forget_lost_version(iri)
        notes: list[str] = []
        for name in victims:
            ready = {"t": "ready"} if name in self.directories else {"t": "supervision.ping"}
            try:
                notes += self._runtime.lookup(name).ask(ready).get(wait)["notes"]
            except ActorUnavailable:  # the restart intensity was exceeded: it stays stopped
                notes.append(f"{name}: stopped ({self.supervision()['actors'][name]['last_error']})")
        return {"lost": lost, "notes": notes}

    def _component_victims(self, target: str) -> list[str]:
        """The actors crash target ``target`` names (besides caches and directories)."""
        if target.startswith("l1:"):
            agent_id = target.removeprefix("l1:")
            if agent_id not in self.agents():
                raise InvalidInput(f"crash: no agent {show(agent_id)} (agents: {', '.join(sorted(self.agents()))})")
            return [session_actor_name(agent_id)]
        named = {
            "bus": [BUS_ACTOR],
            "blackboard": [BLACKBOARD_ACTOR],
            "l3": [*self.l3.workers, *self.l3.framers, VIEWS_ACTOR],
            "hyperspace": [HYPERSPACE_ACTOR],
            "context": [SCHEDULER_ACTOR, PREFETCH_ACTOR],
            "supervisor": [SUPERVISOR_ACTOR],
        }
        if self._graph_writer:
            named["graph"] = [GRAPH_ACTOR]
        victims = named.get(target)
        if victims is None:
            raise InvalidInput(
                f"crash target {show(target)}: this build crashes 'agent:ID', 'l1:ID', 'directory', one of "
                f"{', '.join(self.directories)}, {', '.join(repr(n) for n in named)} here, "
                "and a whole process with crash_process() ('l0' and 'l2' are stores, not actors: they die with the process)"
            )
        return victims

    def _forget_lost_version(self, iri: str) -> None:
        with self._graph_lock:
            node = self.graph.node(iri)
        if node is not None:
            self.line_graphs.reset(iri, node.graph, node.version)
            return
        entry = self._l0.retrieve(iri, touch=False)
        if entry is not None:
            self.line_graphs.reset(iri, entry.named_graph or DEFAULT_GRAPH, entry.version)
        else:
            self.line_graphs.reset(iri, None, 0)

    def crash_process(self, *, timeout: float | None = None, quiesce: bool = True) -> Self:
        """Simulate the death of the whole process; return the memory reopened from L0.

        Nothing is flushed: every actor stops with its volatile state (agent
        caches, directories, the L2 node map and graph, the blackboard's
        tasks, locks and registrations, bus subscriptions and mailboxes), and
        a new system opens over the same L0 with the same configuration,
        runtime kind, clock and seed. Completed write-through writes and
        flushed lines survive; write-back data that never reached L0 is lost,
        and ``lost_in_crash`` on the new system lists those IRIs. Agents must
        be asked for again (:meth:`agent`); this handle is closed.

        ``quiesce=False`` kills it mid-run, as a real crash would: messages in
        flight die with the process and ops waiting on them fail with
        ``ActorUnavailable``. ``lost_in_crash`` then lists what the caches
        and home held newer than L0 at that instant; a write-back whose data
        was in a message is not in it. The promise that holds either way is
        the durability contract (docs/RELIABILITY.md): every completed
        write-through write and every line of a completed flush is in L0.
        """
        if self._closed:
            raise ActorUnavailable("the memory system is closed")
        wait = self._runtime.ask_timeout_s if timeout is None else timeout
        if quiesce:
            self.quiesce(wait)
        newest: dict[str, int] = {}
        for view in self.board.holders().values():
            for iri, (state, _value, version) in view.items():
                if state == "M":
                    newest[iri] = max(newest.get(iri, 0), version)
        in_l0: dict[str, int] | None = None
        if self._config.l0.sharded:
            # The homes live with their shards: asked, so messages still in flight are
            # delivered first (a sharded crash is taken between the shards' handlers).
            # A shard whose process is already gone (a lost node) took its dirty lines
            # with it: they are not known here. L0's versions are read after the reopen.
            for shard in self.directories:
                try:
                    dirty = self._runtime.lookup(shard).ask({"t": "l2.dirty"}).get(wait)
                except ActorUnavailable:
                    continue
                for iri, version in dirty:
                    newest[iri] = max(newest.get(iri, 0), int(version))
        else:
            for home in self._homes.values():
                for iri in home.dirty():
                    held = home.peek(iri)
                    if held is not None:
                        newest[iri] = max(newest.get(iri, 0), int(held["version"]))
            in_l0 = {iri: self._l0.retrieve_version(iri) for iri in newest}
        self._closed = True
        if self._recorder is not None:
            self._recorder.close()  # the reopened memory is not recorded (docs/RECORDING.md)
        self._release(save_index=False)  # the index dies unsaved; the reopened one reconciles with L0
        reopened = self._reopen()
        reopened._owns_path = self._owns_path
        if in_l0 is None:
            in_l0 = {iri: reopened.durable_version(iri, timeout=wait) for iri in newest}
        reopened.lost_in_crash = sorted(iri for iri, version in newest.items() if version > in_l0[iri])
        return reopened

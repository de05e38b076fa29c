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

import functools
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from gliding_actors._checks import check_iri, line_value_check
from gliding_actors._crashes import CrashOps
from gliding_actors._dataset import export_lines, parse_dataset, write_lines
from gliding_actors._expiry import SWEEPER_AGENT, ExpirySweeper, ExpiryTable
from gliding_actors._gc_pause import collection_paused
from gliding_actors._l0_layout import check_l0_layout, record_l0_layout
from gliding_actors._line_snapshot import LINE_SNAPSHOT, save_lines_on_close
from gliding_actors._open_args import checked_open_args
from gliding_actors._progress import ProgressFn, ProgressReporter
from gliding_actors._reopen import open_lines
from gliding_actors._supervision import SUPERVISOR_ACTOR, Supervision, SupervisorActor
from gliding_actors.agent import ROLES, Agent
from gliding_actors.bus import BUS_ACTOR, BusState, MemoryBus
from gliding_actors.clock import Clock, VirtualClock
from gliding_actors.coherence._cache import CacheController
from gliding_actors.coherence._distributed import ShardRecipe
from gliding_actors.coherence._home import DEFAULT_GRAPH, L2Stats, LayeredHome
from gliding_actors.coherence._hosting import (
    LINE_CHANGED,
    CacheActor,
    DirectoryActor,
    ModifyFunctions,
    SnapshotBoard,
    agent_of,
    cache_name,
)
from gliding_actors.coherence._messages import directory_shard
from gliding_actors.coherence._states import epoch_floor
from gliding_actors.config import Config
from gliding_actors.context._service import ContextService
from gliding_actors.errors import ActorUnavailable, InvalidInput, show
from gliding_actors.hyperspace import TextEmbedder
from gliding_actors.hyperspace._service import HyperspaceService
from gliding_actors.l0 import SHARDS_DIR, L0Store, is_valid_label
from gliding_actors.l1 import session_actor_name, start_session
from gliding_actors.l1._tokens import get_counter
from gliding_actors.l2._blackboard import BLACKBOARD_ACTOR, BlackboardActor, BlackboardState
from gliding_actors.l2._board_requests import Agents, Register
from gliding_actors.l2._graph import GraphStore
from gliding_actors.l2._graph_writer import GRAPH_ACTOR, GraphOutbox, GraphWriter
from gliding_actors.l2._permissions import PermissionMatrix
from gliding_actors.l2._registry import LineGraphs
from gliding_actors.l3 import ProjectionService
from gliding_actors.metrics._counters import SystemCounters
from gliding_actors.runtime import (
    DRIVER_ONLY,
    IN_DRIVER,
    Future,
    GatheredFuture,
    Runtime,
    create_runtime,
)
from gliding_actors.runtime._cell import check_actor_name

if TYPE_CHECKING:
    from gliding_actors.scenario._record import Recorder

__all__ = ["MemorySystem"]

#: the longest agent id (it names actors, archive IRIs and lock holders)
MAX_AGENT_ID = 200

class MemorySystem(CrashOps):
    """One memory hierarchy and the actors that serve it. Use :meth:`open`."""

    def __init__(
        self, *, runtime: Runtime, config: Config, path: Path, owns_path: bool, progress: ProgressReporter | None = None
    ) -> None:
        self._runtime = runtime
        self._config = config
        self._path = path
        self._owns_path = owns_path
        self._agents: dict[str, Agent] = {}
        #: IRIs whose newest write died with the process this memory was reopened after
        self.lost_in_crash: list[str] = []
        self._lock = threading.Lock()
        self._closed = False
        #: writes every agent-level op to a trace when opened with ``record=`` (docs/RECORDING.md)
        self._recorder: Recorder | None = None
        #: tells ``MemorySystem.open(progress=...)``'s function how the long steps advance
        self.progress = progress or ProgressReporter()
        recorded = check_l0_layout(path, config)
        self._l0 = L0Store(str(path / "l0"), clock=runtime.clock, config=config.l0)
        try:
            record_l0_layout(path, config, self._l0, recorded)
            #: this life's epoch: every write numbers its version above its floor (docs/COHERENCE.md)
            self._epoch = self._l0.reserve_epoch()
        except BaseException:
            self._l0.close()
            raise
        #: the graph is fed by messages (l2:graph) rather than written by the directories
        self._graph_writer = config.l2.graph_writer or config.l0.sharded
        self.graph = GraphStore(path / "l2" if config.l2.graph_on_disk else None)
        self._graph_lock = threading.Lock()
        #: the role x graph rights: the default table with ``config.permissions`` laid over it
        self.permissions = PermissionMatrix.default().merged(config.permissions)
        #: which named graph each line is in, for the agent handles' permission checks
        self.line_graphs = LineGraphs(DEFAULT_GRAPH)
        #: lines written with a time to live, deleted by a ``system`` agent once due (gliding_actors/_expiry.py)
        self.expiry = ExpirySweeper(
            ExpiryTable(runtime.clock),
            lambda: self.agent(SWEEPER_AGENT, "system"),
            self.line_graphs.version_of,
            config.runtime.ask_timeout_s,
        )
        self._snapshot_file = None if config.l0.sharded else path / LINE_SNAPSHOT  # a clean close's (one L0)
        #: where the lines came from: "snapshot" (what the last clean close saved) or "l0" (rebuilt)
        self.lines_loaded_from = open_lines(
            self._l0, self.graph, self.line_graphs, self.expiry.table, self.progress, self._snapshot_file
        )
        self.board = SnapshotBoard()
        self.modify_functions = ModifyFunctions()  # lent by agent handles, found by their caches
        #: the counters behind stats() (gliding_actors/metrics); tokens in the context layer's counter
        self.counters = SystemCounters(get_counter(config.context.counter))
        self.directories = tuple(f"dir:{i}" for i in range(config.coherence.directory_shards))
        #: each shard's epoch (a sharded L0's shards take their own; see _load_sharded_lines)
        self._epochs = dict.fromkeys(self.directories, self._epoch)
        #: each shard's home, kept across restarts of its directory actor
        self._homes: dict[str, LayeredHome] = {}
        #: with a sharded L0: each shard's recipe (it keeps the shard's home and L0)
        self._shard_recipes: dict[str, ShardRecipe] = {}
        #: the Ray cluster joined (``open(address=)``), for a reopen after crash_process
        self._address: str | None = None
        #: on Ray the directory shards run on the cluster's nodes, round robin
        self._nodes: list[str] = runtime.node_ids()
        #: the supervisor's record and restart policy (docs/RELIABILITY.md, "Supervision")
        self._supervision = Supervision(
            runtime.clock, max_restarts=config.runtime.max_restarts, window_s=config.runtime.restart_window_s
        )
        try:
            # IN_DRIVER: a shard on another node reports its crashes to it
            self.spawn_supervised(SUPERVISOR_ACTOR, lambda: SupervisorActor(self._supervision), placement=IN_DRIVER)
            # The bus's and the blackboard's state outlive their actors, as a directory's home does.
            bus_state = BusState()
            # line.changed is keyed by line: an L1 session hears only of the lines its turns cite
            keyed = {LINE_CHANGED: ("iri", "version")}
            # and an agent subscribed to it is told only of lines its role may read
            scoped = {LINE_CHANGED: "graph"}
            permissions = self.permissions

            def may_read(role: str, graph: str) -> bool:
                return permissions.allowed(role, graph, "read")

            self.spawn_supervised(
                BUS_ACTOR,
                lambda: MemoryBus(
                    self.graph,
                    self._graph_lock,
                    bus_state,
                    keyed=keyed,
                    scoped=scoped,
                    may_read=may_read,
                    max_inbox=config.agents.inbox_events,
                ),
            )
            agents_config = config.agents
            #: the blackboard's tasks, agents and locks (outlive its actor; stats() reads them)
            board_state = self.board_state = BlackboardState.new(
                heartbeat_timeout_s=agents_config.heartbeat_timeout_s, lock_lease_s=agents_config.lock_lease_s
            )
            self.spawn_supervised(
                BLACKBOARD_ACTOR,
                lambda: BlackboardActor(
                    heartbeat_timeout_s=agents_config.heartbeat_timeout_s,
                    lock_lease_s=agents_config.lock_lease_s,
                    state=board_state,
                ),
            )
            if self._graph_writer:
                graph_tally = {"applied": 0, "refused": 0}
                self.spawn_supervised(
                    GRAPH_ACTOR, lambda: GraphWriter(self.graph, self._graph_lock, graph_tally), placement=IN_DRIVER
                )
            for n, name in enumerate(self.directories):
                self.spawn_supervised(name, self._directory_factory(name), placement=self.node_for(n))
            if config.l0.sharded:
                self._load_sharded_lines()
            #: L3: projections (frames, views, the worker pool); docs/L3.md
            self.l3 = ProjectionService.start(self)
            #: Hyperspace: embeddings and hybrid search, fed by line.changed; docs/HYPERSPACE.md
            self.hyperspace = HyperspaceService.start(self)
            #: the MemoryScheduler and the Prefetcher (Agent.context / Agent.intent); docs/CONTEXT.md
            self.context = ContextService.start(self)
        except BaseException:
            self._l0.close()
            raise

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
        record: str | Path | None = None,
        address: str | None = None,
        progress: ProgressFn | None = None,
    ) -> MemorySystem:
        """Open (or create) a memory at ``path``; a temporary directory when None.

        ``config`` is a :class:`Config` or a nested mapping of overrides.
        ``runtime`` is ``"threads"``, ``"sim"`` or ``"ray"``; ``seed`` drives the
        simulator's scheduling; ``clock`` is injected (a :class:`VirtualClock`
        by default on ``sim``); ``trace`` keeps that many recent protocol
        messages for failure reports on ``threads``; ``record`` is a file
        to write every agent-level operation to, as JSON lines
        (docs/RECORDING.md; ``gliding-actors convert`` makes it a scenario).

        On ``"ray"`` (``pip install 'gliding-actors[ray]'``) the directory
        shards run on the cluster's nodes, each over its own L0 (``l0.sharded``
        is implied), and so do L3's framers (``l3.framers`` is implied); every
        other actor runs in this process (docs/SCALING.md).
        ``address`` is the cluster to join (``host:port``); without it a
        process already connected to Ray uses that connection, else a local
        one-node cluster on 127.0.0.1 is started and stopped with the memory.
        ``progress`` is called with a :class:`Progress` as the long steps of
        opening a large memory advance (gliding_actors/_progress.py).
        """
        cfg, reporter = checked_open_args(
            path=path, config=config, runtime=runtime, clock=clock, seed=seed, trace=trace, record=record,
            address=address, progress=progress,
        )
        if runtime == "sim" and clock is None:
            clock = VirtualClock()
        rt = create_runtime(
            runtime, clock=clock, seed=seed, ask_timeout_s=cfg.runtime.ask_timeout_s, trace=trace, address=address
        )
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
            with collection_paused():  # a large memory's rebuild is a burst of acyclic objects
                system = cls(runtime=rt, config=cfg, path=where, owns_path=owns, progress=reporter)
        except BaseException:
            rt.shutdown()
            raise
        system._address = address
        if record is not None:
            from gliding_actors.scenario._record import Recorder

            try:
                system._recorder = Recorder.attach(system, record)
            except BaseException:
                system.close(flush=False)
                raise
        return system

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
    def agent(self, agent_id: str, role: str, *, resume: bool = True) -> Agent:
        """The handle of agent ``agent_id`` with ``role`` (SA, PA, DA, CA, AA or system).

        Asking again for the same id and role returns the same handle; the same
        id with another role is ``InvalidInput``.

        ``resume``: the first handle of an agent in this memory's life takes back
        the session it left open in L0 (docs/L1.md); False closes it and starts anew.
        """
        if type(resume) is not bool:
            raise InvalidInput(f"resume is true or false, not {show(resume)}")
        if self._closed:
            raise ActorUnavailable("the memory system is closed")
        # checked in full before anything is made: a refused id changes nothing
        if (
            not is_valid_label(agent_id)
            or agent_id.startswith("@")
            or any(c.isspace() for c in agent_id)
            or len(agent_id) > MAX_AGENT_ID
        ):
            raise InvalidInput(
                f"an agent id is a non-empty string of at most {MAX_AGENT_ID} characters, without spaces, control "
                f"characters, lone surrogates or a leading '@', not {show(agent_id)}"
            )
        if not isinstance(role, str) or role not in ROLES:
            raise InvalidInput(f"unknown role {show(role)}; roles are {', '.join(ROLES)}")
        if agent_id == SWEEPER_AGENT and role != "system":  # the id the memory deletes expired lines as
            raise InvalidInput(f"agent id {SWEEPER_AGENT!r} is the memory's own (role system)")
        with self._lock:
            existing = self._agents.get(agent_id)
            if existing is not None:
                if existing.role != role:
                    raise InvalidInput(f"agent {show(agent_id)} already has role {existing.role}, not {role}")
                return existing
            self._spawn_cache(agent_id, role)
            start_session(  # L1: the agent's summary chain
                agent_id,
                role,
                config=self.config.l1,
                store=self._l0,
                clock=self.clock,
                spawn=self.spawn_supervised,
                bus=self._runtime.lookup(BUS_ACTOR),
                embedder=TextEmbedder(self.hyperspace.engine.chain),  # summaries and queries in search's space
            )
            self._runtime.lookup(session_actor_name(agent_id)).ask({"t": "resume", "fresh": not resume}).get()
            self._runtime.lookup(BLACKBOARD_ACTOR).ask(Register(agent_id, role).message()).get()
            handle = Agent(self, agent_id, role)
            self.context.note_agent(agent_id, role)
            if self._recorder is not None:
                self._recorder.agent_added(handle)
            self._agents[agent_id] = handle
            return handle

    def _load_sharded_lines(self) -> None:
        """Wait until every shard has shipped its L0's lines to the graph; then index them.

        With a sharded L0 the graph is rebuilt from the shards, not from this
        process's L0: each shard's first build queues its lines, and its
        ``ready`` is answered once the graph writer has applied them.
        """
        rt = self._runtime
        wait = rt.ask_timeout_s
        asks = [(name, rt.lookup(name).ask({"t": "ready"})) for name in self.directories]
        for name, ask in asks:
            self._epochs[name] = ask.get(wait)["epoch"]
        with self._graph_lock:
            lines = self.graph.lines()
        for node in lines:
            if node.value is not None:
                self.line_graphs.record(node.iri, node.graph, node.version)

    def _version_floor(self) -> int | Callable[[str], int]:
        """Where a cache numbers a line's next version from: its shard's epoch's floor."""
        floors = {name: epoch_floor(epoch) for name, epoch in self._epochs.items()}
        if len(set(floors.values())) == 1:
            return next(iter(floors.values()))
        directory_for = self.directory_for
        return lambda iri: floors[directory_for(iri)]

    def _directory_factory(self, name: str) -> Callable[[], DirectoryActor]:
        """Build the shard's actor; on a restart, over the same home.

        The home is L2 (the node map and the graph), a layer of its own: a
        crashed directory loses only its protocol state, and the rebuilt one
        asks every cache that ever talked to it (``home.caches``: nothing of the
        system's is closed over) what it holds before serving again.
        """
        # L2's node capacity is split evenly, at least one line per shard: a
        # shard drops only its own lines, so no actor touches another's map.
        capacity = max(1, self._config.l2.node_capacity // len(self.directories))
        if self._config.l0.sharded:
            # The shard opens its own L0 and home where it runs (a picklable recipe).
            # In another process it has that process's clock and counts its own messages.
            here = not self._nodes
            recipe = self._shard_recipes[name] = ShardRecipe(
                name,
                str(self._path / SHARDS_DIR),
                capacity=capacity,
                l0_config=self._config.l0,
                clock=self._runtime.clock if here else None,
                graph_writer=True,
                tally=self.counters.actor(name) if here else None,
            )
            return recipe
        home = self._homes.get(name)
        if home is None:
            # With its own writer the graph is fed by messages, as from a shard in another process.
            graph = GraphOutbox() if self._graph_writer else self.graph
            home = self._homes[name] = LayeredHome(
                self._l0, graph, self._graph_lock, capacity=capacity, epoch=self._epoch
            )
        built = 0

        def build() -> DirectoryActor:
            nonlocal built
            built += 1
            # The census asks the caches that ever talked to this shard (kept by its home).
            caches = None if built == 1 else tuple(sorted(home.caches))
            return DirectoryActor(name, home, recover_from=caches, tally=self.counters.actor(name))

        return build

    def _spawn_cache(self, agent_id: str, role: str) -> None:
        """Start ``agent_id``'s cache; it judges the agent's writes with ``role``'s rights."""
        name = cache_name(agent_id)
        coherence = self._config.coherence
        board = self.board
        permissions = self.permissions

        built = 0

        def build() -> CacheActor:
            nonlocal built
            built += 1
            board.clear(agent_id)
            controller = CacheController(
                name,
                self.directory_for,
                coherence.cache_lines,
                coherence.critical_tags,
                incarnation=built - 1,
                may=None if role == "system" else functools.partial(permissions.allowed, role),
                role=role,
                version_floor=self._version_floor(),
                check_value=line_value_check(self._config.l0.max_node_bytes, self.graph.check_value),
            )
            # Rebuilt after a crash: the directories must first forget its old copies.
            reclaim = self.directories if built > 1 else ()
            return CacheActor(
                agent_id, controller, board, reclaim_from=reclaim, tally=self.counters.actor(name),
                functions=self.modify_functions,
            )

        # In the agents' own process on every backend: a read hit is a lookup in
        # the board this cache publishes to, never a message (on Ray, IN_DRIVER).
        self.spawn_supervised(name, build, placement=IN_DRIVER)

    def node_for(self, index: int) -> str | None:
        """The cluster node the ``index``-th of a pool of actors goes to (round robin;
        None on a runtime that runs every actor in this process)."""
        return self._nodes[index % len(self._nodes)] if self._nodes else None

    def spawn_supervised(self, name: str, factory: Callable[[], Any], *, placement: str | None = None) -> None:
        """Spawn one of the system's actors under the supervisor.

        Every actor the system runs is spawned here: rebuilt from ``factory``
        after a crash while the restart intensity allows it
        (``runtime.max_restarts`` within ``runtime.restart_window_s``), stopped
        for good after that; the supervisor (itself included) is told of each
        crash. See :mod:`gliding_actors._supervision`. ``placement`` is the
        runtime's (:meth:`Runtime.spawn`); on Ray, None is this process
        (``DRIVER_ONLY``: the services share its graph and boards, and only the
        actors the shards send to are ``IN_DRIVER``, behind a relay), and an actor
        placed on a node is built there from a picklable ``factory``, its
        restarts gated there (:class:`~gliding_actors._supervision.RemoteSupervised`).
        """
        check_actor_name(name)
        if not callable(factory):
            raise InvalidInput(f"spawn_supervised: factory builds the actor's behaviour, not {show(factory)}")
        if placement is not None and not isinstance(placement, str):
            raise InvalidInput(f"spawn_supervised: placement is a node id or None, not {show(placement)}")
        on_a_node = bool(self._nodes) and placement not in (None, IN_DRIVER, DRIVER_ONLY)
        if self._nodes and placement is None:
            placement = DRIVER_ONLY
        supervise = self._supervision.supervise_remote if on_a_node else self._supervision.supervise
        self._runtime.spawn(
            name, supervise(name, factory), supervisor=SUPERVISOR_ACTOR, restart=True, placement=placement
        )

    def supervision(self) -> dict[str, Any]:
        """The supervisor's record: totals (``crashes``, ``restarts``, ``stopped``)
        and per actor ``{crashes, restarts, last_error, last_crash_at, status}``."""
        return self._supervision.summary()

    def directory_for(self, iri: str) -> str:
        """The directory shard that is home of ``iri``."""
        if len(self.directories) == 1:
            return self.directories[0]
        return directory_shard(iri, self.directories)

    @property
    def graph_lock(self) -> threading.Lock:
        """The lock every writer of :attr:`graph` holds; a reader of its listings
        (``lines()``, ``graphs()``, ``quads_of`` across lines) takes it too."""
        return self._graph_lock

    @property
    def l0(self) -> L0Store:
        """The durable store (reads are safe from any thread): every line and L1's archives,
        or with ``l0.sharded`` the archives only (see :meth:`line_store`)."""
        return self._l0

    def line_store(self, iri: str) -> L0Store:
        """The L0 store that holds line ``iri``: :attr:`l0`, or with ``l0.sharded`` its shard's.

        For readers in this process (invariant checks, tests): a shard's store
        is opened by the shard where it runs, and ``ActorUnavailable`` says it
        is not here (not opened yet, or in another process).
        """
        if not self._config.l0.sharded:
            return self._l0
        recipe = self._shard_recipes.get(self.directory_for(iri))
        store = None if recipe is None else recipe.store
        if store is None:
            raise ActorUnavailable(f"the L0 shard of {iri!r} is not open in this process")
        return store

    def durable_version(self, iri: str, *, timeout: float | None = None) -> int:
        """The version of line ``iri`` in L0 (a delete's for a tombstone, 0 if never written).

        Read here when the store holding it is in this process (:meth:`line_store`),
        else asked of its shard (on Ray).
        """
        try:
            return self.line_store(iri).retrieve_version(iri)
        except ActorUnavailable:
            wait = self._runtime.ask_timeout_s if timeout is None else timeout
            return self._l0_versions([iri], wait)[iri]

    def line_copy(self, iri: str) -> tuple[dict[str, Any] | None, int, list[str], str] | None:
        """The newest copy home took of ``iri`` as ``(value, version, tags, graph)``.

        For a reader that has recalled dirty lines first (search indexes what a
        write left at home). Answered from the L2 graph's node map, not from
        the directory homes: every version a home takes is put there with its
        tags and graph (and the map is rebuilt from L0 on open), and it stays
        when a home drops the line for capacity, so it is the same answer
        without reading another actor's state (on Ray the homes live in other
        processes). No message and no lock: ``graph.node`` reads one entry,
        and a write swaps an entry whole, so value, version, tags and graph
        are always one version's. (With ``l2.graph_writer`` the puts reach the
        graph by message, and a recall answers only once they are applied, so
        "recall first" still covers them.) Only an IRI the graph does not know
        falls back to L0 (a line written to L0 after open by another path).

        ``value`` None is a tombstone, with the version of the delete (also
        once the home dropped it: the old home-then-L0 read answered None
        there); None is a line neither the graph nor L0 holds.
        """
        check_iri(iri)
        node = self.graph.node(iri)
        if node is not None:
            return node.value, node.version, list(node.tags), node.graph
        entry = self._l0.retrieve(iri, touch=False)
        if entry is None:
            # L0 lists no tombstones (so the graph rebuilt from it holds none), but keeps their version
            deleted = self._l0.retrieve_version(iri)
            return None if deleted == 0 else (None, deleted, [], DEFAULT_GRAPH)
        return entry.content, entry.version, list(entry.tags), entry.named_graph or DEFAULT_GRAPH

    def stats(self, *, timeout: float | None = None) -> dict[str, Any]:
        """Per-layer figures to watch in production: hit rates, miss latencies, messages, tokens saved.

        A plain dict (docs/METRICS.md lists every key); the Prometheus
        exporter (``gliding_actors.metrics.serve``) reads it on each scrape.
        Counting costs the hot path nothing it did not have: a read hit is
        still one board lookup, with one more lookup in the handle's own map.
        """
        from gliding_actors.metrics._stats import collect

        return collect(self, timeout=timeout)

    def tallies_elsewhere(self, *, timeout: float | None = None) -> dict[str, dict[str, dict[str, int]]]:
        """What the directory shards running in other processes (on Ray) counted:
        ``{shard: {"sent", "writes"}}``, asked of each; empty when every shard
        counts in this process. A shard not running is left out."""
        if not self._nodes:
            return {}
        rt = self._runtime
        found: dict[str, dict[str, dict[str, int]]] = {}
        for name in self.directories:
            try:
                found[name] = rt.lookup(name).ask({"t": "tally"}).get(timeout)
            except ActorUnavailable:
                continue
        return found

    def l2_stats(self, *, timeout: float | None = None) -> dict[str, L2Stats]:
        """Each directory shard's L2 node map: capacity, size and counters (``LayeredHome.stats``).

        Asked of each shard (its home lives where the shard runs, another
        process on Ray); a shard that is not running (its supervisor stopped
        it) is left out rather than counted as empty.
        """
        rt = self._runtime
        asks = [(name, rt.lookup(name).ask({"t": "l2.stats"})) for name in self.directories]
        found: dict[str, L2Stats] = {}
        for name, ask in asks:
            try:
                found[name] = ask.get(timeout)
            except ActorUnavailable:
                continue
        return found

    # -- system-wide operations --------------------------------------------------
    def submit_inspect(self, iri: str) -> Future[dict[str, Any]]:
        """Everything known about one line: directory, caches, L2 and L0 copies."""
        if not isinstance(iri, str) or not iri:
            raise InvalidInput(f"an IRI is a non-empty string, not {show(iri)}")
        rt = self._runtime
        agents = sorted(self.agents())
        parts: list[Future[Any]] = [rt.lookup(self.directory_for(iri)).ask({"t": "inspect", "iri": iri})]
        parts += [rt.lookup(cache_name(a)).ask({"t": "state", "iri": iri}) for a in agents]

        def combine(values: list[Any]) -> dict[str, Any]:
            directory = values[0]
            return {
                "directory": directory["directory"],
                "owner": agent_of(directory["owner"]),
                "sharers": sorted(str(agent_of(s)) for s in directory["sharers"]),
                "caches": dict(zip(agents, values[1:], strict=True)),
                "l2": directory["l2"],
                "l0": directory["l0"],  # the shard's home reads its L0 (its own, when sharded)
            }

        return GatheredFuture(parts, combine)

    def inspect(self, iri: str, *, timeout: float | None = None) -> dict[str, Any]:
        return self.submit_inspect(iri).get(timeout)

    def may_read(self, role: str, iri: str) -> bool:
        """May ``role`` read line ``iri`` (in its current named graph, ``shared`` if unknown)?

        The one question every read-like path asks before it shows a node:
        read, and the later project, search and context layers. Unknown roles
        are ``InvalidInput``, never False.
        """
        return self.permissions.allowed(role, self.line_graphs.graph_of(check_iri(iri)), "read")

    def readable_graphs(self, role: str) -> list[str]:
        """The named graphs holding data that ``role`` may read."""
        with self._graph_lock:
            known = self.graph.graphs()
        return self.permissions.readable_graphs(role, known)

    def submit_recall(self) -> Future[int]:
        """Bring every dirty line home (owners keep an S copy); answers how many moved."""
        rt = self._runtime
        parts = [rt.lookup(name).ask({"t": "recall", "iris": None}) for name in self.directories]
        return GatheredFuture(parts, lambda fetched: sum(len(f) for f in fetched))

    def submit_team(self) -> Future[dict[str, Any]]:
        """Every registered agent's ``{role, status, stale}`` (stale agents' locks are released)."""
        return self._runtime.lookup(BLACKBOARD_ACTOR).ask(Agents().message())

    def team(self, *, timeout: float | None = None) -> dict[str, dict[str, Any]]:
        """Blocking :meth:`submit_team`: ``{agent id: {role, status, stale}}``."""
        result: dict[str, dict[str, Any]] = self.submit_team().get(timeout)["agents"]
        return result

    def submit_flush(self, iris: Iterable[str] | None = None) -> Future[int]:
        """Write down to L0 every line newer in a cache or in L2 than in L0.

        Each directory first recalls the dirty lines agents hold (they keep an
        S copy), then writes its home's newer lines to L0 with sync, as one
        batch. ``iris`` limits this to those lines (a task's, when it
        completes): each shard is asked only about the lines it is home of, and
        a shard with none is not asked. Answers how many lines were written.
        """
        rt = self._runtime
        if iris is None:
            scope: dict[str, list[str] | None] = dict.fromkeys(self.directories)
        else:
            if isinstance(iris, str):
                raise InvalidInput("flush: iris is a list of IRIs, not one string")
            if not isinstance(iris, Iterable):
                raise InvalidInput(f"flush: iris is a list of IRIs, not {show(iris)}")
            scope = {}
            listed = list(iris)
            for iri in listed:  # checked before set(): a dict or list is unhashable (fuzzing found it)
                if not isinstance(iri, str) or not iri:
                    raise InvalidInput(f"flush: an IRI is a non-empty string, not {show(iri)}")
            for iri in sorted(set(listed)):
                shard = scope.setdefault(self.directory_for(iri), [])
                assert shard is not None
                shard.append(iri)
        parts = [rt.lookup(name).ask({"t": "flush", "iris": part}) for name, part in scope.items()]
        return GatheredFuture(parts, lambda written: sum(len(w) for w in written))

    def flush(self, *, timeout: float | None = None) -> int:
        """Blocking :meth:`submit_flush`; returns how many lines were written."""
        return self.submit_flush().get(timeout)

    def sweep_expired(self) -> int:
        """Delete every line whose time to live ran out (each read sweeps what is due anyway); how many."""
        return self.expiry.sweep()

    def export(self, format: str = "jsonld", *, graph: str | None = None, timeout: float | None = None) -> str:
        """Every live line (of ``graph`` only, if given) as a ``jsonld`` or ``nquads`` document (docs/L2.md).

        Dirty copies are recalled first; the same data exports byte for byte the same.
        """
        self.submit_recall().get(timeout)
        with self._graph_lock:
            lines = self.graph.lines()
        return export_lines(lines, format, graph)

    def import_dataset(
        self, text: str, format: str, *, role: str = "system", agent: str | None = None, timeout: float | None = None
    ) -> dict[str, Any]:
        """Write an exported dataset's lines as agent ``agent`` (default ``import-<role>``); ``{lines, graphs}``.

        The normal write path, permissions and all; every line is checked
        before the first is written, so a refused dataset changes nothing.
        """
        return write_lines(
            parse_dataset(text, format),
            lambda: self.agent(agent or f"import-{role.lower()}", role),
            role=role,
            allowed=self.permissions.allowed,
            known=self.line_graphs.known,
            check_value=self.graph.check_value,
            max_node_bytes=self.config.l0.max_node_bytes,
            timeout=timeout,
        )

    def _reopen(self) -> MemorySystem:
        """A new memory over the same L0, configuration, runtime kind, clock and seed (after a crash)."""
        runtime = self._runtime
        seed = getattr(runtime, "seed", 0)
        return MemorySystem.open(
            self._path, self._config, runtime.kind, clock=runtime.clock, seed=seed, address=self._address
        )

    def agents(self) -> dict[str, Agent]:
        """Every agent handle created so far, by id."""
        with self._lock:
            return dict(self._agents)

    # -- lifecycle ---------------------------------------------------------
    def _release(self, *, save_index: bool, snapshot: bool = False) -> None:
        """Stop every actor, then let go of every store (``snapshot``: of the lines, for the next open)."""
        self._runtime.shutdown()
        self.hyperspace.close(save=save_index)
        file = self._snapshot_file if snapshot else None  # L0 holds every line once a close flushed them
        token = None if file is None else save_lines_on_close(self._l0, self.graph, DEFAULT_GRAPH, file)
        self._l0.close(clean_mark=token)
        self.graph.close()

    def close(self, *, flush: bool = True, timeout: float | None = None) -> None:
        """Write dirty lines down to L0 (unless ``flush=False``), then stop every actor.

        A clean close loses nothing: write-back data still held in agents'
        caches is recalled and made durable first; then it saves a snapshot of
        the lines, which the next open loads if L0 is as the close left it.
        ``flush=False`` is for a memory that is thrown away. The directory is
        removed when :meth:`open` made a temporary one.
        """
        if self._closed:
            return
        self._closed = True
        if self._recorder is not None:
            self._recorder.close()  # the closing flush is not an op of the trace
        flushed = False
        try:
            if flush and not self._owns_path:
                self.submit_flush().get(timeout)
                flushed = True
        finally:
            self._release(save_index=not self._owns_path, snapshot=flushed)
        if self._owns_path:
            shutil.rmtree(self._path, ignore_errors=True)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<MemorySystem {state} runtime={self._runtime.kind} path={str(self._path)!r}>"

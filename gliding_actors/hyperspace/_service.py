"""The hyperspace engine inside a :class:`~gliding_actors.MemorySystem`: its actor, feed and lifecycle.

How writes reach the engine (asynchronously, never on a writer's path):

* The **line registry** (``memory.line_graphs``) calls :meth:`HyperspaceService._recorded`
  when a write, cas or delete completes — before the writer's caller sees the
  result. It only notes ``iri -> version`` in :attr:`pending` (a dict under a
  lock; no message, no embedding).
* The actor ``hyperspace`` is subscribed (push) to the bus topic
  ``line.changed``. Each event makes it index every pending line whose copy
  at home (L2, else L0) is as new as the write: write-through lines at once,
  write-back ones when a recall or flush brings them home. For a write still
  in its writer's cache it embeds the value from the writer's published
  snapshot ahead of time (:meth:`HyperspaceEngine.warm`), so the later
  indexing costs a cache hit, not an embedding.
* **L0-only nodes** (L1's archived turns and sessions, written straight to L0)
  are not lines: L0 hands each one written to :meth:`HyperspaceService.notify`,
  and the actor, told once per batch, indexes them as they come (a search
  indexes whatever is still pending before it ranks).

A **search** is coherent like a SPARQL query: it first recalls every dirty
line home, then the actor catches up (every line the registry recorded before
the search began is now at home, and is indexed) and only then ranks. Results
are confined to the named graphs the asker's role may read, and each line is
checked against the registry (``MemorySystem.may_read``) as a read would be.

New vectors enter each space's HNSW graph on one worker thread (``indexing:
thread``), a vector at a time, while searches score the few not yet in it
exactly; on the deterministic simulator they go in inline (``auto``), in the
order they came, so a replay stays byte-for-byte reproducible.
:meth:`HyperspaceService.close` stops the worker (joining it) and saves the
engine under ``<memory>/hyperspace``; the next open loads it and reconciles
it with L0 (version and text hash per node), so only what changed is
embedded again.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
import urllib.parse
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gliding_actors._heap import trim_heap
from gliding_actors.bus import BUS_ACTOR
from gliding_actors.coherence._hosting import LINE_CHANGED, unpack_value
from gliding_actors.errors import EmbeddingError, GlidingError, InvalidInput, Timeout, show
from gliding_actors.hyperspace._embedders import EmbedderChain
from gliding_actors.hyperspace._engine import HyperspaceEngine, _digest, embed_batch, parse_filters
from gliding_actors.hyperspace._keywords import KeywordIndex
from gliding_actors.hyperspace._text import node_text
from gliding_actors.l1._archive import ARCHIVE_GRAPH, ARCHIVE_PREFIX, is_archive_iri, searchable
from gliding_actors.runtime import ChainedFuture, Context, Future

if TYPE_CHECKING:
    from gliding_actors._ports import MemoryPorts

__all__ = ["HYPERSPACE_ACTOR", "HyperspaceActor", "HyperspaceService", "check_search_args"]

HYPERSPACE_ACTOR = "hyperspace"
_DIR = "hyperspace"
#: inserts between two looks at whether the memory is closing (a few tens of milliseconds)
_INDEX_CHUNK = 128
#: the heap is trimmed once this many inserts, or a tenth of the vectors indexed, happened since the
#: last trim: a growing memory trims about 35 times on its way to 50,000 lines, not once per batch
_TRIM_AFTER = 1000
_TRIM_GROWTH = 0.1
_STOP = object()


def check_search_args(text: object, k: object, filters: object) -> tuple[str, int, dict[str, Any] | None]:
    """Validate a search before anything is sent: :class:`InvalidInput` naming the argument."""
    if not isinstance(text, str):
        raise InvalidInput(f"search text is a string, not {type(text).__name__}", path=("text",))
    if isinstance(k, bool) or not isinstance(k, int) or k < 1 or k > 10_000:
        raise InvalidInput(f"search k is an integer in [1, 10000], not {show(k)}", path=("k",))
    parse_filters(filters)  # type: ignore[arg-type]  # raises on bad filters
    if filters is not None and not isinstance(filters, Mapping):
        raise InvalidInput("search filters are an object")
    return text, k, None if filters is None else dict(filters)


class HyperspaceService:
    """The engine of one memory, its feed and its persistence. ``memory.hyperspace`` holds it."""

    def __init__(self, memory: MemoryPorts) -> None:
        self._memory = memory
        self.config = memory.config.hyperspace
        self.path = Path(memory.path) / _DIR
        self.engine = HyperspaceEngine(
            self.config, EmbedderChain.from_config(self.config), memory.runtime.clock.now, keyword_path=self._keyword_dir
        )
        self._lock = threading.Lock()
        #: iri -> newest version the registry recorded and the engine has not indexed yet
        self.pending: dict[str, int] = {}
        #: L0-only nodes handed over with :meth:`notify` (L0 tells of every archived turn written)
        self._pending_l0: set[str] = set()
        #: the actor is up and may be told of new archives, and has been told of those pending (under ``_lock``)
        self._live = False
        self._archives_told = False
        #: typed-node / subClassOf writes indexed since the Poincaré model was last brought up to date
        #: (a search retrains only from ``structure_refresh_after`` of them: see :meth:`refresh_structure`)
        self.structure_changes = 0
        #: no refresh since open: the first search brings a loaded (or absent) model up to the graph
        self._structure_unchecked = True
        deterministic = memory.runtime.deterministic
        mode = self.config.indexing
        self.threaded = mode == "thread" or (mode == "auto" and not deterministic)
        self._jobs: queue.Queue[Any] = queue.Queue()
        #: spaces queued for the worker to index (not queued twice)
        self._indexing: set[str] = set()
        #: inserts by the worker since it last trimmed the heap (the worker's own)
        self._inserted_since_trim = 0
        self._worker: threading.Thread | None = None
        mode = self.config.embeddings
        #: texts are embedded by a worker thread (see the ``embeddings`` config key)
        self.deferred = mode == "thread" or (mode == "auto" and not deterministic)
        #: texts wait until a search (or a catch-up request) needs them, then are embedded on the
        #: actor's turn: only a line's newest text is ever embedded, and a replay stays deterministic
        self.lazy = mode == "search" or (mode == "auto" and deterministic)
        #: ``(iri, digest, text)`` for the embed worker; None stops it
        self._to_embed: queue.Queue[tuple[str, str, str] | None] = queue.Queue()
        #: vectors the worker made, installed by the actor at its next catch-up: (space, iri, digest, vector)
        self._embedded: list[tuple[str, str, str, Any]] = []
        #: texts the worker could not embed with any embedder: (iri, digest)
        self._refused: list[tuple[str, str]] = []
        self._embedder: threading.Thread | None = None
        #: each line's newest text handed to the worker and not yet embedded (under ``_lock``): any
        #: other text of the line still queued is skipped, so a backlog costs one embedding per line
        self._newest: dict[str, str] = {}
        #: texts queued for the worker or in its hands, and texts it has finished (under ``_lock``)
        self._unfinished = 0
        self._finished = 0
        self._closed = False
        #: failures of the index worker and of saves (kept, never raised on a writer)
        self.index_errors: list[str] = []
        #: searches answered (MemorySystem.stats(); written by the hyperspace actor only)
        self.searches = 0
        #: texts the embed worker skipped: their line was rewritten while they were queued, or its
        #: newest text already has its vector (a warm-up and the line coming home queue it twice)
        self.superseded = 0
        #: what the open did with the keyword index on disk: ``new`` (nothing saved), ``reused``
        #: (the files the documents were saved with) or ``rebuilt`` (from the documents' texts)
        self.keyword_index = "new"

    @classmethod
    def start(cls, memory: MemoryPorts) -> HyperspaceService:
        """Load the saved engine, reconcile it with L0, spawn the actor, subscribe it (waits for the bus)."""
        service = cls(memory)
        service._load()
        # archived turns are written straight to L0: it tells us of each one (from before the
        # listing below, so none falls between), and no catch-up lists them all again
        memory.l0.add_listener(ARCHIVE_PREFIX, service.notify)
        service._reconcile()
        if service.threaded:
            service._worker = threading.Thread(target=service._work, name="hyperspace-index", daemon=True)
            service._worker.start()
        if service.deferred:
            service._embedder = threading.Thread(target=service._embed_work, name="hyperspace-embed", daemon=True)
            service._embedder.start()
            service._queue_embedding(service.engine.take_new_waiting())  # saved while they waited
        runtime = memory.runtime
        memory.spawn_supervised(HYPERSPACE_ACTOR, lambda: HyperspaceActor(service))
        with service._lock:
            service._live = True
        if service._pending_l0:
            service._tell_archives()
        runtime.lookup(BUS_ACTOR).ask(
            {"type": "subscribe", "topic": LINE_CHANGED, "subscriber": HYPERSPACE_ACTOR, "mode": "push"}
        ).get()
        memory.line_graphs.add_listener(service._recorded)
        return service

    # -- the feed ------------------------------------------------------------------------
    def _recorded(self, iri: str, version: int, forced: bool) -> None:
        """The registry's listener (any thread, must be quick): note the line as pending."""
        with self._lock:
            if forced or version > self.pending.get(iri, -1):
                self.pending[iri] = version

    def notify(self, iri: str) -> None:
        """Index L0-only node ``iri`` (an archive a layer wrote straight to L0) soon, on the actor.

        The actor is told once per batch (whatever arrives while it indexes
        is the next batch), so archives are indexed while they are written
        instead of by the next search, which would wait for all of them.
        """
        with self._lock:
            self._pending_l0.add(iri)
        self._tell_archives()

    def _tell_archives(self) -> None:
        """Tell the actor to index the archives pending, unless it was told already (or is not up)."""
        with self._lock:
            if self._archives_told or not self._live:
                return
            self._archives_told = True
        try:
            self._memory.runtime.lookup(HYPERSPACE_ACTOR).tell({"t": "index_archives"})
        except GlidingError:  # closing: the next catch-up, or the next open, indexes them
            with self._lock:
                self._archives_told = False

    def index_archives(self) -> int:
        """The actor's half of :meth:`notify`: index the archives handed over so far (not the lines)."""
        with self._lock:
            self._archives_told = False
        return self.catch_up(strict=False, archives_only=True)

    def on_event(self, iri: str, version: int, agent: str | None) -> None:
        """A ``line.changed`` event (on the actor): index what is home, warm what is not."""
        self._recorded(iri, version, False)
        self.catch_up(strict=False, only=iri)
        with self._lock:
            waiting = self.pending.get(iri)
        if waiting is not None and agent is not None:
            hit = self._memory.board.lookup(agent, iri)
            if hit is not None and hit[2] >= waiting:
                value = unpack_value(hit[1])
                if isinstance(value, dict):
                    if not (self.deferred or self.lazy):
                        self.engine.warm(iri, value)
                    elif (text := node_text(value)).strip() and not self.engine.has_vector_for(iri, digest := _digest(text)):
                        # warmed for the line: a rewrite before the worker gets to it supersedes it
                        self._queue_embedding([(iri, digest, text)])

    def catch_up(self, *, strict: bool = True, only: str | None = None, archives_only: bool = False) -> int:
        """Index every pending line whose home copy is new enough; returns how many changed.

        ``strict`` (a search, after its recall): an embedding failure is
        raised, so a search never answers from an index missing a completed
        write; the line stays pending. Otherwise (an event) it waits for the
        next catch-up.

        ``only`` (an event): look at that line alone. The other pending lines
        are still in their writers' caches as far as this actor knows, and a
        search recalls them before its own catch-up; checking each of them on
        every event would make a write cost as much as the backlog.

        ``archives_only``: the archives handed over, not the lines (see :meth:`notify`).
        """
        memory = self._memory
        self._install_embedded()
        with self._lock:
            if only is None:
                todo = {} if archives_only else dict(self.pending)
                l0_todo = set(self._pending_l0)
            else:
                todo = {only: self.pending[only]} if only in self.pending else {}
                l0_todo = set()
        changed = 0
        failure: EmbeddingError | None = None
        for iri, wanted in sorted(todo.items()):
            copy = memory.line_copy(iri)
            if (copy[1] if copy is not None else 0) < wanted:
                continue  # still in its writer's cache: a recall or flush brings it
            node = memory.graph.node(iri)  # the importance its writer gave, kept beside the copy
            try:
                changed += self._apply(iri, copy, "line", importance=None if node is None else node.importance)
            except EmbeddingError as exc:
                failure = failure or exc
                continue
            with self._lock:
                if self.pending.get(iri) == wanted:
                    del self.pending[iri]
        for iri in sorted(l0_todo):
            entry = memory.l0.retrieve(iri, touch=False)
            copy = None if entry is None else (searchable(entry.content), entry.version, list(entry.tags), entry.named_graph or "")
            try:
                changed += self._apply(iri, copy, "l0", importance=None if entry is None else entry.importance)
            except EmbeddingError as exc:
                failure = failure or exc
                continue
            with self._lock:
                self._pending_l0.discard(iri)
        if self.deferred:
            self._queue_embedding(self.engine.take_new_waiting())
        elif self.engine.waiting and not self.lazy:  # saved while waiting for a worker, opened without one
            changed += self.engine.embed_waiting()
        if changed:
            self._maybe_index()
        if failure is not None and strict:
            raise failure
        return changed

    # -- deferred embedding (the ``embeddings: thread`` worker) -----------------------------------
    def _embed_work(self) -> None:
        """The embed thread: texts in batches through the chain; the vectors wait for the actor."""
        size = self.config.embed_batch
        while True:
            job = self._to_embed.get()
            if job is None:
                return
            batch = [job]
            while len(batch) < size:
                try:
                    more = self._to_embed.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    self._to_embed.put(None)  # stop after this batch
                    break
                batch.append(more)
            with self._lock:  # a line rewritten since it was queued: only its newest text is worth a vector
                newest = self._newest
                live = [job for job in batch if newest.get(job[0]) == job[1]]
                if len(live) < len(batch):
                    self.superseded += len(batch) - len(live)
                    self._unfinished -= len(batch) - len(live)
                    self._finished += len(batch) - len(live)
            batch = live
            if not batch:
                continue
            texts = {digest: text for _, digest, text in batch}
            try:
                done = embed_batch(self.engine.chain, texts)
            except Exception as exc:  # noqa: BLE001 - kept and reported; the texts stay findable by words
                self.index_errors.append(f"embed: {exc}")
                done = []
            by_digest = {digest: (space, vector) for space, digest, vector in done}
            with self._lock:
                self._unfinished -= len(batch)
                self._finished += len(batch)
                finished, total = self._finished, self._finished + self._unfinished
                for iri, digest, _text in batch:
                    if newest.get(iri) == digest:
                        del newest[iri]
                    if digest in by_digest:
                        space, vector = by_digest[digest]
                        self._embedded.append((space, iri, digest, vector))
                    else:
                        self._refused.append((iri, digest))
            self._memory.progress.report("embeddings", finished, total)

    def _queue_embedding(self, jobs: Sequence[tuple[str, str, str]]) -> None:
        with self._lock:
            self._unfinished += len(jobs)
            for iri, digest, _text in jobs:
                self._newest[iri] = digest
        for job in jobs:
            self._to_embed.put(job)

    def wait_embeddings(self, timeout: float = 60.0) -> bool:
        """Block until the embed worker has nothing queued or in hand (tests and benchmarks);
        False on timeout. The vectors are installed by the next search or event."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                idle = not self._unfinished
            if idle:
                return True
            time.sleep(0.005)
        return False

    def wait_indexed(self, timeout: float = 600.0) -> None:
        """Block until everything the memory holds is indexed, vectors included, and the index worker
        has put what was queued into its graphs (benchmarks and tests: a measurement starts from a
        settled index); :class:`Timeout` after ``timeout`` seconds. Searches never need this: they
        answer from what is indexed."""
        deadline = time.monotonic() + timeout

        def left() -> float:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise Timeout(f"the hyperspace index did not settle within {timeout} s")
            return remaining

        while True:
            if not self.wait_embeddings(left()):
                left()
            self._ask_actor({"t": "catch_up"}, recall=True).get(left())
            stats = self._ask_actor({"t": "stats"}, recall=False).get(left())
            with self._lock:
                idle = not self._unfinished
            if idle and not stats["waiting_for_vectors"]:
                break
        self.wait_indexing(left())

    def _install_embedded(self) -> None:
        """Give waiting documents the vectors the worker made (on the actor: the engine's owner)."""
        if not self.deferred:
            return
        with self._lock:
            done, self._embedded = self._embedded, []
            refused, self._refused = self._refused, []
        engine = self.engine
        for space, iri, digest, vector in done:
            engine.install(space, [(iri, digest, vector)])
        for iri, digest in refused:
            engine.refuse(iri, digest)
        if done:
            self._maybe_index()

    def _embed_remainder(self, *, settle: bool = False) -> None:
        """A search's share of the waiting documents: all of them when lazy (or ``settle``: a
        catch-up request), else when they are few enough (``embed_at_search``)."""
        engine = self.engine
        waiting = len(engine.waiting)
        if not waiting:
            return
        everything = self.lazy or (settle and not self.deferred)
        few_enough = self.deferred and waiting <= self.config.embed_at_search
        if not (everything or few_enough):
            return
        if engine.embed_waiting():
            self._maybe_index()

    def _apply(
        self, iri: str, copy: tuple[Any, int, list[str], str] | None, source: str, importance: float | None = None
    ) -> int:
        engine = self.engine
        if copy is None or copy[0] is None:
            return int(engine.remove(iri))
        value, version, tags, graph = copy
        old = engine.docs.get(iri)
        if (
            old is not None
            and old.version == version
            and old.tags == tuple(sorted(set(tags)))
            and old.graph == graph
            and old.text_hash == _digest(node_text(value))
        ):
            return 0
        doc = engine.upsert(
            iri, value, version=version, tags=tags, graph=graph, importance=importance, source=source,
            defer=self.deferred or self.lazy,
        )
        if doc.types or "subClassOf" in value:
            self.structure_changes += 1
        return 1

    # -- structure (the Poincaré model of the type hierarchy) ----------------------------------
    def refresh_structure(self, *, force: bool = False) -> bool:
        """Bring the Poincaré model up to the graph's hierarchy (incremental when it only grew); True if it ran.

        Off the search path in all but name: retraining costs tens of
        milliseconds, and a team writes typed nodes between almost every two
        searches, so a search retrains only when there is no model yet, on the
        first search after open, or once ``structure_refresh_after`` typed-node
        (or ``subClassOf``) writes have accumulated — a count of writes, not a
        timer, so the simulator stays deterministic. Until then a search ranks
        with a model that lacks at most ``structure_refresh_after - 1`` such
        writes: a node it lacks sits at its ``@type``'s point when the type is
        known, a class it lacks cannot be an anchor. ``force`` (the actor's
        ``refresh_structure`` request) retrains whatever the count.
        """
        if self.config.w_structure <= 0:
            return False
        if not (self._structure_unchecked or self.structure_changes):
            return False
        due = self._structure_unchecked or self.engine.structure is None
        if not (force or due or self.structure_changes >= self.config.structure_refresh_after):
            return False
        self._structure_unchecked = False
        self.structure_changes = 0
        from gliding_actors.hyperspace._poincare import PoincareEmbedding, hierarchy_edges

        memory = self._memory
        edges = hierarchy_edges(memory.graph)
        if not edges:
            self.engine.structure = None
            return True
        model = self.engine.structure
        if model is None or not set(model.edges()).issubset(edges):
            model = PoincareEmbedding(self.config.structure_dim, seed=0)
            model.fit(edges, epochs=self.config.structure_epochs)
        else:
            model.update(edges)
        self.engine.structure = model
        return True

    def submit_refresh_structure(self) -> Future[bool]:
        """Recall dirty lines, catch up and retrain the Poincaré model now, whatever the staleness count
        (True if it retrained: False when no typed write changed since the last time)."""
        return self._ask_actor({"t": "refresh_structure"}, recall=True)

    def _ask_actor(self, request: dict[str, Any], *, recall: bool) -> Future[Any]:
        """Ask the hyperspace actor ``request`` once every dirty line is home (at once: ``recall=False``)."""
        memory = self._memory

        def ask(_moved: int) -> Future[Any]:
            future: Future[Any] = memory.runtime.lookup(HYPERSPACE_ACTOR).ask(request)
            return future

        return ChainedFuture(memory.submit_recall(), ask) if recall else ask(0)

    # -- search ------------------------------------------------------------------------------
    def submit_search(
        self, role: str, text: str, k: int = 10, filters: Mapping[str, Any] | None = None, *, recall: bool = True
    ) -> Future[dict[str, Any]]:
        """Recall dirty lines (unless the caller just did: ``recall=False``), then rank on the actor.
        Bad arguments raise before anything is sent."""
        checked_text, checked_k, checked_filters = check_search_args(text, k, filters)
        request = {"t": "search", "role": role, "text": checked_text, "k": checked_k, "filters": checked_filters}
        return self._ask_actor(request, recall=recall)

    def search_now(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """The actor's half of a search: catch up, refresh the structure, rank, confine."""
        role = str(request["role"])
        filters = parse_filters(request.get("filters"))
        self.searches += 1
        self.catch_up(strict=True)
        self._embed_remainder()
        self.refresh_structure()
        memory = self._memory
        permissions = memory.permissions
        engine = self.engine
        if role == "system":
            graphs = None
            visible = None
        else:
            # L0-only nodes (L1 archives) follow Agent.reload's rule, "any agent
            # may reload any archive": their IRI is not a line, so may_read asks
            # about the default graph; lines must also be readable where they are.
            graphs = [*permissions.readable_graphs(role, engine.graphs()), ARCHIVE_GRAPH]

            # one permission answer per named graph and search: the search answers as of one moment of the matrix
            readable: dict[str, bool] = {}

            def may(graph: str) -> bool:
                answer = readable.get(graph)
                if answer is None:
                    answer = readable[graph] = permissions.allowed(role, graph, "read")
                return answer

            # asked about every candidate of every ranking: plain dict reads, the matrix once per graph
            line_graph, default_graph, docs = memory.line_graphs.graphs, memory.line_graphs.default_graph, engine.docs

            def visible_fn(iri: str) -> bool:
                doc = docs.get(iri)
                if doc is None or not may(line_graph.get(iri, default_graph)):  # MemorySystem.may_read, per graph
                    return False
                return doc.source != "line" or may(doc.graph)

            visible = visible_fn
        hits = engine.search(str(request["text"]), int(request["k"]), filters, graphs=graphs, visible=visible)
        engine.used(iri for iri, _ in hits)
        return {
            "iris": [iri for iri, _ in hits],
            "scores": [round(score, 6) for _, score in hits],
            "embedders": sorted({engine.docs[i].space for i, _ in hits if engine.docs[i].space}),
        }

    # -- the graphs ----------------------------------------------------------------------------
    def _maybe_index(self) -> None:
        for name, index in list(self.engine.spaces.items()):
            if not index.needs_indexing() or name in self._indexing:
                continue
            if self.threaded:
                self._indexing.add(name)
                self._jobs.put((name, index))
            else:
                index.index_delta()

    def _work(self) -> None:
        """The index worker: move a space's delta into its graph, a vector at a time."""
        while True:
            job = self._jobs.get()
            if job is _STOP:
                return
            if isinstance(job, threading.Event):  # wait_indexing: all queued before it is done
                job.set()
                continue
            name, index = job
            try:
                self._indexing.discard(name)  # vectors added from now on queue the space again
                while True:  # a backlog goes in chunks: close waits for one
                    done = index.index_delta(limit=_INDEX_CHUNK)
                    self._inserted_since_trim += done
                    if not done or self._closed:
                        break
                if self._inserted_since_trim >= max(_TRIM_AFTER, _TRIM_GROWTH * len(index)):
                    self._inserted_since_trim = 0
                    trim_heap()  # what the embed and index workers freed goes back to the system
            except Exception as exc:  # noqa: BLE001 - kept and reported; the delta still answers exactly
                self.index_errors.append(f"{name}: {exc}")

    def wait_indexing(self, timeout: float = 60.0) -> None:
        """Block until the spaces queued for the worker are indexed (tests and benchmarks)."""
        if not self.threaded or self._worker is None or self._closed:
            return
        done = threading.Event()
        self._jobs.put(done)
        done.wait(timeout)

    # -- persistence ---------------------------------------------------------------------------
    @property
    def _keyword_dir(self) -> Path:
        return self.path / "keywords"

    def _space_dir(self, name: str) -> Path:
        return self.path / "spaces" / urllib.parse.quote(name, safe="")

    def save(self) -> None:
        """Write the documents, every space and the structure model under ``<memory>/hyperspace``."""
        self.path.mkdir(parents=True, exist_ok=True)
        for name, index in self.engine.spaces.items():
            index.save(self._space_dir(name))
        manifest = {name: index.dim for name, index in self.engine.spaces.items()}
        import msgpack

        (self.path / "spaces.msgpack").write_bytes(msgpack.packb(manifest, use_bin_type=True))
        (self.path / "docs.msgpack").write_bytes(self.engine.dump_docs())
        if self.engine.structure is not None:
            (self.path / "structure.bin").write_bytes(self.engine.structure.to_bytes())

    def _load(self) -> None:
        import msgpack

        manifest_file = self.path / "spaces.msgpack"
        docs_file = self.path / "docs.msgpack"
        if not manifest_file.is_file() or not docs_file.is_file():
            return
        try:
            manifest = msgpack.unpackb(manifest_file.read_bytes(), raw=False)
            for name, dim in manifest.items():
                index = self.engine.space(str(name), int(dim))
                index.load(self._space_dir(str(name)))
            reused = self.engine.load_docs(docs_file.read_bytes(), self._memory.progress)
            self.keyword_index = "reused" if reused else "rebuilt"
            structure = self.path / "structure.bin"
            if structure.is_file():
                from gliding_actors.hyperspace._poincare import PoincareEmbedding

                self.engine.structure = PoincareEmbedding.from_bytes(structure.read_bytes())
        except (GlidingError, OSError, ValueError, TypeError, KeyError, msgpack.UnpackException):
            # a damaged save is not the truth (L0 is): start empty and re-index
            chain = self.engine.chain
            self.engine.close()
            KeywordIndex.wipe(self._keyword_dir)
            self.engine = HyperspaceEngine(
                self.config, chain, self._memory.runtime.clock.now, keyword_path=self._keyword_dir
            )

    def _reconcile(self) -> None:
        """Make the loaded engine agree with what the memory holds: changed or new
        nodes become pending, gone ones go.

        Lines come from the graph's node map (rebuilt when the memory opened,
        from this process's L0 or from every shard's), archived turns from
        this process's L0 (L1 writes them there only).
        """
        engine = self.engine
        seen: set[str] = set()
        memory = self._memory
        with memory.graph_lock:
            lines = memory.graph.live_versions()
        archives = [(e.iri, e.version) for e in memory.l0.query(prefix=ARCHIVE_PREFIX)]
        for iri, version in [*lines, *archives]:
            seen.add(iri)
            doc = engine.docs.get(iri)
            space = None if doc is None else engine.spaces.get(doc.space)
            # A version names one value forever (epochs: docs/COHERENCE.md), so an equal version is
            # the same text: nothing is hashed again, which was most of an open's reconciliation.
            if doc is not None and doc.version == version and (not doc.space or (space is not None and iri in space)):
                continue
            if is_archive_iri(iri):
                self._pending_l0.add(iri)
            else:
                self.pending[iri] = version
        for iri in [i for i in engine.docs if i not in seen]:
            engine.remove(iri)

    def close(self, *, save: bool = True) -> None:
        """Stop the index worker (waits for the insert in progress) and save, unless ``save=False``."""
        if self._closed:
            return
        self._closed = True
        with self._lock:
            self._live = False
        if self._embedder is not None:
            with contextlib.suppress(queue.Empty):  # a backlog is not worked off on close: it waits for the next open
                while True:
                    if self._to_embed.get_nowait() is not None:
                        with self._lock:
                            self._unfinished -= 1
            self._to_embed.put(None)
            self._embedder.join(timeout=60.0)
            self._install_embedded()  # what the worker finished is saved; the rest waits for the next open
        if self._worker is not None:
            self._jobs.put(_STOP)
            self._worker.join()
        if save:
            try:
                self.save()
            except (OSError, GlidingError) as exc:  # the next open re-indexes from L0
                self.index_errors.append(f"save: {exc}")
        self.engine.close()

    def stats(self) -> dict[str, Any]:
        with self._lock:
            pending = len(self.pending) + len(self._pending_l0)
            queued = self._unfinished
        return {
            **self.engine.stats(),
            "pending": pending,
            "embeddings_queued": queued,
            "index_errors": list(self.index_errors),
            "searches": self.searches,
            "embeddings_superseded": self.superseded,
            "keyword_index": self.keyword_index,
        }


class HyperspaceActor:
    """Behaviour of ``hyperspace``: ``line.changed`` events, ``search``, ``catch_up``, ``stats``, and
    ``refresh_structure`` (catch up, then retrain the Poincaré model now, whatever the staleness count)."""

    def __init__(self, service: HyperspaceService) -> None:
        self._service = service

    def receive(self, message: Any, ctx: Context) -> Any:
        if not isinstance(message, dict):
            raise InvalidInput(f"the hyperspace actor takes objects, not {type(message).__name__}")
        service = self._service
        if message.get("type") == "bus.event":
            event = message.get("message")
            if message.get("topic") == LINE_CHANGED and isinstance(event, dict):
                iri, version, agent = event.get("iri"), event.get("version"), event.get("agent")
                if isinstance(iri, str) and type(version) is int:
                    service.on_event(iri, version, agent if isinstance(agent, str) else None)
            return None
        kind = message.get("t")
        if kind == "search":
            return service.search_now(message)
        if kind == "index_archives":
            return service.index_archives()
        if kind == "catch_up":
            changed = service.catch_up(strict=True)
            service._embed_remainder(settle=True)
            return changed
        if kind == "refresh_structure":
            service.catch_up(strict=True)
            return service.refresh_structure(force=True)
        if kind == "stats":
            return service.stats()
        raise InvalidInput(f"unknown hyperspace request {show(message)}")


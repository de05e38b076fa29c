"""MESI directory coherence between per-agent caches, as plain deterministic classes.

:class:`CacheController` (one per agent) and :class:`DirectoryController` (the
home of every line, shardable with :func:`directory_shard`) exchange plain-dict
messages; neither knows about actors, threads or clocks. A host feeds each
controller one message at a time through ``handle(src, msg)`` and delivers what
it returns, keeping messages FIFO per (sender, receiver) pair.

Client requests reach a cache from ``"@client"`` and are answered to ``"@client"``::

    {"t": "load",   "iri": I, "op": N}
    {"t": "store",  "iri": I, "op": N, "value": {...}, "tags": [...], "graph": G}
    {"t": "cas",    "iri": I, "op": N, "version": V, "value": {...}, "tags": [...], "graph": G}
    {"t": "delete", "iri": I, "op": N, "tags": [...] (optional: default the line's)}
    {"t": "evict",  "iri": I, "op": N}

    {"t": "done", "op": N, "result": {...}}
    {"t": "failed", "op": N, "error": "ConflictError", "message": "..."}

Results: load ``{value, version, state, messages}``; store / cas / delete
``{version, state, messages, policy}``; evict ``{state: "I", messages}``.
docs/COHERENCE.md has the state tables, message flows and counts.
"""

from gliding_actors.coherence._cache import CacheController
from gliding_actors.coherence._directory import DirectoryController, Home
from gliding_actors.coherence._messages import CLIENT, Msg, directory_shard
from gliding_actors.coherence._states import CACHE_STABLE, CACHE_STATES, DIR_STATES, ProtocolError

__all__ = [
    "CACHE_STABLE",
    "CACHE_STATES",
    "CLIENT",
    "DIR_STATES",
    "CacheController",
    "DirectoryController",
    "Home",
    "Msg",
    "ProtocolError",
    "directory_shard",
]

"""L2: the blackboard's shared working memory — the plain logic parts.

Deterministic classes with no threads, sleeps, wall clock or actors; every
time-dependent call takes ``now`` from the host's injected clock. The host
(an actor, the simulator, a test) delivers what they return. See ``docs/L2.md``.

* :class:`PermissionMatrix` — role × named-graph create/read/update/delete rights.
* :class:`TaskDAG` — tasks with parent/child and dependency edges, kept acyclic;
  Kahn layers, readiness, completion, release, garbage collection.
* :class:`AgentRegistry` — registration, heartbeats, stale detection;
  :func:`release_stale` releases a stale agent's locks.
* :class:`LockManager` — read/write/exclusive locks with leases, strict FIFO
  waits as queued state, wait-for deadlock detection and fencing tokens.
* :class:`GraphStore` — the Oxigraph graph and node cache: JSON-LD values as
  RDF in their named graphs, SPARQL confined to the graphs a role may read
  (see ``docs/L2_GRAPH.md``).
"""

from gliding_actors.l2._awareness import (
    AGENT_STATUSES,
    DEFAULT_HEARTBEAT_TIMEOUT_S,
    KEEP,
    AgentInfo,
    AgentRegistry,
    StaleSweep,
    release_stale,
)
from gliding_actors.l2._dag import (
    TASK_FINAL_STATUSES,
    TASK_STATUSES,
    TaskCompletion,
    TaskDAG,
    TaskInfo,
)
from gliding_actors.l2._graph import QUERY_PREFIXES, BindingValue, GraphNode, GraphStore
from gliding_actors.l2._jsonld import (
    DEFAULT_CONTEXT,
    GENID_BASE,
    GRAPH_BASE,
    VOCAB,
    default_context,
    graph_iri,
)
from gliding_actors.l2._locks import (
    DEFAULT_LEASE_S,
    MODES,
    Effects,
    Grant,
    Granted,
    Lease,
    LockManager,
    Queued,
    Refused,
    Wait,
    modes_compatible,
)
from gliding_actors.l2._permissions import (
    ACTIONS,
    ANY_GRAPH,
    DEFAULT_GRAPH,
    DEFAULT_PERMISSIONS,
    GRAPHS,
    ROLES,
    PermissionMatrix,
)

__all__ = [
    "DEFAULT_CONTEXT",
    "GENID_BASE",
    "GRAPH_BASE",
    "QUERY_PREFIXES",
    "VOCAB",
    "BindingValue",
    "GraphNode",
    "GraphStore",
    "default_context",
    "graph_iri",
    "ACTIONS",
    "AGENT_STATUSES",
    "ANY_GRAPH",
    "DEFAULT_GRAPH",
    "DEFAULT_HEARTBEAT_TIMEOUT_S",
    "DEFAULT_LEASE_S",
    "DEFAULT_PERMISSIONS",
    "GRAPHS",
    "KEEP",
    "MODES",
    "ROLES",
    "TASK_FINAL_STATUSES",
    "TASK_STATUSES",
    "AgentInfo",
    "AgentRegistry",
    "Effects",
    "Grant",
    "Granted",
    "Lease",
    "LockManager",
    "PermissionMatrix",
    "Queued",
    "Refused",
    "StaleSweep",
    "TaskCompletion",
    "TaskDAG",
    "TaskInfo",
    "Wait",
    "modes_compatible",
    "release_stale",
]

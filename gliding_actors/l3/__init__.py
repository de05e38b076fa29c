"""L3: role-specific projections of the blackboard, cached, invalidated in O(1), within a token budget.

L3 stores nothing of its own. For ``project(frame, task, max_tokens)`` it
gathers the task's scope from L2 (coherently: dirty lines are recalled first)
and L0 (archived nodes), restricted to what the asking role may read, runs
the frame's SPARQL CONSTRUCT on it, frames the JSON-LD with pyld, fits the
result into the budget (full → truncated → reference) and keeps it as a
materialized view until a node it read changes. See ``docs/L3.md``.

The pieces: :mod:`._ontology` (the terms frames read), :mod:`._frames` (the
nine frames, user frames, the role → frame table), :mod:`._gather` (the
scope → scratch store), :mod:`._shape` (framing and budgets), :mod:`._views`
(the view cache), :mod:`._service` (actors and the entry point). The
scenario op ``project`` is adapted in :mod:`gliding_actors.scenario._ops.l3`.
"""

from gliding_actors.l3._frames import (
    BUILTIN_FRAMES,
    PREFIXES,
    ROLE_FRAMES,
    Frame,
    FrameRegistry,
    default_frame,
)
from gliding_actors.l3._gather import ANY_NODE, Gathered, gather
from gliding_actors.l3._ontology import CLASSES, L3, LINK_PROPERTIES, PROPERTIES, SCOPE_GRAPH
from gliding_actors.l3._service import (
    VIEWS_ACTOR,
    WORKER_PREFIX,
    ProjectionService,
    ProjectionWorker,
    ViewsActor,
)
from gliding_actors.l3._shape import MODES, Shaped, shape
from gliding_actors.l3._views import ViewCache, ViewKey

__all__ = [
    "ANY_NODE",
    "BUILTIN_FRAMES",
    "CLASSES",
    "L3",
    "LINK_PROPERTIES",
    "MODES",
    "PREFIXES",
    "PROPERTIES",
    "ROLE_FRAMES",
    "SCOPE_GRAPH",
    "VIEWS_ACTOR",
    "WORKER_PREFIX",
    "Frame",
    "FrameRegistry",
    "Gathered",
    "ProjectionService",
    "ProjectionWorker",
    "Shaped",
    "ViewCache",
    "ViewKey",
    "ViewsActor",
    "default_frame",
    "gather",
    "shape",
]

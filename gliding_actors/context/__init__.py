"""The agent's context: the MemoryScheduler and the Prefetcher (docs/CONTEXT.md).

``Agent.context(query, max_tokens)`` assembles one prompt-ready context under
one token budget from the agent's L1 chain, the L3 projection of its current
task and a hybrid search over L2 lines and L0 archives; ``Agent.intent(entities)``
loads the lines an intent makes likely into L2 and the agent's cache ahead of
use. Plain logic in :mod:`._assemble` and :mod:`._prefetch`; the actors and
the wiring in :mod:`._service`; scenario ops ``context`` and ``intent`` in
:mod:`gliding_actors.scenario._ops.context`.
"""

from gliding_actors.context._assemble import SOURCES, Assembled, Candidate, assemble, render
from gliding_actors.context._prefetch import plan_prefetch
from gliding_actors.context._service import (
    PREFETCH_ACTOR,
    SCHEDULER_ACTOR,
    ContextService,
    PrefetcherActor,
    SchedulerActor,
    check_context_args,
    check_entities,
)

__all__ = [
    "PREFETCH_ACTOR",
    "SCHEDULER_ACTOR",
    "SOURCES",
    "Assembled",
    "Candidate",
    "ContextService",
    "PrefetcherActor",
    "SchedulerActor",
    "assemble",
    "check_context_args",
    "check_entities",
    "plan_prefetch",
    "render",
]

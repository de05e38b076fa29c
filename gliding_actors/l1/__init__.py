"""L1: each agent's session — a chain of one summary per turn, under a token budget.

Each LLM turn yields ``{thought, content, summary}``. The thought and content
are archived to L0 under a fresh IRI (``memory:session-<agent>/block-<n>``);
the summary joins the chain with that IRI. When the chain's total exceeds the
budget, two-phase eviction removes turns (see :class:`Session`); their IRIs
become weak references that :func:`reload_turn` (``Agent.reload``) brings
back in full. Token cost stays bounded however long the history grows, while
nothing is forgotten. See ``docs/L1.md``.

The pieces: :mod:`._tokens` (counters), :mod:`._policy` (the numbers, per
role), :mod:`._session` (the chain, plain logic), :mod:`._archive` (L0),
:mod:`._actor` (one actor per agent). The scenario ops ``turn`` and
``session`` are adapted in :mod:`gliding_actors.scenario._ops.l1`.
"""

from gliding_actors.l1._actor import SessionActor, session_actor_name, start_session, turn_request
from gliding_actors.l1._archive import (
    ARCHIVE_GRAPH,
    ARCHIVE_PREFIX,
    SessionArchive,
    block_iri,
    is_archive_iri,
    reload_turn,
    session_prefix,
)
from gliding_actors.l1._policy import EvictionPolicy, cosine
from gliding_actors.l1._session import (
    DEFAULT_RELEVANCE,
    AddResult,
    Embedder,
    Session,
    Turn,
    render_turn,
)
from gliding_actors.l1._tokens import (
    BPE_COUNTER,
    COUNTERS,
    ESTIMATE_COUNTER,
    BpeCounter,
    EstimateCounter,
    TokenCounter,
    default_counter,
    get_counter,
)

__all__ = [
    "ARCHIVE_GRAPH",
    "ARCHIVE_PREFIX",
    "BPE_COUNTER",
    "COUNTERS",
    "DEFAULT_RELEVANCE",
    "ESTIMATE_COUNTER",
    "AddResult",
    "BpeCounter",
    "Embedder",
    "EstimateCounter",
    "EvictionPolicy",
    "Session",
    "SessionActor",
    "SessionArchive",
    "TokenCounter",
    "Turn",
    "block_iri",
    "cosine",
    "default_counter",
    "get_counter",
    "is_archive_iri",
    "reload_turn",
    "render_turn",
    "session_actor_name",
    "session_prefix",
    "start_session",
    "turn_request",
]

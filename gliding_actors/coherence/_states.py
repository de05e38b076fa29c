"""State names of the MESI directory protocol, and the error a broken protocol raises.

The names follow Sorin, Hill and Wood, *A Primer on Memory Consistency and Cache
Coherence*, ch. 8, with the primer's superscripts written after an underscore:
``IM_AD`` is "was I, going to M, waiting for Data (D) and for Inv-Acks (A)".
Keeping the book's names lets a reader check every row of our tables against the
book's tables (docs/COHERENCE.md has ours, including the two rows the book does
not have: ``MW_A`` for write-through, and the directory answering a recall).
"""

from __future__ import annotations

__all__ = [
    "CACHE_STABLE",
    "CACHE_STATES",
    "DIR_STATES",
    "ProtocolError",
]

# -- cache controller: stable states ---------------------------------------
I = "I"
"""Invalid: no copy."""
S = "S"
"""Shared: a read-only copy; other caches may hold S too."""
E = "E"
"""Exclusive: the only copy, clean; a store turns it into M with no message."""
M = "M"
"""Modified: the only copy, possibly newer than home."""

# -- cache controller: transient states ------------------------------------
IS_D = "IS_D"
"""Sent GetS; waiting for Data."""
IM_AD = "IM_AD"
"""Sent GetM from I; waiting for Data and for Inv-Acks (they may come first)."""
IM_A = "IM_A"
"""Has Data; waiting for the remaining Inv-Acks."""
SM_AD = "SM_AD"
"""Sent GetM from S (upgrade); still holds a readable S copy."""
SM_A = "SM_A"
"""Upgrade has Data; waiting for the remaining Inv-Acks; S copy still readable."""
MW_A = "MW_A"
"""Holds M and applied a write-through store; waiting for WT-Ack (home durable)."""
MI_A = "MI_A"
"""Sent PutM (evicting a dirty line); waiting for Put-Ack."""
EI_A = "EI_A"
"""Sent PutE (evicting a clean exclusive line); waiting for Put-Ack."""
SI_A = "SI_A"
"""Sent PutS; waiting for Put-Ack (an Inv may still arrive: it is acked)."""
II_A = "II_A"
"""Gave the data away (Fwd-GetM or Inv) while evicting; waiting for Put-Ack."""

CACHE_STABLE = frozenset({I, S, E, M})
"""States in which the next client op on the line may start."""
CACHE_STATES = frozenset({I, S, E, M, IS_D, IM_AD, IM_A, SM_AD, SM_A, MW_A, MI_A, EI_A, SI_A, II_A})
READABLE = frozenset({S, E, M, SM_AD, SM_A})
"""States holding a copy that equals the last completed write (a read may hit)."""
LEAVING = frozenset({MI_A, EI_A, SI_A, II_A})
"""States of a line on its way out: it no longer takes a capacity slot."""

# -- directory controller --------------------------------------------------
D_I = "I"
"""No cache holds the line; home is current."""
D_S = "S"
"""``sharers`` hold read-only copies; home is current."""
D_EM = "EM"
"""``owner`` holds E or M (the directory cannot tell: E->M is silent)."""
D_SD = "S_D"
"""Forwarded a GetS (or a recall) to the old owner; waiting for its Data."""

DIR_STATES = frozenset({D_I, D_S, D_EM, D_SD})

# -- versions ----------------------------------------------------------------
EPOCH_SHIFT = 32
"""Versions are numbered per epoch: epoch ``e`` writes from ``e << EPOCH_SHIFT`` up.

An epoch is handed out durably by L0 (``reserve_epoch``): one per open of a
memory and one per line recovery serves from home after a cache crash. So
whatever versions a crash lost lie below the next epoch's, and (line, version)
names one value forever, as long as no line takes 2**32 writes in one epoch.
"""


def epoch_floor(epoch: int) -> int:
    """The version every write of ``epoch`` numbers above (0 for the first epoch)."""
    return epoch << EPOCH_SHIFT


class ProtocolError(RuntimeError):
    """A message arrived that no row of the state tables allows.

    This is a bug in the protocol or in whatever delivers the messages (for
    example a channel that is not FIFO), never bad user input, so it is not a
    :class:`~gliding_actors.errors.GlidingError`: an actor hosting a controller
    that raises it crashes, which is what we want a broken protocol to do.
    """

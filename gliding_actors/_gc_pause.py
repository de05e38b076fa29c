"""Pausing Python's cyclic garbage collector while a memory opens.

Opening a large memory builds hundreds of thousands of small objects (the
graph's node map, the search documents, the line registry) in one burst.
Every few hundred allocations the collector runs, and each full collection
walks every object alive, so the collections grow with the memory: they
were 45 % of reopening 50,000 lines. These objects hold no cycles;
reference counting frees them whether or not the collector runs, and a
pause only defers the search for cycles until the open ends.

The collector is process-wide, so pauses are counted: it resumes when the
last pause ends, and only if it was running when the first began.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["collection_paused"]

_lock = threading.Lock()
_depth = 0
_resume = False


@contextmanager
def collection_paused() -> Iterator[None]:
    """Hold the cyclic collector off for the ``with`` block (nested and concurrent blocks count)."""
    global _depth, _resume
    with _lock:
        if _depth == 0:
            _resume = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _resume:
                gc.enable()

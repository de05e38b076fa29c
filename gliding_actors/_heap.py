"""Hand the C heap's free pages back to the operating system after bursts of work on worker threads.

A memory fills through several threads at once (the actors, the embed
worker, the index worker), and each allocates and frees in a glibc heap of
its own. glibc keeps what was freed in those heaps (its threshold for giving
large blocks their own mapping rises after the first big free), so a growing
memory held a third more resident memory than it used. ``malloc_trim``
returns those free pages; it changes no allocation and is a no-op where the
C library has no such call (musl, macOS, Windows).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from collections.abc import Callable

__all__ = ["trim_heap"]


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name)
    except OSError:
        return None
    trim = getattr(libc, "malloc_trim", None)
    if trim is None:
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim  # type: ignore[no-any-return]


def trim_heap() -> bool:
    """Give free heap pages back to the system; True if the C library could (glibc)."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True

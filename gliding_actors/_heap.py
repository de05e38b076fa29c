"""Hand the C heap's free pages back to the operating system after a large, transient build.

A forest rebuild copies every vector, builds the trees and saves them, then
lets all of it go. glibc keeps what was freed in the heaps of the threads
that allocated it (its threshold for giving large blocks their own mapping
rises after the first big free), so a growing memory held about a third more
resident memory than it used. ``malloc_trim`` returns those free pages; it
changes no allocation and is a no-op where the C library has no such call
(musl, macOS, Windows).
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

"""What the operating system says of this process (for benchmarks and soaks)."""

from __future__ import annotations

import os
import resource

__all__ = ["rss_mb"]


def rss_mb() -> float:
    """This process's resident set size now, in MiB (``/proc/self/statm``; ru_maxrss elsewhere)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as statm:
            resident_pages = int(statm.read().split()[1])
        return resident_pages * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux: the peak, not now

"""What a long benchmark tells whoever runs it while it works: one line on stderr per step.

stdout carries the report (``--json`` prints one object there), so progress
goes to stderr, flushed, prefixed with the suite so interleaved output stays
readable.
"""

from __future__ import annotations

import sys

__all__ = ["say"]


def say(suite: str, text: str) -> None:
    """Print ``bench <suite>: <text>`` on stderr at once."""
    print(f"bench {suite}: {text}", file=sys.stderr, flush=True)

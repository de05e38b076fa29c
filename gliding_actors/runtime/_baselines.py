"""Raw backend baselines for benchmarks: the same work without our runtime on top.

They live here, beside the backends, so that nothing above ``runtime/``
imports pykka even to measure it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pykka

__all__ = ["raw_pykka_echo"]


class _Echo(pykka.ThreadingActor):
    use_daemon_thread = True

    def on_receive(self, message: Any) -> Any:
        return message


def raw_pykka_echo() -> tuple[Callable[[Any], Any], Callable[[], None]]:
    """Start a plain Pykka echo actor; return (blocking ask, stop)."""
    ref = _Echo.start()

    def ask(message: Any) -> Any:
        return ref.ask(message, timeout=10.0)

    def stop() -> None:
        ref.stop(timeout=10.0)

    return ask, stop

"""Raw backend baselines for benchmarks: the same work without our runtime on top.

Benchmark code, so it lives with the benchmarks; the library itself imports
pykka only in ``runtime/``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pykka

__all__ = ["raw_pykka_echo", "raw_ray_echo"]


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


class _RayEcho:
    def echo(self, message: Any) -> Any:
        return message


def raw_ray_echo(placement: str | None = None) -> tuple[Callable[[Any], Any], Callable[[], None]]:
    """A plain Ray actor answering a method call (Ray already initialised);
    return (blocking call, stop). The floor under any actor on Ray."""
    from gliding_actors.runtime._ray import node_affinity
    from gliding_actors.runtime._ray_connect import import_ray

    ray = import_ray()
    options: dict[str, Any] = {"num_cpus": 0}
    if placement is not None:
        options["scheduling_strategy"] = node_affinity(placement)
    handle = ray.remote(_RayEcho).options(**options).remote()

    def call(message: Any) -> Any:
        return ray.get(handle.echo.remote(message), timeout=30.0)

    def stop() -> None:
        ray.kill(handle, no_restart=True)

    return call, stop

"""The checks of ``MemorySystem.open``'s arguments, before anything is created: bad input changes nothing."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gliding_actors._checks import is_utf8_path
from gliding_actors._progress import ProgressFn, ProgressReporter
from gliding_actors.clock import Clock
from gliding_actors.config import Config
from gliding_actors.errors import InvalidInput, show

__all__ = ["checked_open_args"]


def checked_open_args(
    *,
    path: str | Path | None,
    config: Config | Mapping[str, Any] | None,
    runtime: str,
    clock: Clock | None,
    seed: int,
    trace: int,
    record: str | Path | None,
    address: str | None,
    progress: ProgressFn | None,
) -> tuple[Config, ProgressReporter]:
    """The configuration to open with (what ``ray`` implies laid over it) and the progress reporter;
    :class:`InvalidInput` naming the first bad argument."""
    for name, where in (("path", path), ("record", record)):
        if where is not None and (not isinstance(where, (str, os.PathLike)) or not is_utf8_path(str(where))):
            raise InvalidInput(f"{name} is a path (str or Path, UTF-8, not empty, no NUL) or None, not {show(where)}")
    if clock is not None and not isinstance(clock, Clock):
        raise InvalidInput(f"clock is a Clock (an object with now()), not {show(clock)}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise InvalidInput(f"seed is an integer, not {show(seed)}")
    if isinstance(trace, bool) or not isinstance(trace, int) or trace < 0:
        raise InvalidInput(f"trace is a number of messages (an integer >= 0), not {show(trace)}")
    if config is None:
        cfg = Config()
    elif isinstance(config, Config):
        cfg = config
    elif isinstance(config, Mapping):
        cfg = Config.from_dict(config)
    else:
        raise InvalidInput(f"config must be a Config or a mapping, not {type(config).__name__}")
    if address is not None and runtime != "ray":
        raise InvalidInput(f"address names a Ray cluster: it is for runtime='ray', not {show(runtime)}")
    reporter = ProgressReporter(progress)
    if runtime == "ray" and not (cfg.l0.sharded and cfg.l3.framers):
        # A shard on another node cannot reach this process's LevelDB, and
        # L3's pool reaches the nodes through its framers.
        cfg = cfg.merged({"l0": {"sharded": True}, "l3": {"framers": True}})
    return cfg, reporter

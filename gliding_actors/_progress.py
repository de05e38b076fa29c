"""Progress of a memory's long steps, for whoever opened it: a terminal's bar or an orchestrator's log.

Opening a large memory rebuilds what L0 alone holds (``lines``: the graph
and the line registry), may rebuild the keyword index (``keywords``: after a
crash or an upgrade), and leaves texts to embed in the background
(``embeddings``: after a crash, a model change, or lines written while a
backlog waited). ``MemorySystem.open(progress=fn)`` calls ``fn`` with a
:class:`Progress` as each of these advances.

``fn`` is called on the opening thread for ``lines`` and ``keywords``, on
the memory's embedding thread for ``embeddings``; at most every hundredth
of a step (or every ``every`` items, if fewer) and once when it ends
(``done == total``). A function
that raises is not called again (the first error is kept in
:attr:`ProgressReporter.error`): progress is for watching, and the work it
watches goes on.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from rich.console import Console
from rich.progress import Progress as RichProgress
from rich.progress import TaskID

from gliding_actors.errors import InvalidInput, show

__all__ = ["STAGES", "Progress", "ProgressFn", "ProgressReporter", "progress_bar"]

#: what each stage counts
STAGES: dict[str, str] = {
    "lines": "lines put back into the graph from L0",
    "keywords": "documents put back into the keyword index",
    "embeddings": "texts embedded in the background",
}


@dataclass(frozen=True)
class Progress:
    """``done`` of ``total`` items of ``stage`` (one of :data:`STAGES`); ``total`` None when not known."""

    stage: str
    done: int
    total: int | None

    @property
    def finished(self) -> bool:
        return self.total is not None and self.done >= self.total


ProgressFn = Callable[[Progress], None]


class ProgressReporter:
    """Passes :class:`Progress` to a user's function, thinned to every ``every`` items (module docstring).

    Without a function it does nothing, so the steps report unconditionally.
    """

    def __init__(self, fn: ProgressFn | None = None, *, every: int = 1000) -> None:
        if fn is not None and not callable(fn):
            raise InvalidInput(f"progress is a function of one Progress, or None, not {show(fn)}")
        self._fn = fn
        self.every = every
        self._lock = threading.Lock()
        self._last: dict[str, int] = {}
        #: the first exception the function raised (it is not called after that)
        self.error: BaseException | None = None

    @property
    def active(self) -> bool:
        return self._fn is not None

    def report(self, stage: str, done: int, total: int | None) -> None:
        """Tell the function, unless the stage moved less than a step (a hundredth of ``total``, at
        most ``every``) since its last report and has not finished."""
        fn = self._fn
        if fn is None:
            return
        with self._lock:
            last = self._last.get(stage)
            if last == done:
                return
            finished = total is not None and done >= total
            step = self.every if total is None else max(1, min(self.every, total // 100))
            if last is not None and done - last < step and not finished:
                return
            self._last[stage] = done
        try:
            fn(Progress(stage, done, total))
        except Exception as exc:  # noqa: BLE001 - a watcher's failure must not stop the work it watches
            with self._lock:
                self.error = self.error or exc
                self._fn = None


@contextlib.contextmanager
def progress_bar(console: Console) -> Iterator[ProgressFn]:
    """A progress function drawing one bar per stage on ``console`` while the block runs (nothing when
    the console is not a terminal); the bars go when the block ends, and later reports are dropped."""
    with RichProgress(console=console, transient=True, disable=not console.is_terminal) as bar:
        tasks: dict[str, TaskID] = {}
        ended = threading.Event()

        def draw(progress: Progress) -> None:
            if ended.is_set():
                return
            task = tasks.get(progress.stage)
            if task is None:
                task = tasks[progress.stage] = bar.add_task(STAGES.get(progress.stage, progress.stage), total=progress.total)
            bar.update(task, completed=progress.done, total=progress.total)

        try:
            yield draw
        finally:
            ended.set()

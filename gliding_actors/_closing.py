"""``with`` for the objects that own something to release (a LevelDB, a Ray connection)."""

from __future__ import annotations

from typing import Self

__all__ = ["ClosesOnExit"]


class ClosesOnExit:
    """``with obj:`` gives ``obj`` back and calls ``obj.close()`` when the block ends, however it ends."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

"""``trim_heap``: free heap pages go back to the system where the C library can, and nothing breaks elsewhere."""

from __future__ import annotations

import ctypes.util
import platform

import pytest

import gliding_actors._heap as heap


@pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="glibc only")
def test_trims_on_glibc() -> None:
    big = [bytearray(4096) for _ in range(20_000)]  # ~80 MB of small blocks in the heap, then freed
    del big
    assert heap.trim_heap() is True


def test_a_c_library_without_malloc_trim_is_a_no_op(monkeypatch: pytest.MonkeyPatch) -> None:
    heap._malloc_trim.cache_clear()
    monkeypatch.setattr(ctypes.util, "find_library", lambda _name: None)
    try:
        assert heap.trim_heap() is False
    finally:
        heap._malloc_trim.cache_clear()

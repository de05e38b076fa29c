"""Benchmarks load their test rigs from the checkout's tools/, not from the package."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gliding_actors.bench import _tools
from gliding_actors.errors import InvalidInput

REPO = Path(__file__).resolve().parents[2]


def test_the_harnesses_load_from_the_checkout_in_a_process_started_elsewhere(tmp_path: Path) -> None:
    # A console script's process has neither the checkout nor its tools/ on sys.path.
    code = (
        "import sys; before = list(sys.path)\n"
        "from gliding_actors.bench._tools import import_tool\n"
        "module = import_tool('reliability._load')\n"
        "assert sys.path == before, 'the loader changed sys.path'\n"
        "print(module.__file__)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert Path(done.stdout.strip()) == REPO / "tools" / "reliability" / "_load.py"


def test_without_a_checkout_the_benchmark_says_where_its_harnesses_come_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_tools, "TOOLS", tmp_path / "tools")
    monkeypatch.delitem(sys.modules, "tools", raising=False)
    with pytest.raises(InvalidInput, match="source checkout"):
        _tools.import_tool("reliability._load")
    assert "tools" not in sys.modules


def test_the_package_does_not_ship_the_harnesses() -> None:
    assert not (REPO / "gliding_actors" / "reliability").exists()
    assert (REPO / "tools" / "reliability" / "_faults.py").is_file()

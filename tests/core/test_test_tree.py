"""The test-suite runs where the optional extras are not installed.

A user who ran only the README's ``pip install -e '.[test]'`` has no Ray. The
tests that need it must skip, and nothing in the test tree may pass for the
missing package: a folder named ``tests/ray`` on ``sys.path`` would be imported
as ``ray`` (a namespace package) and break collection instead of skipping.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

#: run in a fresh interpreter: an import finder that finds ``ray`` only where it
#: is not installed (a test folder of that name, say), so this process sees a
#: machine without the extra whatever this one has, then pytest collecting tests/
_COLLECT_WITHOUT_RAY = textwrap.dedent(
    """
    import importlib.abc, importlib.machinery, pathlib, sys

    class WithoutRay(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name != "ray":
                return None
            elsewhere = [
                entry for entry in sys.path
                if not (pathlib.Path(entry or ".") / "ray" / "__init__.py").is_file()
            ]
            spec = importlib.machinery.PathFinder.find_spec(name, elsewhere)
            if spec is None:
                raise ModuleNotFoundError("No module named 'ray'", name="ray")
            return spec

    sys.meta_path.insert(0, WithoutRay())
    import pytest
    sys.exit(pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", "tests"]))
    """
)


def test_collecting_the_tests_without_ray_succeeds_and_skips_what_needs_it() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _COLLECT_WITHOUT_RAY],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-3000:]
    assert "could not import 'ray'" in out  # the Ray tests were skipped, saying why
    assert " collected" in out

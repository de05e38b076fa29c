"""The developer harnesses a benchmark runs, loaded from the checkout's ``tools/``.

``bench reliability`` runs the kill, fault, fuzz and load harnesses, which are
test rigs and so not part of the installed package. They live in the
``tools/`` folder of the source checkout this package was installed from
(``pip install -e .``, as the README says); installed any other way, the
benchmark says so instead of failing on an import.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from gliding_actors.errors import InvalidInput

__all__ = ["TOOLS", "import_tool"]

#: ``tools/`` of the checkout this package sits in (gliding_actors/bench/_tools.py -> the checkout)
TOOLS = Path(__file__).resolve().parents[2] / "tools"


def import_tool(module: str) -> ModuleType:
    """``tools.<module>`` from :data:`TOOLS`, without putting the checkout on ``sys.path``."""
    init = TOOLS / "__init__.py"
    if not init.is_file():
        raise InvalidInput(
            f"this benchmark runs harnesses from a source checkout's tools/ folder, and there is none at {TOOLS}: "
            "install from a clone of the repository (pip install -e .)"
        )
    loaded = sys.modules.get("tools")
    if loaded is None:
        spec = importlib.util.spec_from_file_location("tools", init, submodule_search_locations=[str(TOOLS)])
        assert spec is not None and spec.loader is not None
        package = importlib.util.module_from_spec(spec)
        sys.modules["tools"] = package
        try:
            spec.loader.exec_module(package)
        except BaseException:
            del sys.modules["tools"]
            raise
    elif [Path(p).resolve() for p in getattr(loaded, "__path__", [])] != [TOOLS]:
        raise InvalidInput(f"another module named 'tools' is already imported ({loaded!r}); run the benchmark on its own")
    return importlib.import_module(f"tools.{module}")

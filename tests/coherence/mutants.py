"""Known protocol bugs, as source-patched copies of the real controllers (tests only).

A mutant is the real controller module's source with a few exact text
replacements, compiled as a module of its own, so the mutation tests break
the real protocol code, not a copy of it, and the library carries no switch
for them. A replacement whose original text is not found exactly once fails
loudly: a change that moves a mutated line is noticed, never left silently
untested.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import sys
import types
from typing import Any

CACHE = "gliding_actors.coherence._cache"
DIRECTORY = "gliding_actors.coherence._directory"

#: bug -> (module, [(original text, mutated text)]), and what the bug is
MUTATIONS: dict[str, tuple[str, list[tuple[str, str]]]] = {
    # the directory takes a PutM from a cache that is no longer the owner
    "accept_stale_putm": (
        DIRECTORY,
        [
            (
                (
                    "            if st == D_EM and line.owner == src:\n"
                    "                if kind == m.PUT_M:\n"
                    "                    self._take_home(iri, msg, durable=False)\n"
                ),
                (
                    "            if st == D_EM and (line.owner == src or kind == m.PUT_M):\n"
                    "                if kind == m.PUT_M:\n"
                    '                    if msg["version"] > self.home.load(iri)[1]:\n'
                    '                        self.home.store(iri, msg["value"], msg["version"], False, msg["meta"])\n'
                ),
            )
        ],
    ),
    # the directory answers GetS for an E/M line from home instead of forwarding it to the owner
    "gets_from_memory": (
        DIRECTORY,
        [
            (
                "                out.append((owner, m.with_inc(m.fwd_get_s(iri, self.name, src, 2), inc)))\n",
                (
                    "                out.append((src, self._from_home(iri, acks=0, excl=False, n=2)))\n"
                    "                line.sharers, line.owner, line.state = {owner, src}, None, D_S\n"
                    "                return\n"
                ),
            )
        ],
    ),
    # a cache that receives Inv after sending PutS (SI_A) does not ack it
    "no_ack_after_puts": (
        CACHE,
        [
            (
                '                out.append((msg["req"], m.with_inc(m.inv_ack(iri, self.agent), m.inc_of(msg))))\n',
                (
                    "                if st != SI_A:\n"
                    '                    out.append((msg["req"], m.with_inc(m.inv_ack(iri, self.agent), m.inc_of(msg))))\n'
                ),
            )
        ],
    ),
    # a writer answers Fwd-GetS while still collecting Inv-Acks
    "fwd_gets_while_acking": (
        CACHE,
        [
            (
                "        return _STALLS.get(state, frozenset())\n",
                (
                    "        stalls = _STALLS.get(state, frozenset())\n"
                    "        return stalls - {m.FWD_GET_S} if state in (IM_A, SM_A) else stalls\n"
                ),
            ),
            (
                "        elif kind == m.FWD_GET_S:\n            if st in (E, M, EI_A, MI_A):\n",
                "        elif kind == m.FWD_GET_S:\n            if st in (E, M, EI_A, MI_A, IM_A, SM_A):\n",
            ),
        ],
    ),
    # a writer takes M on Data without waiting for the Inv-Acks (and ignores the late ones)
    "ignore_acks": (
        CACHE,
        [
            (
                (
                    "                if line.acks_got == line.acks_needed:\n                    self._enter(iri, line, M)\n"
                    "                else:\n"
                ),
                "                if True:\n                    self._enter(iri, line, M)\n                else:\n",
            ),
            (
                "                return\n        elif kind == m.INV:\n",
                "                return\n            if st == M:\n                return\n        elif kind == m.INV:\n",
            ),
        ],
    ),
}


def _patched(module_name: str, bugs: frozenset[str]) -> types.ModuleType:
    real = importlib.import_module(module_name)
    source = inspect.getsource(real)
    for bug in sorted(bugs):
        for original, mutated in MUTATIONS[bug][1]:
            found = source.count(original)
            assert found == 1, f"mutant {bug}: its original text is in {module_name} {found} times, not once"
            source = source.replace(original, mutated)
    name = f"{module_name}__mutant__{'_'.join(sorted(bugs))}"
    module = types.ModuleType(name)
    module.__file__ = real.__file__
    sys.modules[name] = module  # dataclasses look their module up while the class is built
    exec(compile(source, f"<{name}>", "exec"), module.__dict__)  # noqa: S102 - the real source, patched
    return module


@functools.cache
def _module(module_name: str, bugs: frozenset[str]) -> types.ModuleType:
    mine = frozenset(b for b in bugs if MUTATIONS[b][0] == module_name)
    if not mine:
        return importlib.import_module(module_name)
    return _patched(module_name, mine)


def _check(bugs: frozenset[str]) -> None:
    unknown = set(bugs) - set(MUTATIONS)
    if unknown:
        raise ValueError(f"unknown protocol bugs: {sorted(unknown)}")


def cache_controller(bugs: frozenset[str] = frozenset()) -> Any:
    """``CacheController`` with the cache's share of ``bugs`` (the real class when it has none)."""
    _check(bugs)
    return _module(CACHE, frozenset(bugs)).CacheController


def directory_controller(bugs: frozenset[str] = frozenset()) -> Any:
    """``DirectoryController`` with the directory's share of ``bugs`` (the real class when it has none)."""
    _check(bugs)
    return _module(DIRECTORY, frozenset(bugs)).DirectoryController

"""Pins the public names: removing or renaming one is a breaking change (httpx-style)."""

from __future__ import annotations

import gliding_actors
import gliding_actors.errors as errors

PUBLIC = {
    "ActorCrashed",
    "ActorUnavailable",
    "Agent",
    "Clock",
    "Config",
    "ConfigError",
    "ConflictError",
    "CorruptRecord",
    "CycleError",
    "GlidingError",
    "IncompatibleFormat",
    "InvalidInput",
    "MemorySystem",
    "PermissionDenied",
    "ROLES",
    "ScenarioFormatError",
    "SignatureError",
    "StorageError",
    "SystemClock",
    "Timeout",
    "VirtualClock",
    "__version__",
}


def test_public_names_are_exactly_these() -> None:
    assert PUBLIC <= set(gliding_actors.__all__), PUBLIC - set(gliding_actors.__all__)
    for name in gliding_actors.__all__:
        assert hasattr(gliding_actors, name), name


def test_every_error_is_a_gliding_error_and_the_spec_names_exist() -> None:
    for name in errors.__all__:
        cls = getattr(errors, name)
        assert issubclass(cls, errors.GlidingError), name
    # The scenario format names errors by class name; these may never be renamed.
    for name in ("ConflictError", "PermissionDenied", "CycleError", "InvalidInput"):
        assert name in errors.__all__
    assert issubclass(errors.Timeout, TimeoutError)
    assert issubclass(errors.InvalidInput, ValueError)


def test_the_package_is_typed() -> None:
    from importlib.resources import files

    assert files("gliding_actors").joinpath("py.typed").is_file()

"""How configuration sections are read: plain data to frozen dataclasses.

A section is a frozen dataclass whose fields are ``bool``, ``int``, ``float``,
``str``, tuples of those, or sections. A field's metadata may bound a number
(:func:`value_range`) or give it a parser of its own (``{"parse": fn}``, called
as ``fn(raw, path, current)``). Kept apart from the sections so that a layer can
declare its own section without importing the whole configuration.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Mapping
from typing import Any, TypeVar

from gliding_actors.errors import ConfigError

__all__ = ["build", "coerce", "plain", "value_range"]

T = TypeVar("T")


def value_range(lo: float | None = None, hi: float | None = None) -> dict[str, Any]:
    """Field metadata: the value must lie in ``[lo, hi]`` (None: unbounded)."""
    return {"range": (lo, hi)}


def plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def build(cls: type[T], data: Mapping[str, Any], path: tuple[str, ...], base: T | None = None) -> T:
    if not isinstance(data, Mapping):
        where = ".".join(path) or "config"
        raise ConfigError(f"{where} must be a mapping, not {type(data).__name__}", path=path)
    assert dataclasses.is_dataclass(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    hints = typing.get_type_hints(cls)
    unknown = [k for k in data if k not in fields]
    if unknown:
        key = str(unknown[0])
        where = ".".join((*path, key))
        retired: Mapping[str, str] = getattr(cls, "RETIRED", {})
        if key in retired:
            raise ConfigError(f"config key {where!r} was retired: {retired[key]}", path=(*path, key))
        known = ", ".join(sorted(fields))
        raise ConfigError(f"unknown config key {where!r} (known here: {known})", path=(*path, key))
    values: dict[str, Any] = {}
    for name, field in fields.items():
        hint = hints[name]
        current = getattr(base, name) if base is not None else None
        if name not in data:
            continue
        raw = data[name]
        sub_path = (*path, name)
        if dataclasses.is_dataclass(hint):
            values[name] = build(typing.cast(type[Any], hint), raw, sub_path, base=current)
        elif "parse" in field.metadata:  # a key with a shape of its own: parse(raw, path, base)
            values[name] = field.metadata["parse"](raw, sub_path, current)
        else:
            values[name] = coerce(hint, raw, sub_path, field.metadata.get("range"))
    if base is not None:
        return dataclasses.replace(base, **values)  # type: ignore[type-var]
    return cls(**values)


def coerce(hint: Any, raw: Any, path: tuple[str, ...], bounds: tuple[float | None, float | None] | None) -> Any:
    where = ".".join(path)
    origin = typing.get_origin(hint)
    if origin is tuple:
        (item_type, _ellipsis) = typing.get_args(hint)
        if not isinstance(raw, (list, tuple)):
            raise ConfigError(f"{where} must be a list, not {type(raw).__name__}", path=path)
        return tuple(coerce(item_type, item, (*path, str(i)), None) for i, item in enumerate(raw))
    if origin in (typing.Union, types.UnionType):
        raise TypeError(f"unsupported config type {hint} at {where}")  # pragma: no cover
    if hint is bool:
        if not isinstance(raw, bool):
            raise ConfigError(f"{where} must be true or false, not {raw!r}", path=path)
        return raw
    if hint is int:
        if isinstance(raw, bool) or not isinstance(raw, int):
            raise ConfigError(f"{where} must be an integer, not {raw!r}", path=path)
        value: float = raw
    elif hint is float:
        if isinstance(raw, bool) or not isinstance(raw, (int, float)):
            raise ConfigError(f"{where} must be a number, not {raw!r}", path=path)
        try:
            value = float(raw)
        except OverflowError:  # an int beyond a float (fuzzing found it)
            raise ConfigError(f"{where} = {raw!r} is too large for a number", path=path) from None
        if not math.isfinite(value):  # NaN passes every range check; infinity overflows timeouts
            raise ConfigError(f"{where} must be a finite number, not {raw!r}", path=path)
    elif hint is str:
        if not isinstance(raw, str):
            raise ConfigError(f"{where} must be a string, not {raw!r}", path=path)
        return raw
    else:  # pragma: no cover - a new field type needs a branch here
        raise TypeError(f"unsupported config type {hint} at {where}")
    if bounds is not None:
        lo, hi = bounds
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            span = f"[{lo if lo is not None else '-inf'}, {hi if hi is not None else 'inf'}]"
            raise ConfigError(f"{where} = {raw!r} is outside {span}", path=path)
    return value

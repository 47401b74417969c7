"""Typed configuration sections: a dataclass per section, built once from a mapping and checked
there (unknown keys and wrong types named with the section's path), so nothing downstream casts.

A field's annotation is its type: `int`, `float` (an int is taken as a float), `bool`, `str`, a
`list[float]`, or any of these `| None`. YAML 1.1 reads `1e-3` as a string: a string that parses
as a number is taken as one for a numeric field.
"""
from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any


class ConfigError(ValueError):
    """A configuration file or override is wrong; the message says which key and why."""


def as_number(text: str) -> float | int | None:
    """'1e4' -> 10000.0, '3' -> 3, 'fast' -> None."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return None


def allowed(annotation) -> tuple[set, type | None]:
    """The scalar types a field takes, and the element type when it takes a list."""
    options = typing.get_args(annotation) if isinstance(annotation, types.UnionType) or \
        typing.get_origin(annotation) is typing.Union else (annotation,)
    scalars, element = set(), None
    for option in options:
        if typing.get_origin(option) is list:
            element = typing.get_args(option)[0]
        else:
            scalars.add(option)
    return scalars, element


def scalar(value: Any, kinds: set, key: str, default: Any = None) -> Any:
    """`value` as one of `kinds` (None, bool, int, float, str), or a ConfigError naming `key`."""
    if value is None and type(None) in kinds:
        return None
    if isinstance(value, str) and (int in kinds or float in kinds) and str not in kinds:
        number = as_number(value)
        value = number if number is not None else value
    if bool in kinds and isinstance(value, bool):
        return value
    if isinstance(value, bool):
        pass
    elif int in kinds and isinstance(value, int):
        return value
    elif float in kinds and isinstance(value, (int, float)):
        return float(value)
    elif str in kinds and isinstance(value, str):
        return value
    names = [{bool: "true or false", int: "an integer", float: "a number", str: "a string",
              type(None): "null"}[k] for k in (bool, int, float, str, type(None)) if k in kinds]
    shown = "" if default is None else f" (default {default!r})"
    raise ConfigError(f"'{key}' must be {' or '.join(names)}{shown}, got {value!r}")


def checked(value: Any, annotation, key: str, default: Any = None) -> Any:
    kinds, element = allowed(annotation)
    if element is not None and isinstance(value, list):
        return [scalar(v, {element}, f"{key}[{i}]") for i, v in enumerate(value)]
    if element is not None:
        kinds = kinds | {element}
    return scalar(value, kinds, key, default)


class Section:
    """Base of a config section (a dataclass): `build` from a mapping, `to_dict` back."""

    @classmethod
    def build(cls, values: dict, where: str):
        if not isinstance(values, dict):
            raise ConfigError(f"'{where}' must be a mapping, got {values!r}")
        hints = typing.get_type_hints(cls)
        defaults = {f.name: f.default for f in dataclasses.fields(cls)
                    if f.default is not dataclasses.MISSING}
        names = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(set(values) - set(names))
        if unknown:
            raise ConfigError(f"unknown configuration key '{where}.{unknown[0]}'; known: "
                              f"{', '.join(sorted(names))}")
        return cls(**{k: checked(v, hints[k], f"{where}.{k}", defaults.get(k))
                      for k, v in values.items()})

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def compose(name: str, parts: list[type]) -> type:
    """One section dataclass with the fields of every part (each a Section dataclass): a section
    whose keys come from the variants a registry holds (a sync rule's options, an averaged
    model's). A field two parts both declare must be the same field."""
    fields: dict[str, tuple] = {}
    for part in parts:
        for f in dataclasses.fields(part):
            spec = (f.name, typing.get_type_hints(part)[f.name],
                    dataclasses.field(default=f.default) if f.default is not dataclasses.MISSING
                    else dataclasses.field(default_factory=f.default_factory))
            if f.name in fields and fields[f.name][1] != spec[1]:
                raise TypeError(f"{name}: '{f.name}' declared twice with different types")
            fields[f.name] = spec
    return dataclasses.make_dataclass(name, list(fields.values()), bases=(Section,))

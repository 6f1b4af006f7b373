"""The settings schema flattened into leaves: dotted keys, environment names, secrecy."""

from __future__ import annotations

import typing
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from types import UnionType
from typing import Any

from pydantic import BaseModel, SecretStr
from pydantic.fields import FieldInfo

from trader.config.schema import Settings

ENV_PREFIX = "TRADER_"
ENV_NESTING = "__"

KeyPath = tuple[str, ...]


def _is_section(annotation: object) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _members(annotation: object) -> tuple[object, ...]:
    if typing.get_origin(annotation) in (typing.Union, UnionType):
        return typing.get_args(annotation)
    return (annotation,)


@dataclass(frozen=True)
class Leaf:
    """One setting: `market.add_latest`, environment name `TRADER_MARKET__ADD_LATEST`."""

    path: KeyPath
    info: FieldInfo

    @property
    def key(self) -> str:
        return ".".join(self.path)

    @property
    def env_name(self) -> str:
        return ENV_PREFIX + ENV_NESTING.join(self.path).upper()

    @property
    def is_secret(self) -> bool:
        return SecretStr in _members(self.info.annotation)

    def read(self, settings: BaseModel) -> Any:
        """This setting's value in `settings`."""
        value: Any = settings
        for part in self.path:
            value = getattr(value, part)
        return value

    @property
    def container(self) -> type | None:
        """list or dict for settings that hold several values, else None."""
        for member in _members(self.info.annotation):
            origin = typing.get_origin(member)
            if origin in (list, dict):
                return typing.cast(type, origin)
        return None


def _walk(model: type[BaseModel], prefix: KeyPath) -> Iterator[Leaf]:
    for name, info in model.model_fields.items():
        if _is_section(info.annotation):
            yield from _walk(typing.cast(type[BaseModel], info.annotation), (*prefix, name))
        else:
            yield Leaf((*prefix, name), info)


@cache
def leaves() -> dict[KeyPath, Leaf]:
    return {leaf.path: leaf for leaf in _walk(Settings, ())}


@cache
def sections() -> frozenset[KeyPath]:
    """Key paths that are tables of settings (`market`, `forecast.toto`), not settings."""
    return frozenset(path[:i] for path in leaves() for i in range(1, len(path)))

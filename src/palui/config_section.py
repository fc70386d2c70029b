"""The frozen sections of the settings model (:mod:`palui.config_schema`): :func:`section` makes one.

A section is a dataclass whose fields are its keys; its methods are :class:`Section`'s, written once, not
generated per class: ``@dataclass(frozen=True)`` compiles six methods for each class at every start, a fifth
more instructions for ``palui tools list`` with the sixteen classes of the model
(docs/decisions/0085-a-light-cli-start.md). mypy and pydantic read a section as the frozen dataclass it is
declared to be (``typing.dataclass_transform``; the dataclass fields).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar, dataclass_transform

T = TypeVar("T")


class Section:
    """Base of the ``[section]`` classes (:func:`section`): made from keyword arguments over the defaults,
    frozen, equal when their fields are. pydantic refuses a key a section does not have."""

    __pydantic_config__: ClassVar[dict[str, Any]] = {"extra": "forbid"}
    __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]

    def __init__(self, **values: Any) -> None:
        for name, f in self.__dataclass_fields__.items():
            if name in values:
                value = values.pop(name)
            elif callable(f.default_factory):
                value = f.default_factory()
            elif f.default is dataclasses.MISSING:
                raise TypeError(f"{type(self).__name__}: missing {name!r}")
            else:
                value = f.default
            object.__setattr__(self, name, value)
        if values:
            raise TypeError(f"{type(self).__name__}: no field {', '.join(map(repr, values))}")

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self.__dataclass_fields__)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Section) and type(other) is type(self) and self._values() == other._values()

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={getattr(self, k)!r}' for k in self.__dataclass_fields__)})"

    def __setattr__(self, name: str, value: Any) -> None:
        raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}: settings are frozen")

    def __delattr__(self, name: str) -> None:
        raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}: settings are frozen")


@dataclass_transform(frozen_default=True, field_specifiers=(field,))
def section(cls: type[T]) -> type[T]:
    """A frozen dataclass of :class:`Section` whose methods are the base's: ``@dataclass(frozen=True)`` would
    compile six methods per class at every start, a tenth of ``palui tools list``'s time for sixteen classes
    (docs/decisions/0085-a-light-cli-start.md); mypy and pydantic read it as that dataclass."""
    return dataclass(init=False, repr=False, eq=False)(cls)


def section_type(tp: Any) -> type | None:
    """``tp`` when it is a section class (a field holding a nested ``[section]``), else None."""
    return tp if isinstance(tp, type) and issubclass(tp, Section) else None


def build(cls: type[T], values: dict[str, Any], top: dict[str, Any] | None = None) -> T:
    """An instance of ``cls`` (:class:`Settings` or a section) with the dotted ``values`` set over its
    defaults (over ``top``'s fields, for :class:`Settings`: the paths and the model tables)."""
    out: T = _build(cls, values, "", dict(top or {}))
    return out


def _build(cls: type[Any], values: dict[str, Any], prefix: str, given: dict[str, Any]) -> Any:
    kwargs = dict(given)
    for f in dataclasses.fields(cls):
        sub = section_type(f.type)
        if sub is not None:
            now = kwargs.get(f.name)  # the section as it is (with_values), or its defaults
            base = {g.name: getattr(now, g.name) for g in dataclasses.fields(sub)} if now is not None else {}
            kwargs[f.name] = _build(sub, values, f"{prefix}{f.name}.", base)
        elif prefix + f.name in values:
            kwargs[f.name] = values[prefix + f.name]
    return cls(**kwargs)

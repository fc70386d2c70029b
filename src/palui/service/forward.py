"""One line per method of the service facade: ``svc.name(...)`` calls ``svc.<part>.name(...)``.

:class:`Forward` is a descriptor: ``tools = Forward("tools_part", ToolsPart.tools)`` in the class body of
:class:`~palui.service.api.Service` makes ``svc.tools`` the bound ``svc.tools_part.tools``, with the
method's own signature to mypy (a ``ParamSpec``, so a ``Protocol`` listing the service's methods checks
the facade exactly) and its docstring to ``help()``. ``Service.tools`` (on the class) is the forward
itself: its ``part`` and ``method`` say who answers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Concatenate, Generic, ParamSpec, Self, TypeVar, cast, overload

P = ParamSpec("P")
R = TypeVar("R")


class Forward(Generic[P, R]):
    """``svc.<name>(...)`` calls ``svc.<part>.<method name>(...)``.

    Args:
        part: the facade's attribute holding the part that owns the method.
        method: the owning part's method (the function on its class); the attribute this forward is
            assigned to may have another name (``subscribe_notices`` → ``Notifier.subscribe``).
    """

    def __init__(self, part: str, method: Callable[Concatenate[Any, P], R]) -> None:
        self.part = part
        self.method = method
        self.name = method.__name__
        self.__doc__ = method.__doc__

    @overload
    def __get__(self, obj: None, owner: type) -> Self: ...

    @overload
    def __get__(self, obj: object, owner: type) -> Callable[P, R]: ...

    def __get__(self, obj: object | None, owner: type) -> Self | Callable[P, R]:
        if obj is None:
            return self
        # The type as a string: subscripting ``Callable`` at each call would cost microseconds.
        return cast("Callable[P, R]", getattr(getattr(obj, self.part), self.name))

    def __repr__(self) -> str:
        return f"Forward({self.part!r}, {getattr(self.method, '__qualname__', self.name)})"

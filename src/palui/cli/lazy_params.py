"""Typer's parameter coercion, built only when a value needs it (issue 11: a command's start cost).

Typer 0.29 (pinned in pyproject.toml) converts every parameter value it processes with a
pydantic ``TypeAdapter`` it builds on first use, so any command with a non-boolean option
imports pydantic (about 50-80 ms of CPU), even when the option was not given (its value is
``None``) or is already a ``str``. :func:`install` makes that conversion lazy: a ``None`` value
and a ``str`` value for a plain ``str`` parameter pass through exactly as Typer would return
them; any other value builds Typer's own coercion then and delegates to it, so what a command
receives is unchanged. It touches one private function of the pinned Typer; if Typer no longer
has it, nothing is changed (the commands are only slower), and ``tests/test_cli_start.py``
notices that pydantic is imported again.
"""

from __future__ import annotations

from typing import Any


def install() -> bool:
    """Wrap Typer's ``build_runtime_param`` once. Returns whether the wrapping is in place."""
    try:
        from typer import _coercion, core
    except ImportError:
        return False
    original: Any = getattr(core, "build_runtime_param", None)
    base: Any = getattr(_coercion, "RuntimeParam", None)
    if original is None or base is None:
        return False
    if getattr(original, "palui_lazy", False):
        return True

    class LazyRuntimeParam(base):
        """Typer's coercion for one parameter, built when a value first needs it."""

        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            if self.annotation is str and isinstance(value, str) and self.parameter_info.parser is None:
                return value  # what Typer's str coercion returns for a str
            real = self.__dict__.get("_real")
            if real is None:
                real = original(self._descriptor)
                object.__setattr__(self, "_real", real)
            return real._coerce_value(value, param=param, ctx=ctx)

    def build(descriptor: Any) -> Any:
        lazy = LazyRuntimeParam(parameter_info=descriptor.parameter_info, annotation=descriptor.annotation)
        object.__setattr__(lazy, "_descriptor", descriptor)
        return lazy

    build.palui_lazy = True  # type: ignore[attr-defined]  # reason: a marker on the function object
    core.build_runtime_param = build
    return True

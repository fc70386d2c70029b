"""Helpers shared by the built-in connectors: argument checks and provenance (spec §4).

Arguments come from a language model, so every value is checked; a bad one becomes an
``is_error`` result for the model (:class:`ArgError`), never an exception out of
``call_tool``.
"""

from __future__ import annotations

import sqlite3
from abc import abstractmethod
from collections.abc import Callable, Iterable
from typing import Any, Literal, overload

from palui.connectors.base import CallContext, Connector, ToolResult, ToolSpec
from palui.store.memories import TRUSTED, UNTRUSTED


class ArgError(ValueError):
    """A tool argument is missing or has the wrong type; the message is for the model."""


def int_arg(args: dict[str, Any], key: str, default: int | None = None, *, lo: int | None = None,
            hi: int | None = None) -> int:
    """A whole-number argument (``"4"`` and ``4.0`` accepted), clamped to ``[lo, hi]``. Raises ArgError."""
    value = args.get(key, default)
    if value is None:
        raise ArgError(f"missing argument '{key}' (a whole number)")
    if isinstance(value, bool):
        raise ArgError(f"argument '{key}' must be a whole number")
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, str):
        try:
            value = int(value.strip())
        except ValueError:
            raise ArgError(f"argument '{key}' must be a whole number, got {value!r}") from None
    if not isinstance(value, int):
        raise ArgError(f"argument '{key}' must be a whole number")
    if lo is not None:
        value = max(lo, value)
    if hi is not None:
        value = min(hi, value)
    return value


@overload
def str_arg(args: dict[str, Any], key: str, *, required: Literal[True] = ..., allow_empty: bool = ...,
            max_chars: int | None = ...) -> str: ...
@overload
def str_arg(args: dict[str, Any], key: str, *, required: bool, allow_empty: bool = ...,
            max_chars: int | None = ...) -> str | None: ...
def str_arg(args: dict[str, Any], key: str, *, required: bool = True, allow_empty: bool = False,
            max_chars: int | None = None) -> str | None:
    """A string argument; None when optional and absent.

    ``max_chars`` bounds its length in characters (what is stored, spec §7: a model must
    not fill the database with one call). Raises ArgError naming the limit.
    """
    value = args.get(key)
    if value is None:
        if required:
            raise ArgError(f"missing argument '{key}' (a string)")
        return None
    if not isinstance(value, str):
        raise ArgError(f"argument '{key}' must be a string")
    if max_chars is not None and len(value) > max_chars:
        raise ArgError(f"argument '{key}' is too long: {len(value):,} characters, the limit is {max_chars:,}; "
                       f"shorten it")
    if required and not allow_empty and not value.strip():
        raise ArgError(f"argument '{key}' must not be empty")
    return value


def write_provenance(ctx: CallContext) -> tuple[str, str]:
    """(provenance, source) for a row written now: ``untrusted`` while the turn is tainted (spec §4), and
    whatever another agent writes through the gateway (``ctx.writer``, spec §8.6).

    ``source`` names what tainted the turn (e.g. ``web__fetch_page at step 3``), the gateway client that wrote
    it, or, for a clean write, the turn that wrote it.
    """
    if ctx.writer:
        return UNTRUSTED, f"written by {ctx.writer}" + (f", tainted by {ctx.taint_source}" if ctx.tainted and
                                                        ctx.taint_source else "")
    if ctx.tainted:
        return UNTRUSTED, ctx.taint_source or f"tainted {ctx.origin.value} turn {ctx.turn_id}"
    return TRUSTED, f"{ctx.origin.value} turn {ctx.turn_id}"


def result(text: str, items: Iterable[dict[str, Any]], kind: str, item_text: Callable[[dict[str, Any]], str],
           *, is_error: bool = False) -> ToolResult:
    """A result whose text shows ``items``: untrusted only if one of them has untrusted provenance (spec §4).

    ``kind`` names the item in ``taint_detail`` ("memory 4 has untrusted provenance").
    """
    bad = [i for i in items if i["provenance"] != TRUSTED]
    if not bad:
        return ToolResult(text=text, is_error=is_error, untrusted=False)
    ids = ", ".join(str(i["id"]) for i in bad)
    noun = kind if len(bad) == 1 else f"{kind}s"
    verb = "has" if len(bad) == 1 else "have"
    return ToolResult(text=text, is_error=is_error, untrusted=True, untrusted_texts=[item_text(i) for i in bad],
                      taint_detail=f"{noun} {ids} {verb} untrusted provenance")


def dispatch(connector: str, handlers: dict[str, Callable[[dict[str, Any], CallContext], ToolResult]],
             name: str, args: dict[str, Any], ctx: CallContext) -> ToolResult:
    """Run the handler of tool ``name``. Bad arguments, database errors and unknown tools come
    back as ``is_error`` results (never raised: spec §7, a tool never crashes a turn)."""
    handler = handlers.get(name)
    if handler is None:
        return ToolResult(text=f"{connector} has no tool {name!r}", is_error=True, untrusted=False)
    try:
        return handler(args, ctx)
    except ArgError as e:
        return ToolResult(text=f"{connector}.{name}: {e}", is_error=True, untrusted=False)
    except sqlite3.Error as e:  # e.g. the database is locked for longer than the busy timeout
        return ToolResult(text=f"{connector}.{name} failed: database error: {e}", is_error=True, untrusted=False)


class BuiltinConnector(Connector):
    """A built-in connector: lists its declared ``TOOLS`` and refuses arguments outside a tool's
    schema before the tool runs (spec §7.1: ``{"text": "a", "extra": 1}`` must not save a memory;
    docs/decisions/0039-built-ins-refuse-unknown-arguments.md).
    Subclasses implement :meth:`call_checked`."""

    tools: list[ToolSpec] = []
    untrusted_errors = False  # whether this connector's own error results are untrusted (web: yes)

    async def list_tools(self) -> list[ToolSpec]:
        return list(self.tools)

    async def call_tool(self, name: str, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        spec = next((t for t in self.tools if t.name == name), None)
        if spec is not None:
            allowed = set(spec.input_schema.get("properties") or {})
            extra = sorted(str(k) for k in args if k not in allowed)
            if extra:
                takes = ", ".join(sorted(allowed)) or "no arguments"
                return ToolResult(text=f"{name}: unexpected argument {', '.join(repr(k) for k in extra)}"
                                       f" ({name} takes: {takes})", is_error=True, untrusted=self.untrusted_errors)
        return await self.call_checked(name, args, ctx)

    @abstractmethod
    async def call_checked(self, name: str, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        """Run tool ``name`` with arguments that are all in its schema. Never raises."""


def strict(tools: list[ToolSpec]) -> list[ToolSpec]:
    """``tools`` with ``additionalProperties: false`` in each input schema, so the model is told too."""
    return [ToolSpec(t.name, t.description, {**t.input_schema, "additionalProperties": False}, t.annotations,
                     t.declared_class, t.untrusted_output) for t in tools]

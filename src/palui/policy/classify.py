"""Tool classes from MCP annotations, and the effective class (spec §2).

Pure functions; no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from palui.types import ClassSource, ToolClass


def _hint(annotations: Mapping[str, Any], key: str) -> bool | None:
    """A raw hint: True/False only for JSON booleans, None otherwise (spec §2: "true" is absent)."""
    value = annotations.get(key)
    return value if isinstance(value, bool) else None


def prefill_class(annotations: Mapping[str, Any] | None) -> ToolClass | None:
    """Class prefilled from raw MCP ``ToolAnnotations`` JSON (spec §2).

    ``annotations`` is the raw ``annotations`` object of a ``tools/list`` entry
    (camelCase keys, values exactly as sent) or None when the tool had none.
    Returns None ("unknown", treated as destructive) for a tool with no
    annotations at all.

    - readOnlyHint true, destructiveHint not true      -> read
    - readOnlyHint true, destructiveHint true           -> destructive (contradiction)
    - readOnlyHint false/absent, destructiveHint false  -> write
    - readOnlyHint false/absent, destructiveHint true/absent -> destructive
    """
    if annotations is None or not isinstance(annotations, Mapping) or len(annotations) == 0:
        return None
    read_only = _hint(annotations, "readOnlyHint")
    destructive = _hint(annotations, "destructiveHint")
    if read_only is True:
        return ToolClass.DESTRUCTIVE if destructive is True else ToolClass.READ
    if destructive is False:
        return ToolClass.WRITE
    return ToolClass.DESTRUCTIVE


def effective_class(
    user_class: ToolClass | None, base_class: ToolClass | None, base_source: ClassSource | None
) -> tuple[ToolClass, ClassSource]:
    """The effective class and its shown source (spec §2).

    ``user_class`` is the person's choice (strongest); ``base_class`` the class
    declared by a built-in connector (source ``builtin``) or prefilled from hints
    (source ``hints``). With neither, the tool is ``destructive`` with source
    ``unknown`` (fail closed).
    """
    if user_class is not None:
        return user_class, ClassSource.USER
    if base_class is not None and base_source is not None:
        return base_class, base_source
    return ToolClass.DESTRUCTIVE, ClassSource.UNKNOWN


def parse_class(word: str) -> ToolClass:
    """Parse a class word given by the person.

    Raises ValueError naming the allowed words.
    """
    try:
        return ToolClass(word.strip().lower())
    except ValueError:
        raise ValueError(f"unknown class {word!r}: use read, write or destructive") from None

"""Class prefill from raw MCP annotations, the effective class and class words (spec §2)."""

from __future__ import annotations

import pytest

from palui.connectors.base import ToolSpec
from palui.policy.classify import effective_class, parse_class, prefill_class
from palui.types import ClassSource, ToolClass

R, W, D, UNKNOWN = "read", "write", "destructive", None

# raw annotations JSON (as a server sent it) -> prefilled class (None = no class, "unknown")
PREFILL = [
    ("no annotations", None, UNKNOWN),
    ("empty annotations object", {}, UNKNOWN),
    ("readOnly true, destructive absent", {"readOnlyHint": True}, R),
    ("readOnly true, destructive false", {"readOnlyHint": True, "destructiveHint": False}, R),
    ("readOnly true + destructive true: contradiction", {"readOnlyHint": True, "destructiveHint": True}, D),
    ("readOnly false, destructive absent", {"readOnlyHint": False}, D),
    ("destructive false alone", {"destructiveHint": False}, W),
    ("readOnly false + destructive false", {"readOnlyHint": False, "destructiveHint": False}, W),
    ("readOnly false + destructive true", {"readOnlyHint": False, "destructiveHint": True}, D),
    ("destructive true alone", {"destructiveHint": True}, D),
    # Only JSON booleans count: a string "true"/"false" is treated as absent.
    ("readOnly string 'true'", {"readOnlyHint": "true"}, D),
    ("readOnly string 'true' + destructive false", {"readOnlyHint": "true", "destructiveHint": False}, W),
    ("destructive string 'false'", {"destructiveHint": "false"}, D),
    ("readOnly true + destructive string 'true'", {"readOnlyHint": True, "destructiveHint": "true"}, R),
    ("readOnly string 'true' + destructive string 'false'", {"readOnlyHint": "true", "destructiveHint": "false"}, D),
    ("readOnly 1 (a number, not a boolean)", {"readOnlyHint": 1}, D),
    ("readOnly null", {"readOnlyHint": None}, D),
    # Annotations present but saying nothing about read/destructive: destructive from hints
    # (the "no class" exception is only for no annotations at all; docs/decisions/0001-annotations-that-say-nothing.md).
    ("title only", {"title": "x"}, D),
    ("unknown keys only", {"x-vendor": True}, D),
    ("idempotent + openWorld only", {"idempotentHint": True, "openWorldHint": False}, D),
    ("readOnly true + idempotent + openWorld",
     {"readOnlyHint": True, "idempotentHint": True, "openWorldHint": True}, R),
    ("destructive false + idempotent", {"destructiveHint": False, "idempotentHint": True}, W),
    ("openWorld false + destructive true", {"openWorldHint": False, "destructiveHint": True}, D),
]


@pytest.mark.parametrize("case,annotations,expected", PREFILL, ids=[c for c, _, _ in PREFILL])
def test_prefill(case, annotations, expected):
    got = prefill_class(annotations)
    assert got == (ToolClass(expected) if expected else None)


@pytest.mark.parametrize("case,annotations,expected", PREFILL, ids=[c for c, _, _ in PREFILL])
def test_prefill_through_registry(svc, case, annotations, expected):
    """The stored class and its shown source follow the prefill (hints, or unknown)."""
    svc.tools.register("mcp-x", [ToolSpec("t", "a tool", {"type": "object"}, annotations)])
    row = svc.tools.get("mcp-x__t")
    if expected is None:
        assert (row.tool_class, row.class_source) == (ToolClass.DESTRUCTIVE, ClassSource.UNKNOWN)
    else:
        assert (row.tool_class, row.class_source) == (ToolClass(expected), ClassSource.HINTS)


def test_effective_class_strength():
    # user > builtin/hints > none; none is destructive with source unknown (fail closed)
    assert effective_class(ToolClass.READ, ToolClass.DESTRUCTIVE, ClassSource.BUILTIN) == \
        (ToolClass.READ, ClassSource.USER)
    assert effective_class(None, ToolClass.WRITE, ClassSource.BUILTIN) == (ToolClass.WRITE, ClassSource.BUILTIN)
    assert effective_class(None, ToolClass.READ, ClassSource.HINTS) == (ToolClass.READ, ClassSource.HINTS)
    assert effective_class(ToolClass.WRITE, None, None) == (ToolClass.WRITE, ClassSource.USER)
    assert effective_class(None, None, None) == (ToolClass.DESTRUCTIVE, ClassSource.UNKNOWN)


def test_parse_class_words():
    assert parse_class(" Read ") is ToolClass.READ
    assert parse_class("destructive") is ToolClass.DESTRUCTIVE
    for bad in ("", "none", "unknown", "delete", "rw"):
        with pytest.raises(ValueError, match="read, write or destructive"):
            parse_class(bad)

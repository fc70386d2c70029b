"""Service part: classes suggested for tools whose server sent no annotations (spec §2.4).

This is the one place classes are suggested for ``unknown`` tools (:mod:`palui.policy.suggest`).
Nothing changes until the person accepts; an accepted suggestion is the person's own class (source
``user``), set through :meth:`~palui.service.tools.ToolsPart.set_class` (so pending approvals are
decided again). A bulk accept (``palui tools suggest CONNECTOR --accept``, the sheet's button) takes
only ``write`` and ``destructive`` suggestions; a ``read`` suggestion is accepted one tool at a time.
An acceptance names the class the person was shown: a tool whose suggestion changed since (its
server changed its name or description) is skipped, never accepted unseen.
"""

from __future__ import annotations

import builtins
from typing import TYPE_CHECKING

from palui.errors import UsageError
from palui.policy.suggest import suggest
from palui.service.tools import ToolsPart
from palui.types import ClassSource, ToolClass

if TYPE_CHECKING:
    from palui.results import Suggestion

BULK = (ToolClass.WRITE.value, ToolClass.DESTRUCTIVE.value)


class SuggestionsPart:
    """Suggesting and accepting classes for unknown tools.

    Args:
        tools_part: the tools, and the person's class set through it.
    """

    def __init__(self, tools_part: ToolsPart) -> None:
        self.tools_part = tools_part

    def list(self, connector: str) -> list[Suggestion]:
        """The connector's unknown tools with a suggestion each: ``[{"name","tool","description","suggestion",
        "reason"}]``; ``suggestion`` is ``read``/``write``/``destructive`` or None (unsure: stays unknown).
        ``tool`` and ``description`` are the server's own words (show them escaped). Raises NotFound."""
        out: list[Suggestion] = []
        for r in self.tools_part.list(connector):
            if r.class_source is not ClassSource.UNKNOWN:
                continue
            s = suggest(r.tool, r.description)
            out.append({"name": r.name, "tool": r.tool, "description": r.description,
                        "suggestion": s.tool_class.value if s.tool_class else None, "reason": s.reason})
        return out

    def accept_all(self, connector: str, shown: dict[str, str] | None = None) -> builtins.list[Suggestion]:
        """Accept the connector's ``write`` and ``destructive`` suggestions (never ``read``). With ``shown``
        (tool name → the class the page showed), only those tools, and each only while its suggestion is
        still that class. Returns the suggestions accepted. Raises NotFound."""
        accepted: list[Suggestion] = []
        for s in self.list(connector):
            if s["suggestion"] not in BULK:
                continue
            if shown is not None and shown.get(s["name"]) != s["suggestion"]:
                continue
            self.tools_part.set_class(s["name"], s["suggestion"])
            accepted.append(s)
        return accepted

    def accept(self, name: str, expected: str) -> Suggestion:
        """Accept one tool's suggestion — the only way to accept a ``read`` one. ``expected`` is the class
        the person was shown. Raises NotFound, UsageError (the tool is not unknown, or its suggestion is not
        ``expected`` now)."""
        row = self.tools_part.get(name)
        if row.class_source is not ClassSource.UNKNOWN:
            raise UsageError(f"{name} already has a class ({row.tool_class.value}, {row.class_source.value}); "
                             "palui tools set-class changes it")
        s = suggest(row.tool, row.description)
        now = s.tool_class.value if s.tool_class else None
        if now is None or now != expected:
            raise UsageError(f"{name}: the suggestion is {now or 'none (unsure)'} now, not {expected}; "
                             f"look again (palui tools suggest {row.connector})")
        self.tools_part.set_class(name, now)
        return {"name": name, "tool": row.tool, "description": row.description, "suggestion": now,
                "reason": s.reason}

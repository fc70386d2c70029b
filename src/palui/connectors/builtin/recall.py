"""The ``recall`` connector: memories in SQLite FTS5, with provenance (spec §7, §4).

A memory written while the turn is tainted is stored ``untrusted``; a search or
forget result that shows such a memory is untrusted (it taints the reading turn), any
other result is not. The search text is quoted word by word, so no user or model text
can reach FTS5 as query syntax.
"""

from __future__ import annotations

from typing import Any

from palui.connectors.base import CallContext, ToolResult, ToolSpec
from palui.connectors.builtin.common import BuiltinConnector, dispatch, int_arg, result, str_arg, write_provenance
from palui.store import memories as store
from palui.types import ToolClass

MAX_MEMORY_CHARS = 8192  # characters of one memory's text

TOOLS = [
    ToolSpec(
        name="search_memories",
        description="Search the person's saved memories by keywords. Returns matching memories with their ids.",
        input_schema={
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "Keywords to search for; empty lists recent memories."},
                "limit": {"type": "integer", "minimum": 1, "maximum": 50, "default": 10},
            },
            "required": ["query"],
        },
        declared_class=ToolClass.READ,
        untrusted_output=False,
    ),
    ToolSpec(
        name="add_memory",
        description="Save a memory (a fact or note worth remembering for the person).",
        input_schema={
            "type": "object",
            "properties": {"text": {"type": "string", "description": "The memory to save.",
                                    "maxLength": MAX_MEMORY_CHARS}},
            "required": ["text"],
        },
        declared_class=ToolClass.WRITE,
        untrusted_output=False,
    ),
    ToolSpec(
        name="forget_memory",
        description="Delete a saved memory by its id.",
        input_schema={
            "type": "object",
            "properties": {"id": {"type": "integer", "description": "The memory id."}},
            "required": ["id"],
        },
        declared_class=ToolClass.DESTRUCTIVE,
        untrusted_output=False,
    ),
]


class RecallConnector(BuiltinConnector):
    """Memories: ``search_memories`` [read], ``add_memory`` [write], ``forget_memory`` [destructive]."""

    id = "recall"

    tools = TOOLS

    async def call_checked(self, name: str, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        """Run one tool. Bad arguments and unknown ids come back as ``is_error`` results."""
        return dispatch(
            "recall",
            {"search_memories": self._search, "add_memory": self._add, "forget_memory": self._forget},
            name,
            args,
            ctx,
        )

    def _search(self, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        query = str_arg(args, "query", required=False) or ""
        limit = int_arg(args, "limit", 10, lo=1, hi=50)
        rows = store.search_memories(ctx.db, query, limit)
        if not rows:
            text = "No memories saved yet." if not query.strip() else f"No memories match {query!r}."
        else:
            head = "Recent memories:" if store.fts_query(query) is None else "Matching memories:"
            text = "\n".join([head, *(_line(m) for m in rows)])
        return result(text, rows, "memory", lambda m: m["text"])

    def _add(self, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        text = str_arg(args, "text", max_chars=MAX_MEMORY_CHARS).strip()
        provenance, source = write_provenance(ctx)
        mid = store.add_memory(ctx.db, text, provenance, source, ctx.turn_id)
        # The text is not echoed: the model wrote it, and a bare id carries no stored content.
        return ToolResult(text=f"Saved memory [{mid}].", untrusted=False)

    def _forget(self, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        mid = int_arg(args, "id")
        row = store.delete_memory(ctx.db, mid)
        if row is None:
            return ToolResult(
                text=f"No memory with id {mid} (search_memories lists ids).", is_error=True, untrusted=False
            )
        return result(f"Forgot memory {_line(row)}", [row], "memory", lambda m: m["text"])


def _line(m: dict[str, Any]) -> str:
    return f"[{m['id']}] {m['text']}"

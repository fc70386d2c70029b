"""The ``recall`` connector: memories in SQLite FTS5, with provenance (SPEC §7, §4)."""

from __future__ import annotations

from typing import Any

from palui.connectors.base import CallContext, Connector, ToolResult, ToolSpec
from palui.types import ToolClass

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
            "properties": {"text": {"type": "string", "description": "The memory to save."}},
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


class RecallConnector(Connector):
    id = "recall"

    async def list_tools(self) -> list[ToolSpec]:
        return list(TOOLS)

    async def call_tool(self, name: str, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        return ToolResult(text=f"recall.{name} is not implemented yet", is_error=True)

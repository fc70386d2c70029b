"""The ``tasks`` connector: the person's task list in SQLite, with provenance (SPEC §7, §4)."""

from __future__ import annotations

from typing import Any

from palui.connectors.base import CallContext, Connector, ToolResult, ToolSpec
from palui.types import ToolClass

TOOLS = [
    ToolSpec(
        name="list_tasks",
        description="List the person's tasks. By default only open tasks.",
        input_schema={
            "type": "object",
            "properties": {"status": {"type": "string", "enum": ["open", "done", "all"], "default": "open"}},
        },
        declared_class=ToolClass.READ,
        untrusted_output=False,
    ),
    ToolSpec(
        name="create_task",
        description="Create a task for the person.",
        input_schema={
            "type": "object",
            "properties": {
                "title": {"type": "string"},
                "notes": {"type": "string"},
                "due": {"type": "string", "description": "Due date, ISO 8601 (optional)."},
            },
            "required": ["title"],
        },
        declared_class=ToolClass.WRITE,
        untrusted_output=False,
    ),
    ToolSpec(
        name="update_task",
        description="Change a task: its title, notes, due date or status (open/done).",
        input_schema={
            "type": "object",
            "properties": {
                "id": {"type": "integer"},
                "title": {"type": "string"},
                "notes": {"type": "string"},
                "due": {"type": "string"},
                "status": {"type": "string", "enum": ["open", "done"]},
            },
            "required": ["id"],
        },
        declared_class=ToolClass.WRITE,
        untrusted_output=False,
    ),
    ToolSpec(
        name="delete_task",
        description="Delete a task by its id.",
        input_schema={"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]},
        declared_class=ToolClass.DESTRUCTIVE,
        untrusted_output=False,
    ),
]


class TasksConnector(Connector):
    id = "tasks"

    async def list_tools(self) -> list[ToolSpec]:
        return list(TOOLS)

    async def call_tool(self, name: str, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        return ToolResult(text=f"tasks.{name} is not implemented yet", is_error=True)

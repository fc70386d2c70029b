"""The ``messages`` connector: ``send_message`` to the person's channel or a contact (SPEC §7)."""

from __future__ import annotations

from typing import Any

from palui.connectors.base import CallContext, Connector, ToolResult, ToolSpec
from palui.types import ToolClass

TOOLS = [
    ToolSpec(
        name="send_message",
        description=(
            "Send a message to the person's channel (default) or to a configured contact target by name."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "text": {"type": "string", "description": "The message text."},
                "to": {"type": "string", "description": "A contact target name; omit for the person's inbox."},
            },
            "required": ["text"],
        },
        declared_class=ToolClass.WRITE,
        untrusted_output=False,
    ),
]


class MessagesConnector(Connector):
    id = "messages"

    async def list_tools(self) -> list[ToolSpec]:
        return list(TOOLS)

    async def call_tool(self, name: str, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        return ToolResult(text=f"messages.{name} is not implemented yet", is_error=True)

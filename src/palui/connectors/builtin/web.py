"""The ``web`` connector: ``fetch_page`` with size/time limits and private-address refusal (SPEC §7)."""

from __future__ import annotations

from typing import Any

from palui.connectors.base import CallContext, Connector, ToolResult, ToolSpec
from palui.types import ToolClass

TOOLS = [
    ToolSpec(
        name="fetch_page",
        description="Fetch a web page (http or https) and return its text content.",
        input_schema={
            "type": "object",
            "properties": {"url": {"type": "string", "description": "The http(s) URL to fetch."}},
            "required": ["url"],
        },
        declared_class=ToolClass.READ,
        untrusted_output=True,
    ),
]


class WebConnector(Connector):
    id = "web"

    async def list_tools(self) -> list[ToolSpec]:
        return list(TOOLS)

    async def call_tool(self, name: str, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        return ToolResult(text=f"web.{name} is not implemented yet", is_error=True, untrusted=True)

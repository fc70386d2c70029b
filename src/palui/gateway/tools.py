"""The gateway's words in the MCP SDK's types: its server, a listed tool and a call's result (spec §8.6)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import mcp_types as types
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.models import InitializationOptions

if TYPE_CHECKING:
    from palui.results import GatewayCallResult, GatewayTool


def as_mcp_tool(t: GatewayTool) -> types.Tool:
    """A tool as ``tools/list`` sends it: Palui's model-visible name (at most 64 characters; a client adds
    its own prefix), the pinned description and schema, and hints derived from the *effective* class:
    ``readOnlyHint`` for ``read``, ``destructiveHint`` true only for ``destructive``, ``openWorldHint`` for a
    tool that reaches outside (spec §4.5)."""
    hints = types.ToolAnnotations(read_only_hint=t["read_only"], destructive_hint=t["destructive"],
                                  open_world_hint=t["open_world"])
    return types.Tool(name=t["name"], description=t["description"], input_schema=t["input_schema"] or
                      {"type": "object"}, annotations=hints)


def as_call_result(r: GatewayCallResult) -> types.CallToolResult:
    """A call's answer as ``tools/call`` sends it: one text content, ``isError`` when it did not run or failed."""
    return types.CallToolResult(content=[types.TextContent(text=r["text"])], is_error=r["is_error"])


class GatewayServer(Server[Any]):
    """The SDK's low-level server, announcing ``tools.listChanged`` (the session manager starts each session
    with the server's default initialization options, which announce none)."""

    def create_initialization_options(self, notification_options: NotificationOptions | None = None,
                                      experimental_capabilities: dict[str, dict[str, Any]] | None = None,
                                      extensions: dict[str, dict[str, Any]] | None = None) -> InitializationOptions:
        return super().create_initialization_options(notification_options or NotificationOptions(tools_changed=True),
                                                     experimental_capabilities, extensions)

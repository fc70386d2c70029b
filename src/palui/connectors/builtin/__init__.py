"""The four built-in connectors (SPEC §7): recall, tasks, web, messages."""

from __future__ import annotations

from palui.connectors.base import Connector, ToolSpec
from palui.connectors.builtin import messages, recall, tasks, web

BUILTIN_TOOLS: dict[str, list[ToolSpec]] = {
    "recall": recall.TOOLS,
    "tasks": tasks.TOOLS,
    "web": web.TOOLS,
    "messages": messages.TOOLS,
}


def builtin_connectors() -> list[Connector]:
    """Fresh instances of the four built-in connectors."""
    return [recall.RecallConnector(), tasks.TasksConnector(), web.WebConnector(), messages.MessagesConnector()]

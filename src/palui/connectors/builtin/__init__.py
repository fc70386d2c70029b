"""The four built-in connectors (spec §7): recall, tasks, web, messages."""

from __future__ import annotations

from palui.connectors.base import Connector, ToolSpec
from palui.connectors.builtin import messages, recall, tasks, web
from palui.connectors.builtin.common import strict

# As stored and offered: each schema says additionalProperties false, which the connectors enforce.
BUILTIN_TOOLS: dict[str, list[ToolSpec]] = {
    "recall": strict(recall.TOOLS),
    "tasks": strict(tasks.TOOLS),
    "web": strict(web.TOOLS),
    "messages": strict(messages.TOOLS),
}


def builtin_connectors() -> list[Connector]:
    """Fresh instances of the four built-in connectors."""
    return [recall.RecallConnector(), tasks.TasksConnector(), web.WebConnector(), messages.MessagesConnector()]

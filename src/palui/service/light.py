"""Services made of fewer parts, for front ends whose command needs only those parts.

Issue 11: a CLI command imports only what it needs. ``palui tools list`` and ``palui connectors
list`` read the catalog; building the whole :class:`~palui.service.api.Service` for them would
import every part (turns, triggers, channels, MCP, audit …), about a third of their start-up
CPU. They use :class:`ToolsService` instead: the same settings check, database (migrations), and
built-in tool registration as a full service, and only :class:`~palui.service.tools.ToolsPart`'s
methods. Start-up work of the other parts (the sweep of expired approvals, the policy check of
``palui serve``) is left to the next full service, none of it changes what these commands show.
"""

from __future__ import annotations

from palui.service.tools import ToolsPart


class ToolsService(ToolsPart):
    """Connectors and tools only (:class:`~palui.service.tools.ToolsPart`), for read-only commands.

    Args:
        settings: validated settings; ``None`` loads them from the environment.

    Raises:
        ConfigError: the configuration is invalid (Palui refuses to start).
    """

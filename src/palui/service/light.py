"""Services made of fewer parts, for front ends whose command needs only those parts.

Issue 11: a CLI command imports only what it needs. ``palui tools list`` reads the catalog;
building the whole :class:`~palui.service.api.Service` for it would import every part (turns,
triggers, channels, MCP, audit …), about a third of its start-up CPU. It uses
:class:`ToolsService` instead: the same settings check, database (migrations), and built-in tool
registration as a full service, and only :class:`~palui.service.tools.ToolsPart`'s methods.
Start-up work of the other parts (the sweep of expired approvals, the policy check of ``palui
serve``) is left to the next full service, none of it changes what this command shows.

Only a method that no other part overrides answers the same here as on the full service
(``connectors()`` is not one: the MCP part adds each server's address and start state), so a
front end may use a light service only for such methods; ``LIGHT_METHODS`` lists them and
``tests/test_cli_start.py`` checks that the full service resolves each to the same function.
"""

from __future__ import annotations

from palui.service.tools import ToolsPart

LIGHT_METHODS = ("tools",)  # the ToolsService methods front ends call (each not overridden by another part)


class ToolsService(ToolsPart):
    """Connectors and tools only (:class:`~palui.service.tools.ToolsPart`), for read-only commands.

    Args:
        settings: validated settings; ``None`` loads them from the environment.

    Raises:
        ConfigError: the configuration is invalid (Palui refuses to start).
    """

"""Services made of fewer parts, for front ends whose command needs only those parts.

A CLI command imports only what it needs (its start cost). ``palui tools list`` reads the catalog;
building the whole :class:`~palui.service.api.Service` for it would import every part (turns,
triggers, channels, MCP, audit …), about a third of its start-up CPU. It uses
:class:`ToolsService` instead: the same shared collaborators (:mod:`palui.service.collaborators`:
the settings check, the database and its migrations), the same
:class:`~palui.service.tools.ToolsPart` with the same start-up step (the built-in tools stored),
and nothing else built. The other start-up step (the sweep of expired approvals) and ``palui
serve``'s policy check are left to the next full service; none of it changes what this command shows.

A front end may call here only a method the full service forwards to the same part's same method
(``connectors()`` is not one: the full service's is the MCP part's, with each server's address and
start state); ``LIGHT_METHODS`` lists them and ``tests/test_cli_start.py`` checks both forwards agree.
"""

from __future__ import annotations

from palui.config import Settings
from palui.service.collaborators import Collaborators
from palui.service.forward import Forward
from palui.service.tools import ToolsPart

LIGHT_METHODS = ("tools",)  # the ToolsService methods front ends call (each the tools part's own)


class ToolsService:
    """Connectors and tools only (:class:`~palui.service.tools.ToolsPart`), for read-only commands.

    Args:
        settings: validated settings; ``None`` loads them from the environment.

    Raises:
        ConfigError: the configuration is invalid (Palui refuses to start).
    """

    def __init__(self, settings: Settings | None = None) -> None:
        home = Collaborators.open(settings)
        self.settings, self.db, self.hub = home.settings, home.db, home.hub
        self.tools_part = ToolsPart(home.db, home.settings, home.hub, home.redecision.redecide_approvals)
        self.tools_part.register_builtins()

    tools = Forward("tools_part", ToolsPart.tools)

"""Services made of fewer parts, for front ends whose command needs only those parts.

A CLI command imports only what it needs (its start cost). ``palui tools list`` reads the catalog;
building the whole :class:`~palui.service.api.Service` for it would import every part (turns,
jobs, channels, MCP, audit …), about a third of its start-up CPU. It uses
:class:`ToolsService` instead: the same shared collaborators (:mod:`palui.service.collaborators`:
the settings check, the database and its migrations), the same
:class:`~palui.service.tools.ToolsPart` with the same start-up step (the built-in tools stored),
and nothing else built. The other start-up step (the sweep of expired approvals) and ``palui
serve``'s policy check are left to the next full service; none of it changes what this command shows.

Its parts are attributes of the same names and classes as the full service's (``LIGHT_PARTS``;
``tests/test_cli_start.py`` checks both agree), so a front end calls on it exactly what it would call on
the full service (``tools_service().tools.list()``); a part composed over others (``connectors``, the MCP
servers as the person sees them) is not on it at all.
"""

from __future__ import annotations

from palui.config import Settings
from palui.service.collaborators import Collaborators
from palui.service.tools import ToolsPart
from palui.store.db import Database

LIGHT_PARTS = ("tools",)  # the parts of ToolsService: the full Service's attributes of these names and classes


class ToolsService:
    """Connectors and tools only (:class:`~palui.service.tools.ToolsPart`), for read-only commands.

    Args:
        settings: validated settings; ``None`` loads them from the environment.

    Raises:
        ConfigError: the configuration is invalid (Palui refuses to start).
    """

    settings: Settings
    db: Database  # for tests only, as on the full service
    tools: ToolsPart

    def __init__(self, settings: Settings | None = None) -> None:
        home = Collaborators.open(settings)
        self.settings, self.db, self._hub = home.settings, home.db, home.hub
        self.tools = ToolsPart(home.db, home.settings, home.hub, home.redecision.redecide_approvals)
        self.tools.register_builtins()

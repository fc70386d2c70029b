"""The one service API that the CLI, the web page and tests use.

Front ends parse and print; everything else happens here or below. Each part lives in
its own module under :mod:`palui.api`; methods raise
:class:`~palui.errors.PaluiError` subclasses with messages fit for the person.
"""

from __future__ import annotations

from palui.api.mcp import MCPAPI
from palui.api.memories import MemoriesAPI
from palui.api.tools import ToolsAPI
from palui.api.triggers import TriggersAPI
from palui.api.turns import TurnsAPI


class Service(TriggersAPI, TurnsAPI, MCPAPI, MemoriesAPI, ToolsAPI):
    """Palui's service API over one ``PALUI_HOME`` (settings + database).

    Args:
        settings: validated settings; ``None`` loads them from the environment.

    Raises:
        ConfigError: the configuration is invalid (Palui refuses to start).
    """

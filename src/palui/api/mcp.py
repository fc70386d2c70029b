"""Service API part: MCP connectors (add, import, remove, refresh, trust), SPEC §7."""

from __future__ import annotations

from palui.api.base import ServiceBase


class MCPAPI(ServiceBase):
    """MCP servers as connectors."""

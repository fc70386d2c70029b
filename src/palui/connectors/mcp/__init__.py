"""MCP servers as connectors (SPEC §2, §4, §7), through the official ``mcp`` SDK.

Modules: :mod:`.config` (server configs, secrets files, ``mcpServers`` import),
:mod:`.stderr` (capped stderr logs), :mod:`.client` (one SDK session: transports,
protocol eras, raw ``tools/list``, list_changed), :mod:`.results` (raw listings and
results at the boundary), :mod:`.connector` (the :class:`MCPConnector`: lifecycle,
sync, limits, error results).

The SDK is imported only when a connector is created, so commands that never talk to
a server start fast.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Mapping

from palui.connectors.mcp.config import ServerConfig, read_secrets
from palui.errors import ConnectorError

if TYPE_CHECKING:
    from palui.connectors.mcp.connector import MCPConnector
    from palui.service import Service

__all__ = ["MCPConnector", "ServerConfig", "config_from_row", "create_connector"]


def config_from_row(service: "Service", row: Mapping[str, Any]) -> ServerConfig:
    """The :class:`ServerConfig` of a stored ``connectors`` row, secrets read from their file.

    Raises ConnectorError when the stored config or the secrets file is damaged.
    """
    try:
        public = json.loads(row["config_json"] or "{}")
    except ValueError:
        raise ConnectorError(f"the stored configuration of {row['id']} is damaged") from None
    secrets = read_secrets(service.settings.secrets_dir, row["id"])
    try:
        return ServerConfig.from_stored(public, secrets)
    except ConnectorError as e:
        raise ConnectorError(f"{row['id']}: {e}") from None
    except Exception as e:
        raise ConnectorError(f"the stored configuration of {row['id']} is unusable: {e}") from None


def __getattr__(name: str) -> Any:
    if name == "MCPConnector":
        from palui.connectors.mcp.connector import MCPConnector

        return MCPConnector
    raise AttributeError(name)


async def create_connector(service: "Service", row: Mapping[str, Any]) -> "MCPConnector":
    """The live connector for a stored MCP ``connectors`` row; the hub calls it on first use.

    Starts the server and syncs its tools (the rug-pull check of each connection).
    A server that cannot start does **not** raise: the connector is returned in state
    ``error: …``, its calls return error results, and the next use tries again
    (with back-off). A disabled connector is returned without starting anything.

    Raises ConnectorError only when the stored configuration itself is unusable.
    """
    from palui.connectors.mcp.connector import MCPConnector

    config = config_from_row(service, row)
    connector = MCPConnector(service, row["id"], row["name"], config, enabled=bool(row["enabled"]))
    if connector.enabled:
        try:
            await connector.start()
        except ConnectorError:
            pass  # state() says why; call_tool returns it as an error result
    return connector

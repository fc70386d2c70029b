"""MCP servers as connectors (spec §2, §4, §7), through the official ``mcp`` SDK.

Modules: :mod:`.config` (server configs, secrets files, ``mcpServers`` import),
:mod:`.stderr` (capped stderr logs), :mod:`.client` (one SDK session: transports,
protocol eras, raw ``tools/list``, list_changed), :mod:`.results` (raw listings and
results at the boundary), :mod:`.connector` (the :class:`MCPConnector`: lifecycle,
sync, limits, error results), :mod:`.elicit` (a server's questions at the SDK boundary),
:mod:`.refusals` (start errors, 401/403), :mod:`.oauth` (sign-in on the SDK's client auth),
:mod:`.signin_state` (``error: sign in again``), :mod:`.calling` (small pieces of a call).

The SDK is imported only when a connector is created, so commands that never talk to
a server start fast.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from palui.config_schema import stored_value
from palui.connectors.mcp.config import ServerConfig, display_url, read_secrets, write_secrets
from palui.errors import ConnectorError

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from palui.connectors.base import ConnectorEnv
    from palui.connectors.mcp.connector import MCPConnector

__all__ = ["MCPConnector", "ServerConfig", "config_from_row", "create_connector"]


def config_from_row(env: ConnectorEnv, row: Mapping[str, Any]) -> ServerConfig:
    """The :class:`ServerConfig` of a stored ``connectors`` row, secrets read from their file.

    Raises ConnectorError when the stored config or the secrets file is damaged.
    """
    try:
        public = json.loads(row["config_json"] or "{}")
    except ValueError:
        raise ConnectorError(f"the stored configuration of {row['id']} is damaged") from None
    secrets = read_secrets(env.settings.secrets_dir, row["id"])
    try:
        config = ServerConfig.from_stored(public, secrets)
    except ConnectorError as e:
        raise ConnectorError(f"{row['id']}: {e}") from None
    except Exception as e:
        raise ConnectorError(f"the stored configuration of {row['id']} is unusable: {e}") from None
    url = public.get("url")
    if isinstance(url, str) and "url" not in secrets and display_url(url) != url:
        _move_url_to_secrets(env, row["id"], config)
    return _within_ranges(row["id"], config)


def _within_ranges(cid: str, config: ServerConfig) -> ServerConfig:
    """``config`` with a stored own timeout or output limit outside its key's range (stored before the range
    was checked: ``--timeout inf``) replaced by the setting, logged once per read (spec §10.4)."""
    timeout = stored_value("mcp.call_timeout_seconds", config.timeout_seconds)
    size = stored_value("mcp.max_output_bytes", config.max_output_bytes)
    if (timeout, size) == (config.timeout_seconds, config.max_output_bytes):
        return config
    log.warning("%s: a stored timeout or output limit outside its range is ignored; the settings apply", cid)
    return dataclasses.replace(config, timeout_seconds=timeout, max_output_bytes=size)


def _move_url_to_secrets(env: ConnectorEnv, cid: str, config: ServerConfig) -> None:
    """A connector stored before URL passwords and query values were secrets (spec §10): move its
    URL into the secrets file and keep only the redacted one in the database. Best effort: the
    connector works either way."""
    try:
        write_secrets(env.settings.secrets_dir, cid, config.secrets())
        with env.db.write() as c:
            c.execute("UPDATE connectors SET config_json = ? WHERE id = ?",
                      (json.dumps(config.public(), allow_nan=False), cid))
    except Exception as e:
        log.warning("%s: could not move the URL's secrets out of the database: %s", cid, type(e).__name__)


def __getattr__(name: str) -> Any:
    if name == "MCPConnector":
        from palui.connectors.mcp.connector import MCPConnector

        return MCPConnector
    raise AttributeError(name)


async def create_connector(env: ConnectorEnv, row: Mapping[str, Any]) -> MCPConnector:
    """The live connector for a stored MCP ``connectors`` row; the hub calls it on first use.

    Starts the server and syncs its tools (the rug-pull check of each connection). A
    disabled connector is returned without starting anything (state ``disabled``; its
    calls are refused).

    Raises ConnectorError when the server cannot start (the row's state says why) or
    the stored configuration is unusable. Failed starts are remembered for this
    process, so asking again within the back-off (1 s, 2 s, 4 s… 60 s after repeated
    failures) raises at once instead of starting the server again.
    """
    import time

    from palui.connectors.mcp.connector import MCPConnector, backoff_seconds

    key = (str(env.settings.db_path), row["id"])
    failures, last = _START_FAILURES.get(key, (0, 0.0))
    wait = backoff_seconds(failures) - (time.monotonic() - last)
    if wait > 0:
        raise ConnectorError(f"{row['id']}: {row['state']}; the next start attempt is in {wait:.0f} s")
    config = config_from_row(env, row)
    connector = MCPConnector(env, row["id"], row["name"], config, enabled=bool(row["enabled"]))
    if connector.enabled:
        connector.restore_failures(failures, last)
        try:
            await connector.start()
        except ConnectorError:
            _START_FAILURES[key] = connector.failures()
            raise
    _START_FAILURES.pop(key, None)
    return connector


# (database file, connector id) -> (consecutive failures, monotonic time of the last one)
_START_FAILURES: dict[tuple[str, str], tuple[int, float]] = {}

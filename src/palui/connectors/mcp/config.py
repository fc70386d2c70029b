"""Where an MCP connector's secrets live: ``<secrets dir>/<connector id>.json``, mode 0600 (spec §10).

The server configuration itself (:class:`ServerConfig`, URL redaction, ``KEY=VALUE`` pairs,
the ``mcpServers`` import) is pure and shared with the front ends: :mod:`palui.text.mcp_config`.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from palui.errors import ConnectorError
from palui.text.mcp_config import (
    MIN_REDACT_LEN,
    TRANSPORTS,
    ServerConfig,
    display_url,
    expand,
    parse_mcp_servers,
    parse_pairs,
    redact,
    url_secrets,
)

if TYPE_CHECKING:
    from mcp.client import Transport

__all__ = ["MIN_REDACT_LEN", "TRANSPORTS", "ServerConfig", "TransportFactory", "delete_secrets", "display_url",
           "expand", "parse_mcp_servers", "parse_pairs", "read_secrets", "redact", "secrets_path", "url_secrets",
           "write_secrets"]


#: The MCP connector's seam for its transport, as httpx takes one: called with a server's configuration at
#: each connection, it returns the SDK transport to reach the server through (any ``mcp.client.Transport``: the
#: test suite's own servers run in its process over the SDK's memory streams), or None for the real one (the
#: configured command over stdio, or the URL). Only Python code passes one, to ``Service(mcp_transport=...)``;
#: no setting, file or command line reaches it.
TransportFactory = Callable[[ServerConfig], "Transport | None"]


def secrets_path(secrets_dir: Path, connector_id: str) -> Path:
    """``<secrets dir>/<connector id>.json``."""
    return secrets_dir / f"{connector_id}.json"


def write_secrets(secrets_dir: Path, connector_id: str, secrets: Mapping[str, Any]) -> Path:
    """Write a connector's secrets atomically to a file of mode 0600 (directory 0700). Returns the path."""
    secrets_dir.mkdir(parents=True, exist_ok=True)
    os.chmod(secrets_dir, 0o700)
    path = secrets_path(secrets_dir, connector_id)
    fd, tmp = tempfile.mkstemp(prefix=f".{connector_id}.", dir=secrets_dir)  # mkstemp creates mode 0600
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(secrets, f, sort_keys=True, allow_nan=False)
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def read_secrets(secrets_dir: Path, connector_id: str) -> dict[str, Any]:
    """A connector's secrets (``{}`` when it has no file). Raises ConnectorError on a damaged file."""
    path = secrets_path(secrets_dir, connector_id)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as e:
        raise ConnectorError(f"cannot read the secrets file of {connector_id} ({path}): {type(e).__name__}") from None
    if not isinstance(data, dict):
        raise ConnectorError(f"the secrets file of {connector_id} ({path}) is damaged")
    return data


def delete_secrets(secrets_dir: Path, connector_id: str) -> None:
    secrets_path(secrets_dir, connector_id).unlink(missing_ok=True)



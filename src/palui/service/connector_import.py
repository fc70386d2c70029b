"""Service part: importing an ``mcpServers`` JSON file (the format other MCP clients share), spec §7.

The whole file is checked before anything is added; each server is then added through
:meth:`palui.service.connectors.ConnectorsPart.add_async`, a few at a time.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from palui.connectors.mcp.config import ServerConfig, parse_mcp_servers
from palui.errors import PaluiError, UsageError
from palui.service.connectors import ConnectorsPart, absolute_paths, run_sync
from palui.store.db import Database

IMPORT_CONCURRENCY = 4


class ConnectorImportPart:
    """Adding the servers of an ``mcpServers`` file.

    Args:
        db: the database (a name already used by an MCP connector is skipped).
        connectors_part: adds each server.
    """

    def __init__(self, db: Database, connectors_part: ConnectorsPart) -> None:
        self.db = db
        self.connectors_part = connectors_part

    async def from_file_async(
        self, path: Path | str, *, environ: Mapping[str, str] | None = None, enable_read: bool = False
    ) -> list[dict[str, Any]]:
        """Import an ``mcpServers`` JSON file (``${VAR}`` from ``environ``, default the process environment).

        The whole file is checked first (a bad entry or a missing variable adds
        nothing). Then the servers are added, up to four at a time; one that cannot start
        is reported and not stored; a name already used by an MCP connector is skipped. Returns one
        ``{"name","status":"added"|"skipped"|"error","id","message"}`` per server
        (``added`` entries carry the :meth:`ConnectorsPart.add_async` fields too).

        Raises UsageError (unreadable file, bad JSON, bad entry, missing variable).
        """
        from palui.files import Unreadable, read_text

        p = Path(path)
        try:
            text = read_text(p)  # a regular file of at most 1 MB: /dev/zero is endless
        except Unreadable as e:
            raise UsageError(f"{p}: no such file" if str(e) == "file not found" else f"{p}: {e}") from None
        try:
            data = json.loads(text)
        except (ValueError, RecursionError) as e:
            raise UsageError(f"{p}: not valid JSON: {str(e)[:200]}") from None
        servers = parse_mcp_servers(data, os.environ if environ is None else environ, source=str(p))
        # Relative paths in the file mean: relative to the file (it may be read from anywhere).
        base = os.path.abspath(p.parent)
        servers = [(n, absolute_paths(c, base)) for n, c in servers]
        # Servers start side by side (a few at a time): each add computes its id and inserts
        # its row without an await in between, so concurrent adds cannot take the same id.
        import asyncio

        gate = asyncio.Semaphore(IMPORT_CONCURRENCY)

        async def one(name: str, cfg: ServerConfig) -> dict[str, Any]:
            existing = self.db.one("SELECT id FROM connectors WHERE kind = 'mcp' AND name = ?", (name,))
            if existing is not None:
                return {
                    "name": name,
                    "status": "skipped",
                    "id": existing["id"],
                    "message": f"a connector named {name!r} exists already ({existing['id']})",
                }
            async with gate:
                try:
                    added = await self.connectors_part.add_async(name, cfg, enable_read=enable_read)
                except PaluiError as e:
                    return {"name": name, "status": "error", "id": None, "message": str(e)}
            return {**added, "status": "added", "message": f"{len(added['tools'])} tool(s)"}

        return list(await asyncio.gather(*(one(n, c) for n, c in servers)))

    def from_file(
        self, path: Path | str, *, environ: Mapping[str, str] | None = None, enable_read: bool = False
    ) -> list[dict[str, Any]]:
        """Synchronous :meth:`from_file_async`."""
        return run_sync(self.from_file_async(path, environ=environ, enable_read=enable_read))

"""Live connector instances of one process, reused across turns (spec §7).

Built-in connectors are created once. MCP connectors are created from their stored
row on first use and kept (``palui.connectors.mcp``); getting one may start its
server, list its tools and sync the listing into the store (rug-pull check).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from palui.connectors.base import Connector, ConnectorEnv
from palui.connectors.builtin import builtin_connectors
from palui.errors import ConnectorError, NotFound
from palui.text.display import named

if TYPE_CHECKING:
    import asyncio


class ConnectorHub:
    """Maps connector ids to live :class:`Connector` s for one process (one ``PALUI_HOME``).

    Args:
        env: the database, settings and notifier the connectors it creates receive.
    """

    def __init__(self, env: ConnectorEnv) -> None:
        self.env = env
        self._live: dict[str, Connector] = {c.id: c for c in builtin_connectors()}
        self._lock: asyncio.Lock | None = None  # made by the first get (inside the event loop)

    async def get(self, cid: str) -> Connector:
        """The live connector ``cid``; MCP connectors are created (and connected) on first use.

        Raises NotFound for an unknown id, ConnectorError when an MCP server cannot start or is
        blocked until the person acts (``error: sign in again``).
        """
        if cid in self._live:
            conn = self._live[cid]
            why = conn.blocked()
            if why:
                raise ConnectorError(why)
            return conn
        if self._lock is None:
            import asyncio

            self._lock = asyncio.Lock()
        async with self._lock:
            if cid in self._live:
                return self._live[cid]
            row = self.env.db.one("SELECT * FROM connectors WHERE id = ?", (cid,))
            if row is None:
                raise NotFound(f"unknown connector {named(cid)}")
            if row["kind"] != "mcp":
                raise NotFound(f"connector {named(cid)} has no implementation")
            from palui.connectors.mcp import create_connector  # written by the MCP layer

            conn = await create_connector(self.env, dict(row))
            self._live[cid] = conn
            return conn

    def attach(self, connector: Connector) -> None:
        """Use this live connector for its id (in-process connectors, tests)."""
        self._live[connector.id] = connector

    def forget(self, cid: str) -> Connector | None:
        """Drop a live connector (after remove or config change); the caller closes it."""
        return self._live.pop(cid, None)

    def state(self, cid: str) -> str | None:
        """The live state of ``cid`` in this process, None when it is not live here."""
        c = self._live.get(cid)
        return c.state() if c else None

    def live(self, cid: str) -> Connector | None:
        """The connector live in this process, or None (nothing is started)."""
        return self._live.get(cid)

    async def close(self) -> None:
        for c in list(self._live.values()):
            try:
                await c.close()
            except Exception:  # closing must not stop the others from closing
                pass
        self._live = {c.id: c for c in builtin_connectors()}

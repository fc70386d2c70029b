"""What every service over one ``PALUI_HOME`` shares, built once: settings, database, clock, the person's
channel, the re-decision of approvals and the connector hub.

:class:`Redecision` is the lowest part: pending approvals decided again after a change (spec §5), called
by every part that changes tools, classes, switches or connectors, and by the connector hub's
``on_change`` (the hub is below the service: it gets this method, never a part above). The decision
itself is :mod:`palui.store.redecide`; an approval whose call may no longer run is cancelled and the
person told, so ``approvals list`` stays true.

Both the full :class:`~palui.service.api.Service` and the light
:class:`~palui.service.light.ToolsService` open their home here, so a light command starts exactly as
the full service does (the settings check, the database and its migrations) and then builds fewer parts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from palui.config import Settings, load_settings
from palui.connectors.base import ConnectorEnv
from palui.connectors.hub import ConnectorHub
from palui.home import prepare_data_dir
from palui.service.clock import Clock
from palui.service.notifier import Notifier
from palui.store import redecide, standing
from palui.store.db import Database

if TYPE_CHECKING:
    from palui.connectors.mcp.config import TransportFactory


class Redecision:
    """Re-deciding pending approvals.

    Args:
        db: the database (approvals, tools, turns).
        notifier: the person's channel, told of each cancellation.
    """

    def __init__(self, db: Database, notifier: Notifier) -> None:
        self.db = db
        self.notifier = notifier
        self._decided_at: tuple[int, int | None] | None = None

    def redecide_approvals(self) -> list[str]:
        """Decide every pending approval again (spec §5) and cancel, telling the person, each whose
        call may no longer run: called after every change to tools, classes, switches or connectors,
        so ``approvals list`` stays true; and suspend, telling the person, every standing approval whose tool
        changed (spec §5.9). Returns the cancelled ids.

        A decision depends only on the stored tools and connectors (the catalog's version moves with
        every change to them, in any process) and on the approval's paused turn: when neither the
        version nor the newest approval moved since this process last decided, nothing can have
        changed and nothing is read again (the tick and every listing call this)."""
        r = self.db.one("SELECT (SELECT version FROM catalog), (SELECT MAX(rowid) FROM approvals)")
        key = (r[0], r[1]) if r is not None else None
        if key is not None and key == self._decided_at:
            return []
        out = redecide.cancel_refused(self.db, self.notifier)
        if key is None or self._decided_at is None or key[0] != self._decided_at[0]:
            # a tool changed: the standing approvals bound to it are suspended (spec §5.9)
            standing.suspend_changed(self.db, self.notifier)
        self._decided_at = key
        return out


@dataclass(frozen=True)
class Collaborators:
    """The shared collaborators of one service; parts receive the ones they use at construction."""

    settings: Settings
    db: Database
    clock: Clock
    notifier: Notifier
    redecision: Redecision
    hub: ConnectorHub

    @classmethod
    def open(cls, settings: Settings | None = None, mcp_transport: TransportFactory | None = None) -> Collaborators:
        """Load the settings (``None``: from the environment), make the data directory, open the
        database (migrating it) and build the rest; ``mcp_transport`` is the MCP connectors' seam
        (:data:`~palui.connectors.mcp.config.TransportFactory`, None: their real transports). Raises
        ConfigError (Palui refuses to start)."""
        settings = settings or load_settings()
        prepare_data_dir(settings.data_dir, settings.db_path.name)  # one clear line for a file or /proc/1
        db = Database(settings.db_path)
        clock = Clock(settings)
        notifier = Notifier(db, settings, clock)
        redecision = Redecision(db, notifier)
        # A change the hub sees (a server's new listing) re-decides pending approvals: the hub is below the
        # service, so it gets the lowest part's method, never the service.
        hub = ConnectorHub(ConnectorEnv(db=db, settings=settings, notify=notifier,
                                        on_change=redecision.redecide_approvals, mcp_transport=mcp_transport))
        return cls(settings, db, clock, notifier, redecision, hub)

"""The service's core: settings, database, the person's channel, the connector hub, the turn runtime.

Every part of the service (:mod:`palui.service`) builds on this. The parts reach the
runner and the connectors only through the narrow objects made here: the
:class:`~palui.connectors.base.ConnectorEnv` of the hub and the
:class:`~palui.runner.deps.RunnerDeps` of each turn.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from palui.config import Settings, load_settings
from palui.connectors.base import ConnectorEnv
from palui.connectors.hub import ConnectorHub
from palui.errors import ConfigError
from palui.runner import caps, redecide
from palui.service.notifier import Notifier
from palui.service.runtime import Runtime
from palui.store.db import Database
from palui.types import Notice

if TYPE_CHECKING:
    import asyncio
    from zoneinfo import ZoneInfo


class ServiceCore:
    """Holds what every part shares for one ``PALUI_HOME``.

    Args:
        settings: validated settings; ``None`` loads them from the environment
            (raises ConfigError on a bad config).

    Attributes:
        notifier: the person's channel; chat channels subscribe to it (:meth:`Notifier.subscribe`).
        runtime: the turn tasks of this process; ``palui serve`` also starts its tick.
    """

    def __init__(self, settings: Settings | None = None) -> None:
        self.settings = settings or load_settings()
        self.settings.data_dir.mkdir(parents=True, exist_ok=True)
        self.db = Database(self.settings.db_path)
        self.notifier = Notifier(self.db, self.settings)
        self.hub = ConnectorHub(ConnectorEnv(db=self.db, settings=self.settings, notify=self.notifier,
                                             on_change=self.redecide_approvals))
        self.runtime = Runtime(self)
        self._setup()

    def _setup(self) -> None:
        """Start-up work of the parts (each part extends it and calls ``super()._setup()``)."""

    def redecide_approvals(self) -> list[str]:
        """Decide every pending approval again (SPEC §5) and cancel, telling the person, each whose
        call may no longer run: called after every change to tools, classes, switches or connectors,
        so ``approvals list`` stays true. Returns the cancelled ids."""
        return redecide.cancel_refused(self.db, self.notifier)

    def notify(self, kind: str, text: str, *, turn_id: str | None = None,
               conversation_id: str | None = None, approval_id: str | None = None,
               elicitation_id: str | None = None) -> None:
        """Put a message on the person's channel (SPEC §1): :class:`~palui.service.notifier.Notifier`.

        ``kind`` is one of answer, approval, elicitation, job, webhook, cap, notice, message. The
        inbox write comes first; deliveries never raise.
        """
        self.notifier(kind, text, turn_id=turn_id, conversation_id=conversation_id, approval_id=approval_id,
                      elicitation_id=elicitation_id)

    def check_delivery_targets(self) -> None:
        """The full check of ``notify.apprise`` and ``messages.contacts`` that ``palui serve`` makes before
        it starts (every other start checks their syntax only: importing apprise is slow). Raises
        ConfigError naming the key and the item, never the URL (apprise URLs hold tokens)."""
        from palui import delivery

        fix = "is not a URL apprise can use: check the service name and the URL's parts in apprise's list of services"
        where = self.settings.config_file
        urls = list(self.settings.get("notify.apprise"))
        for position in delivery.unknown_targets(urls):
            scheme = urls[position - 1].split("://", 1)[0][:20]
            raise ConfigError(f"{where}: key 'notify.apprise': item {position} (a {scheme}:// URL) {fix}")
        contacts = dict(self.settings.get("messages.contacts"))
        names = list(contacts)
        for position in delivery.unknown_targets([contacts[n] for n in names]):
            raise ConfigError(f"{where}: key 'messages.contacts': contact {names[position - 1]!r} {fix}")

    def inbox(self, limit: int = 100) -> list[dict[str, Any]]:
        """The newest ``limit`` messages, oldest first: ``[{"time","kind","text","turn"}]`` (ISO 8601 UTC)."""
        rows = self.db.all("SELECT * FROM (SELECT * FROM inbox ORDER BY id DESC LIMIT ?) ORDER BY id", (limit,))
        return [{"time": datetime.fromtimestamp(r["time"], UTC).isoformat(), "kind": r["kind"],
                 "text": r["text"], "turn": r["turn_id"]} for r in rows]

    def timezone(self) -> ZoneInfo | None:
        """The zone that decides where a day starts and how times are shown (``caps.timezone``;
        None is the system zone)."""
        return caps.zone(self.settings.get("caps.timezone"))

    # -- the background runtime, for front ends -------------------------------------------------

    async def start_background(self, tick_seconds: float | None = None) -> None:
        """Start the tick (``palui serve``): resumes, queued turns, the job scheduler. Raises ConfigError."""
        await self.runtime.start(tick_seconds)

    async def stop_background(self, grace_seconds: float = 30.0) -> None:
        """Drain and stop: turns in flight pause at their next step boundary, connectors close."""
        await self.runtime.shutdown(grace_seconds)

    def begin_drain(self) -> None:
        """Refuse new work now (a signal arrived); :meth:`stop_background` finishes the drain."""
        self.runtime.draining = True

    def on_shutdown(self, fn: Callable[[], None]) -> None:
        """Call ``fn`` last when the background stops (e.g. removing ``serve.json``)."""
        self.runtime.on_shutdown.append(fn)

    def subscribe(self, turn_id: str) -> asyncio.Queue[dict[str, Any] | None]:
        """A queue of the turn's events as it runs in this process, ``None`` when its task ends."""
        return self.runtime.subscribe(turn_id)

    def unsubscribe(self, turn_id: str, q: asyncio.Queue[dict[str, Any] | None]) -> None:
        self.runtime.unsubscribe(turn_id, q)

    def subscribe_notices(self, fn: Callable[[Notice], None]) -> Callable[[], None]:
        """Receive every later message to the person's channel (chat channels do, at ``palui serve``
        start); returns a function that unsubscribes. ``fn`` must not block."""
        return self.notifier.subscribe(fn)

    async def close(self) -> None:
        """Close the connectors live in this process (MCP sessions and their servers)."""
        await self.hub.close()

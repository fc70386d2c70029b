"""The service's shared core: settings, database, the person's channel."""

from __future__ import annotations

import logging
from datetime import datetime, timezone
from typing import Any

from palui import channel
from palui.config import Settings, load_settings
from palui.store.db import Database


class ServiceBase:
    """Holds the settings and the database of one ``PALUI_HOME``.

    Args:
        settings: validated settings; ``None`` loads them from the environment
            (raises ConfigError on a bad config).
    """

    def __init__(self, settings: Settings | None = None) -> None:
        self.settings = settings or load_settings()
        self.settings.data_dir.mkdir(parents=True, exist_ok=True)
        self.db = Database(self.settings.db_path)
        self._setup()

    def _setup(self) -> None:
        """Start-up work of the parts (each part extends it and calls ``super()._setup()``)."""

    def notify(self, kind: str, text: str, *, turn_id: str | None = None,
               conversation_id: str | None = None) -> None:
        """Put a message on the person's channel: the Palui inbox, then the apprise targets (SPEC §1).

        ``kind`` is one of answer, approval, job, webhook, cap, notice, message. The
        inbox write comes first; delivery to ``notify.apprise`` runs in a background
        thread and its failures are logged, never raised (:mod:`palui.channel`).
        """
        channel.write_inbox(self.db, kind, text, turn_id=turn_id, conversation_id=conversation_id)
        try:
            channel.deliver_in_background(self.settings.get("notify.apprise"), text, title=channel.title_for(kind))
        except Exception:  # e.g. no thread can be started: the inbox already has the message
            logging.getLogger("palui.channel").exception("could not start channel delivery")

    def inbox(self, limit: int = 100) -> list[dict[str, Any]]:
        """The newest ``limit`` messages, oldest first: ``[{"time","kind","text","turn"}]`` (ISO 8601 UTC)."""
        rows = self.db.all("SELECT * FROM (SELECT * FROM inbox ORDER BY id DESC LIMIT ?) ORDER BY id", (limit,))
        return [{"time": datetime.fromtimestamp(r["time"], timezone.utc).isoformat(), "kind": r["kind"],
                 "text": r["text"], "turn": r["turn_id"]} for r in rows]

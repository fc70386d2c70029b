"""Service part: keeping the database bounded and copying it (spec §10.1, §10.2).

- :meth:`MaintenancePart.prune_expired` is called by the service's tick: a small batch per table
  of what ``retention.days`` (default 90) no longer keeps.
- :meth:`MaintenancePart.prune` is ``palui prune --before DATE``: everything older, at once.
- :meth:`MaintenancePart.backup` is ``palui backup FILE``: SQLite's online backup, safe while the
  service runs.

What is pruned and what is kept is :mod:`palui.store.retention`'s rule.
"""

from __future__ import annotations

from datetime import date, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from palui.config import Settings
from palui.errors import PaluiError, UsageError
from palui.service.clock import Clock
from palui.store import retention
from palui.store.db import Database
from palui.text.display import shown
from palui.triggers.webhooks import REPLAY_WINDOW_SECONDS

if TYPE_CHECKING:
    from palui.results import Backup, Pruned

DAY = 86400.0


class MaintenancePart:
    """Retention and backups.

    Args:
        db: the database pruned and copied.
        settings: ``retention.days``, ``retention.gateway_days``.
        clock: the time now and the zone of a ``--before`` date.
    """

    def __init__(self, db: Database, settings: Settings, clock: Clock) -> None:
        self.db = db
        self.settings = settings
        self.clock = clock

    def prune_expired(self, now: float | None = None) -> dict[str, int]:
        """One small batch (per table) of rows older than ``retention.days``, and of gateway results older than
        ``retention.gateway_days`` (``gateway_results``): the tick's share."""
        now = self.clock.now() if now is None else now
        out = retention.prune(self.db, now - self.settings.retention.days * DAY)
        out["gateway_results"] = retention.prune_gateway(self.db, now - self.settings.retention.gateway_days * DAY)
        return out

    def prune(self, before: str) -> Pruned:
        """Delete untrusted content, inbox messages and webhook deliveries older than ``before``
        (``YYYY-MM-DD``, midnight in ``caps.timezone``, or an ISO 8601 time). Audit rows are kept, and so is
        a webhook delivery record still needed as a replay key (spec §8.5: a body-only one for
        ``retention.days``, a Standard Webhooks one for 24 h), whatever ``before`` says.
        Returns ``{"before": ISO time, "deleted": {table: rows}}``. Raises UsageError for a bad date
        or one more than two days after now (a mistyped year must not delete everything; tomorrow's
        date, in any time zone, is how to delete everything stored so far)."""
        when = self._parse_before(before)
        if when.timestamp() > self.clock.now() + 2 * DAY:
            raise UsageError(f"--before {before.strip()}: that is more than two days after now; prune deletes what "
                             "is older than a date (everything stored so far: --before tomorrow's date)")
        now = self.clock.now()
        replay = retention.ReplayKept(body_only_since=now - float(self.settings.retention.days) * DAY,
                                      timed_since=now - REPLAY_WINDOW_SECONDS)
        deleted = retention.prune(self.db, when.timestamp(), batch=None, replay=replay)
        kept = self.db.row("SELECT COUNT(*) FROM webhook_deliveries WHERE received_at < ?", (when.timestamp(),))[0]
        return {"before": when.isoformat(), "deleted": deleted, "replay_keys_kept": int(kept)}

    def _parse_before(self, text: str) -> datetime:
        tz = self.clock.timezone()
        try:
            if len(text.strip()) == 10:
                d = date.fromisoformat(text.strip())
                when = datetime(d.year, d.month, d.day, tzinfo=tz)
            else:
                when = datetime.fromisoformat(text.strip())
            if when.tzinfo is None:
                when = when.replace(tzinfo=tz) if tz is not None else when.astimezone()
            when = when.astimezone(tz) if tz is not None else when.astimezone()
            when.timestamp()  # a year too early or late for the clock fails here, not in the delete
        except (ValueError, OverflowError, OSError):
            raise UsageError(f"--before {shown(text, one_line=True)}: give a date (YYYY-MM-DD) or an ISO 8601 "
                             "time") from None
        return when

    def backup(self, target: str | Path) -> Backup:
        """Copy the database into the new file ``target`` (mode 0600) while everything keeps running.
        Returns ``{"file", "bytes"}``. Raises PaluiError when the file exists or cannot be written."""
        import sqlite3

        if not str(target).strip():
            raise UsageError("a backup needs a file name (palui backup FILE)")
        path = Path(target).expanduser()
        try:
            self.db.backup(path)
        except FileExistsError:
            raise PaluiError(f"{shown(str(path), one_line=True)} exists already: give a new file name") from None
        except (OSError, sqlite3.Error) as e:
            raise PaluiError(f"cannot write the backup to {shown(str(path), one_line=True)}: "
                             f"{shown(str(e), one_line=True)}") from None
        return {"file": str(path.resolve()), "bytes": path.stat().st_size}

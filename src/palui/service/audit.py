"""Service part: the hash-chained audit log — its rows, verify, export, the head's daily post (spec §10).

The chain itself is :mod:`palui.store.audit_chain`; every row is written by
:func:`palui.runner.audit.record`. Once a day (in ``caps.timezone``, on the scheduler clock of
:mod:`palui.triggers.clock`) the service's tick posts the head to the person's channel, so a copy
of it leaves the machine (apprise targets, chat channels): a rewrite of the log and of the
``audit_head`` file still disagrees with a head the person holds elsewhere.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime
from typing import TYPE_CHECKING, Any

from palui.errors import UsageError
from palui.runner import audit
from palui.service.clock import Clock
from palui.service.notifier import Notifier
from palui.store import ids
from palui.store.db import Database

if TYPE_CHECKING:
    from palui.results import AuditRow

#: A noted head: the full hash or a prefix of at least 16 hex digits (64 bits).
NOTED = re.compile(r"^[0-9a-fA-F]{16,64}$")
_POSTED_KEY = "audit_head_posted_day"


class AuditPart:
    """Reading, checking and exporting the audit log.

    Args:
        db: the database (the audit rows, the ``kv`` table).
        notifier: the person's channel (the daily head).
        clock: the zone where a day starts.
    """

    def __init__(self, db: Database, notifier: Notifier, clock: Clock) -> None:
        self.db = db
        self.notifier = notifier
        self.clock = clock

    def rows(self, turn: str | None = None, limit: int = 500) -> list[AuditRow]:
        """Audit rows oldest first (spec §10): see :func:`palui.runner.audit.rows`; ``turn`` may be a unique
        prefix of its id."""
        return audit.rows(self.db, ids.resolve(self.db, turn) if turn else turn, limit)

    def verify(self, noted: str | None = None) -> dict[str, Any]:
        """``palui audit verify [--head HASH]``: see :func:`palui.runner.audit.verify`. Raises UsageError for
        a ``noted`` value that is not 16–64 hex digits."""
        if noted is not None and not NOTED.match(noted.strip()):
            raise UsageError("--head takes the head's hash (64 hex digits, or at least its first 16)")
        return audit.verify(self.db, noted.strip() if noted else None)

    def export(self, since: str | None = None) -> Iterator[dict[str, Any]]:
        """``palui audit export --jsonl [--since WHEN]``: rows with their hashes, oldest first. ``since`` is
        a date (``2026-12-01``, the start of that day in ``caps.timezone``) or an ISO time. Raises UsageError."""
        return audit.export(self.db, None if since is None else self._since(since))

    def _since(self, text: str) -> float:
        try:
            d = datetime.fromisoformat(text.strip())
        except ValueError:
            raise UsageError(f"--since takes a date (YYYY-MM-DD) or an ISO time, not {text!r}") from None
        if d.tzinfo is None:
            d = d.replace(tzinfo=self.clock.timezone()) if self.clock.timezone() else d.astimezone()
        return d.timestamp()

    def post_head(self, now: float) -> bool:
        """Post the audit head to the person's channel if it was not posted yet on ``now``'s day (epoch
        seconds; the day in ``caps.timezone``). Returns True when it posted. One post per day: the day is
        claimed with a compare-and-set in the ``kv`` table before the notice goes out."""
        head = audit.head(self.db)
        if head is None:
            return False
        day = datetime.fromtimestamp(now, self.clock.timezone()).date().isoformat()
        with self.db.write() as c:
            r = c.execute("SELECT value FROM kv WHERE key = ?", (_POSTED_KEY,)).fetchone()
            if r is not None and r[0] >= day:
                return False
            c.execute("INSERT OR REPLACE INTO kv (key, value) VALUES (?, ?)", (_POSTED_KEY, day))
        self.notifier("notice", f"Audit head on {day}: row {head['id']}, hash {head['hash']}. Keep it somewhere "
                              f"else; later, palui audit verify --head {head['hash']} shows whether any row up to "
                              "it was changed, inserted or deleted.")
        return True


class AuditHeadPost:
    """The service ticker that posts the audit head once a day (registered by the runtime).

    Args:
        audit_part: posts the head.
        clock: the scheduler clock decides the day, so tests can move it.
    """

    def __init__(self, audit_part: AuditPart, clock: Clock) -> None:
        self.audit_part = audit_part
        self.clock = clock

    async def tick(self, _now: float) -> None:
        """Post the head if today's post is due (the scheduler clock, so tests can move the day)."""
        self.audit_part.post_head(self.clock.scheduler_now())

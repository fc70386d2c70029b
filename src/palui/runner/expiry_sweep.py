"""When the service sweeps expired approvals and questions: once at start, then when the kept next expiry passes.

The sweep itself (:func:`palui.runner.approvals.sweep`) searches only the pending rows (spec §5.2). The tick
does not run it every second: it keeps the earliest expiry of what is pending and sweeps when that time has
passed, or when new approvals or questions were stored (by this process or another) since it last looked,
or while something only a sweep can see is there: a question held inside an open call whose process may end
(checked each tick), an answer waiting to be sent (checked each minute). Looking costs one statement of two
``MAX(rowid)`` searches per tick, whatever the history (docs/decisions/0154-reads-bounded.md).
"""

from __future__ import annotations

import math

from palui.runner import approvals, elicitations
from palui.store.db import Database

#: Seconds until the next look while a question waits inside an open call (its process may end any time).
IN_CALL_RECHECK = 1.0
#: Seconds until the next look while an answer waits to be sent (cleared once its turn ended unsent).
UNSENT_RECHECK = 60.0


class ExpirySweep:
    """The kept next sweep time of one service.

    Args:
        db: the database (approvals, elicitations).
    """

    def __init__(self, db: Database) -> None:
        self.db = db
        self.next_at = 0.0  # epoch seconds; 0: at the first tick
        self._marks: tuple[int | None, int | None] | None = None

    def tick(self, now: float) -> int:
        """Sweep if due at ``now`` (epoch seconds); returns how many approvals the sweep expired (0 when not run)."""
        marks = self._stored_marks()
        if marks == self._marks and now < self.next_at:
            return 0
        return self.run(now, marks)

    def run(self, now: float, marks: tuple[int | None, int | None] | None = None) -> int:
        """Sweep now and keep the next time a sweep has work."""
        self._marks = marks if marks is not None else self._stored_marks()
        n = approvals.sweep(self.db, now)
        r = self.db.one("SELECT MIN(expires_at) FROM approvals WHERE status = 'pending'")
        soonest, in_call, unsent = elicitations.next_expiry(self.db)
        times = [t for t in (r[0] if r else None, soonest) if t is not None]
        if in_call:
            times.append(now + IN_CALL_RECHECK)
        if unsent:
            times.append(now + UNSENT_RECHECK)
        self.next_at = min(times, default=math.inf)
        return n

    def _stored_marks(self) -> tuple[int | None, int | None]:
        r = self.db.one("SELECT (SELECT MAX(rowid) FROM approvals), (SELECT MAX(rowid) FROM elicitations)")
        return (r[0], r[1]) if r else (None, None)

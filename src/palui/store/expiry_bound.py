"""How long an approval or a server's question stays open, as stored rows are read (spec §5.5, §10.4).

``approvals.chat_expiry_seconds`` and ``approvals.job_expiry_seconds`` are at most 30 days since they were
bounded; before that ``chat_expiry_seconds = 99999999999999999999999`` stored an approval whose expiry no
clock can show, and every command that listed it crashed. A stored expiry is read as at most
:data:`MAX_OPEN_SECONDS` after the row was made: :func:`iso` shows it so, and :func:`clamp_pending` writes
it so into pending rows (the sweeps call it), so what is shown and what expires agree.
"""

from __future__ import annotations

import logging
import sqlite3
from datetime import UTC, datetime

from palui.config_schema import RANGES

log = logging.getLogger(__name__)

#: The longest an approval or a question stays open (seconds): the top of the expiry settings' range.
MAX_OPEN_SECONDS = max(RANGES["approvals.chat_expiry_seconds"][0], RANGES["approvals.job_expiry_seconds"][0])


def bounded(created_at: float, expires_at: float) -> float:
    """``expires_at`` (epoch seconds), at most :data:`MAX_OPEN_SECONDS` after ``created_at`` (also for an
    infinite or NaN expiry)."""
    latest = created_at + MAX_OPEN_SECONDS
    return expires_at if expires_at <= latest else latest  # NaN compares false: the latest time


def iso(created_at: float, expires_at: float) -> str:
    """The expiry as ISO 8601 UTC, bounded (:func:`bounded`)."""
    return datetime.fromtimestamp(bounded(created_at, expires_at), UTC).isoformat()


def clamp_pending(c: sqlite3.Connection, table: str) -> int:
    """Bound the stored expiry of the pending rows of ``table`` (``approvals`` or ``elicitations``) on
    connection ``c``, inside the caller's transaction; each one changed is logged. Returns how many."""
    if table not in ("approvals", "elicitations"):
        raise ValueError(table)
    rows = c.execute(f"SELECT id FROM {table} WHERE status = 'pending' AND NOT (expires_at <= created_at + ?)",
                     (MAX_OPEN_SECONDS,)).fetchall()
    for (row_id,) in rows:
        log.warning("%s %s had an expiry no clock can hold (set by an unbounded expiry setting): it now expires "
                    "%d days after it was made", table[:-1], row_id, MAX_OPEN_SECONDS // 86_400)
    if rows:
        c.execute(f"UPDATE {table} SET expires_at = created_at + ? WHERE status = 'pending'"
                  " AND NOT (expires_at <= created_at + ?)", (MAX_OPEN_SECONDS, MAX_OPEN_SECONDS))
    return len(rows)

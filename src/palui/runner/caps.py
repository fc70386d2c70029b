"""Usage and run counters behind the global caps (SPEC §6). Writes go through ``db.write``."""

from __future__ import annotations

import time
from datetime import datetime
from zoneinfo import ZoneInfo

from palui.store.db import Database


def zone(name: str | None) -> ZoneInfo | None:
    """The caps time zone (None = the system zone)."""
    return ZoneInfo(name) if name else None


def day(now: float, tz: ZoneInfo | None) -> str:
    """``YYYY-MM-DD`` of ``now`` (epoch seconds) in ``tz``."""
    return datetime.fromtimestamp(now, tz).astimezone(tz).strftime("%Y-%m-%d")


def record_usage(db: Database, *, turn_id: str, job_id: str | None, tokens: int, tz: ZoneInfo | None,
                 now: float | None = None) -> None:
    """Count ``tokens`` (input + output) against today."""
    now = time.time() if now is None else now
    if tokens <= 0:
        return
    with db.write() as c:
        c.execute("INSERT INTO usage (time, day, turn_id, job_id, tokens) VALUES (?,?,?,?,?)",
                  (now, day(now, tz), turn_id, job_id, tokens))


def tokens_today(db: Database, tz: ZoneInfo | None, job_id: str | None = None, now: float | None = None) -> int:
    now = time.time() if now is None else now
    if job_id is None:
        r = db.one("SELECT COALESCE(SUM(tokens), 0) FROM usage WHERE day = ?", (day(now, tz),))
    else:
        r = db.one("SELECT COALESCE(SUM(tokens), 0) FROM usage WHERE day = ? AND job_id = ?", (day(now, tz), job_id))
    return int(r[0])


def runs_last_hour(db: Database, now: float | None = None) -> int:
    now = time.time() if now is None else now
    return int(db.one("SELECT COUNT(*) FROM runs WHERE time > ?", (now - 3600,))[0])


def next_day(tz: ZoneInfo | None, now: float | None = None) -> str:
    """ISO time of the next midnight in ``tz`` (when the daily token cap frees)."""
    from datetime import timedelta

    now = time.time() if now is None else now
    d = datetime.fromtimestamp(now, tz).astimezone(tz)
    midnight = (d + timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
    return midnight.isoformat()


def window_frees_at(db: Database, limit: int, now: float | None = None) -> str | None:
    """ISO time when the sliding hour has room for one more run."""
    from datetime import timezone

    now = time.time() if now is None else now
    rows = db.all("SELECT time FROM runs WHERE time > ? ORDER BY time DESC LIMIT 1 OFFSET ?", (now - 3600, limit - 1))
    if not rows:
        return None
    return datetime.fromtimestamp(rows[0][0] + 3600, timezone.utc).isoformat()

"""Usage and run counters behind the global caps (spec §6): what was used today and how many turns started in
the sliding hour. Writes go through ``db.write``.

Every read here costs the same whatever the history (docs/decisions/0072-cap-counters-kept-by-triggers.md):
tokens come from the running totals in ``usage_days`` and turn starts from the per-minute counts in
``run_minutes``, both kept by triggers inside the transaction that writes the ``usage`` or ``runs`` row they count
(migration 11), so they are exactly as current as the rows, also inside the admitting
transaction of :func:`palui.runner.state.claim_new`. Kept in the store, not the runner, so that a command that
only shows them (``palui status``, ``palui jobs list``) imports no runner code
(docs/decisions/0085-a-light-cli-start.md); the verdicts over them are :mod:`palui.runner.caps`.
"""

from __future__ import annotations

import sqlite3
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from palui.store.db import Database

if TYPE_CHECKING:
    from zoneinfo import ZoneInfo

PAUSE_KEY = "pause"  # kv key of the global pause (spec §6)


def zone(name: str | None) -> ZoneInfo | None:
    """The caps time zone (None = the system zone)."""
    if not name:
        return None
    from zoneinfo import ZoneInfo

    return ZoneInfo(name)


def day(now: float, tz: ZoneInfo | None) -> str:
    """``YYYY-MM-DD`` of ``now`` (epoch seconds) in ``tz``."""
    return datetime.fromtimestamp(now, tz).astimezone(tz).strftime("%Y-%m-%d")


def waiting_for_tokens(c: sqlite3.Connection, before: float | None = None) -> bool:
    """Whether Palui is paused by the daily token cap with a turn waiting for room: a new turn queued (never
    counted as a run) created before ``before`` (any, when None), read on connection ``c``."""
    from palui.policy.caps import DAILY_TOKENS

    pause = c.execute("SELECT value FROM kv WHERE key = ?", (PAUSE_KEY,)).fetchone()
    if pause is None or pause[0] != DAILY_TOKENS:
        return False
    return c.execute("SELECT 1 FROM turns t WHERE t.status = 'queued' AND t.created_at < ? AND NOT EXISTS"
                     " (SELECT 1 FROM runs r WHERE r.turn_id = t.id) LIMIT 1",
                     (float("inf") if before is None else before,)).fetchone() is not None


def tokens_on(c: sqlite3.Connection, today: str, job_id: str) -> int:
    """Tokens counted on ``today`` for every turn (``job_id`` ``""``) or for one job: one counter row."""
    r = c.execute("SELECT tokens FROM usage_days WHERE day = ? AND job_id = ?", (today, job_id)).fetchone()
    return int(r[0]) if r else 0


def runs_since(c: sqlite3.Connection, start: float) -> int:
    """Turn starts with ``time > start`` (epoch seconds), exactly: the whole minutes after the one
    holding ``start`` from their counters (at most 61 rows for the sliding hour), plus the rows of
    that first minute counted one by one. The minute of a time is computed by SQLite as the
    triggers compute it, so a run on a minute's edge is never counted twice or missed."""
    first = c.execute("SELECT CAST(? / 60 AS INTEGER)", (start,)).fetchone()[0]
    whole = c.execute("SELECT COALESCE(SUM(runs), 0) FROM run_minutes WHERE minute > ?", (first,)).fetchone()[0]
    edge = c.execute("SELECT COUNT(*) FROM runs WHERE time > ? AND time < ? AND CAST(time / 60 AS INTEGER) = ?",
                     (start, start + 61, first)).fetchone()[0]
    return int(whole) + int(edge)


def record_usage(db: Database, *, turn_id: str, job_id: str | None, tokens: int, tz: ZoneInfo | None,
                 now: float | None = None, cached: int = 0, weight: float | None = None) -> None:
    """Count ``tokens`` against today (the counters follow in the same transaction): what the caps count of one
    request (:func:`palui.policy.caps.counted_tokens`). ``cached``: its cache-read input tokens, kept apart with
    the ``weight`` they were counted at (spec §6.4)."""
    now = time.time() if now is None else now
    if tokens <= 0 and cached <= 0:
        return
    with db.write() as c:
        c.execute("INSERT INTO usage (time, day, turn_id, job_id, tokens, cached_tokens, cached_weight)"
                  " VALUES (?,?,?,?,?,?,?)", (now, day(now, tz), turn_id, job_id, max(tokens, 0), max(cached, 0),
                                              weight if cached > 0 else None))


def cached_today(db: Database, tz: ZoneInfo | None, job_id: str | None = None, now: float | None = None) -> int:
    """Cache-read input tokens of today's requests in ``tz`` (all turns, or one job's): the part of
    :func:`tokens_today` that counted at its weight (spec §6.4), one counter row."""
    now = time.time() if now is None else now
    r = db.one("SELECT cached_tokens FROM usage_days WHERE day = ? AND job_id = ?", (day(now, tz), job_id or ""))
    return int(r[0]) if r else 0


def tokens_today(db: Database, tz: ZoneInfo | None, job_id: str | None = None, now: float | None = None) -> int:
    """Tokens counted today in ``tz`` (all turns, or one job's): one counter row, whatever the history."""
    now = time.time() if now is None else now
    with db.read() as c:
        return tokens_on(c, day(now, tz), job_id or "")


def runs_last_hour(db: Database, now: float | None = None, origin: str | None = None) -> int:
    """Turn starts in the sliding hour before ``now`` (spec §6): of every origin from the per-minute
    counters; of one ``origin`` (the webhook share) by its index, bounded by that share's cap."""
    now = time.time() if now is None else now
    if origin is None:
        with db.read() as c:
            return runs_since(c, now - 3600)
    return int(db.row("SELECT COUNT(*) FROM runs WHERE time > ? AND origin = ?", (now - 3600, origin))[0])


def next_day(tz: ZoneInfo | None, now: float | None = None) -> str:
    """ISO time of the next midnight in ``tz`` (when the daily token cap frees)."""
    from datetime import timedelta

    now = time.time() if now is None else now
    d = datetime.fromtimestamp(now, tz).astimezone(tz)
    midnight = (d + timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
    return midnight.isoformat()


def window_frees_at(db: Database, limit: int, now: float | None = None, origin: str | None = None) -> str | None:
    """ISO time when the sliding hour has room for one more run (of ``origin`` only, when given:
    the webhook share), or None when it has room now."""

    now = time.time() if now is None else now
    if origin is None:
        rows = db.all("SELECT time FROM runs WHERE time > ? ORDER BY time DESC LIMIT 1 OFFSET ?",
                      (now - 3600, limit - 1))
    else:
        rows = db.all("SELECT time FROM runs WHERE time > ? AND origin = ? ORDER BY time DESC LIMIT 1 OFFSET ?",
                      (now - 3600, origin, limit - 1))
    if not rows:
        return None
    return datetime.fromtimestamp(rows[0][0] + 3600, UTC).isoformat()

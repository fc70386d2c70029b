"""Usage and run counters behind the global caps (spec §6). Writes go through ``db.write``.

Every read here costs the same whatever the history (docs/decisions/0072-cap-counters-kept-by-triggers.md):
tokens come from the running totals in ``usage_days`` and turn starts from the per-minute counts in
``run_minutes``, both kept by triggers inside the transaction that writes the ``usage`` or ``runs`` row they count
(migration 11), so they are exactly as current as the rows, also inside the admitting
transaction of :func:`palui.runner.state.claim_new`.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from palui.store.db import Database

if TYPE_CHECKING:
    from zoneinfo import ZoneInfo

    from palui.config import Settings
    from palui.policy.caps import CapLimits, CapVerdict


def zone(name: str | None) -> ZoneInfo | None:
    """The caps time zone (None = the system zone)."""
    if not name:
        return None
    from zoneinfo import ZoneInfo

    return ZoneInfo(name)


def day(now: float, tz: ZoneInfo | None) -> str:
    """``YYYY-MM-DD`` of ``now`` (epoch seconds) in ``tz``."""
    return datetime.fromtimestamp(now, tz).astimezone(tz).strftime("%Y-%m-%d")


def limits(settings: Settings) -> CapLimits:
    """The configured caps (``caps.*``; ``caps.webhook_runs_per_hour`` is already resolved by the
    configuration to ``max(1, runs_per_hour // 3)`` when unset, spec §6.4)."""
    from palui.policy.caps import CapLimits

    return CapLimits(daily_tokens=settings.caps.daily_tokens,
                     job_daily_tokens=settings.caps.job_daily_tokens,
                     runs_per_hour=settings.caps.runs_per_hour,
                     webhook_runs_per_hour=settings.caps.webhook_runs_per_hour)


def input_tokens(c: sqlite3.Connection, input_chars: int, conversation_id: str, created_at: float) -> int:
    """A turn's estimated input in tokens (spec §6.5): the characters of its message and of the history sent
    with it (:func:`palui.runner.state.history_chars`), 4 characters a token, read on connection ``c``."""
    from palui.runner.state import history_chars

    return (input_chars + history_chars(c, conversation_id, created_at)) // 4


def verdict_in_tx(c: sqlite3.Connection, turn_row: sqlite3.Row | Mapping[str, Any], now: float, settings: Settings,
                  job_cap: int | None = None) -> CapVerdict:
    """The caps verdict for starting ``turn_row`` (a mapping with ``origin`` and ``job_id``) now,
    from counters read on connection ``c`` (inside the admitting transaction, spec §6). A webhook
    turn is also held to the webhook share: webhook runs in the sliding hour (spec §6.6). A stored turn
    (a row with ``input``, ``conversation_id`` and ``created_at``) is weighed with its estimated input
    (:func:`input_tokens`); a mapping without them (a job's check before its turn exists) weighs nothing."""
    from dataclasses import replace

    from palui.policy.caps import admit

    tz = zone(settings.caps.timezone)
    today = day(now, tz)
    tokens = _tokens(c, today, "")
    runs = _runs_since(c, now - 3600)
    job_tokens = webhook_runs = None
    lim = limits(settings)
    if turn_row["job_id"]:
        job_tokens = _tokens(c, today, turn_row["job_id"])
        if job_cap is not None:
            lim = replace(lim, job_daily_tokens=job_cap)
    if turn_row["origin"] == "webhook":
        webhook_runs = c.execute("SELECT COUNT(*) FROM runs WHERE time > ? AND origin = 'webhook'",
                                 (now - 3600,)).fetchone()[0]
    stored = "input" in turn_row.keys()
    size = (input_tokens(c, len(turn_row["input"] or ""), turn_row["conversation_id"], turn_row["created_at"])
            if stored else 0)
    verdict = admit(lim, runs_last_hour=runs, tokens_today=tokens, job_tokens_today=job_tokens,
                    webhook_runs_last_hour=webhook_runs, input_tokens=size)
    if verdict.ok and stored and waiting_for_tokens(c, turn_row["created_at"]):
        # First in, first out (spec §6.5): while an earlier turn waits for room under the daily cap, a later
        # one that would fit does not pass it (nor end the pause it is told of).
        from palui.policy.caps import DAILY_TOKENS, CapVerdict

        return CapVerdict(False, DAILY_TOKENS)
    return verdict


def waiting_for_tokens(c: sqlite3.Connection, before: float | None = None) -> bool:
    """Whether Palui is paused by the daily token cap with a turn waiting for room: a new turn queued (never
    counted as a run) created before ``before`` (any, when None), read on connection ``c``."""
    from palui.policy.caps import DAILY_TOKENS
    from palui.runner.state import PAUSE_KEY

    pause = c.execute("SELECT value FROM kv WHERE key = ?", (PAUSE_KEY,)).fetchone()
    if pause is None or pause[0] != DAILY_TOKENS:
        return False
    return c.execute("SELECT 1 FROM turns t WHERE t.status = 'queued' AND t.created_at < ? AND NOT EXISTS"
                     " (SELECT 1 FROM runs r WHERE r.turn_id = t.id) LIMIT 1",
                     (float("inf") if before is None else before,)).fetchone() is not None


def _tokens(c: sqlite3.Connection, today: str, job_id: str) -> int:
    """Tokens counted on ``today`` for every turn (``job_id`` ``""``) or for one job: one counter row."""
    r = c.execute("SELECT tokens FROM usage_days WHERE day = ? AND job_id = ?", (today, job_id)).fetchone()
    return int(r[0]) if r else 0


def _runs_since(c: sqlite3.Connection, start: float) -> int:
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
        return _tokens(c, day(now, tz), job_id or "")


def runs_last_hour(db: Database, now: float | None = None, origin: str | None = None) -> int:
    """Turn starts in the sliding hour before ``now`` (spec §6): of every origin from the per-minute
    counters; of one ``origin`` (the webhook share) by its index, bounded by that share's cap."""
    now = time.time() if now is None else now
    if origin is None:
        with db.read() as c:
            return _runs_since(c, now - 3600)
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


def inflight_cap(db: Database, settings: Settings, job_id: str | None, job_cap: int | None) -> str | None:
    """The token cap a running turn has crossed, if any (checked at each step boundary, spec §6)."""
    tz = zone(settings.caps.timezone)
    used = tokens_today(db, tz)
    if used >= settings.caps.daily_tokens:
        return f"daily token cap reached ({used} tokens used today; the cap is {settings.caps.daily_tokens})"
    if job_id:
        cap = job_cap or settings.caps.job_daily_tokens
        used = tokens_today(db, tz, job_id)
        if used >= cap:
            return f"job token cap reached ({used} tokens used today; the job's cap is {cap})"
    return None


def never_fits(db: Database, settings: Settings, input_chars: int, conversation_id: str, created_at: float,
               job_id: str | None, job_cap: int | None) -> str | None:
    """Why a turn can never run, or None: its estimated input (:func:`input_tokens`) is more than the whole
    daily token cap, or than its job's whole cap (``job_cap``, else ``caps.job_daily_tokens``), whatever was
    used today (spec §6.5). The runner checks it before a turn's first step."""
    from dataclasses import replace

    from palui.policy.caps import DAILY_TOKENS, JOB_TOKENS, too_big

    with db.read() as c:
        size = input_tokens(c, input_chars, conversation_id, created_at)
    lim = limits(settings)
    if job_cap is not None:
        lim = replace(lim, job_daily_tokens=job_cap)
    cap = too_big(lim, size, job_id is not None)
    if cap == DAILY_TOKENS:
        return (f"daily token cap: this turn's input is about {size:,} tokens (the message and the history sent "
                f"with it, 4 characters a token), more than the whole cap of {lim.daily_tokens:,} tokens a day, "
                "so it could never run; start a new conversation (/new), send a shorter message or raise "
                "caps.daily_tokens")
    if cap == JOB_TOKENS:
        return (f"job token cap: this run's input is about {size:,} tokens (4 characters a token), more than "
                f"the job's whole cap of {lim.job_daily_tokens:,} tokens a day, so it could never run; shorten "
                "its prompt or raise its --token-cap")
    return None


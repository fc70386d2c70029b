"""The global caps' verdicts over the usage and run counters (spec §6; the counters are
:mod:`palui.store.usage`).

Every read here costs the same whatever the history (docs/decisions/0072-cap-counters-kept-by-triggers.md):
tokens come from the running totals in ``usage_days`` and turn starts from the per-minute counts in
``run_minutes``, both kept by triggers inside the transaction that writes the ``usage`` or ``runs`` row they count
(migration 11), so they are exactly as current as the rows, also inside the admitting
transaction of :func:`palui.runner.state.claim_new`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from palui.store.db import Database
from palui.store.usage import cached_today as cached_today  # the counters, re-exported for the runner's callers
from palui.store.usage import day, runs_since, tokens_on, tokens_today
from palui.store.usage import next_day as next_day
from palui.store.usage import record_usage as record_usage
from palui.store.usage import runs_last_hour as runs_last_hour
from palui.store.usage import waiting_for_tokens as waiting_for_tokens
from palui.store.usage import window_frees_at as window_frees_at
from palui.store.usage import zone as zone

if TYPE_CHECKING:
    from palui.config import Settings
    from palui.policy.caps import CapLimits, CapVerdict


def limits(settings: Settings) -> CapLimits:
    """The configured caps (``caps.*``; ``caps.webhook_runs_per_hour`` is already resolved by the
    configuration to ``max(1, runs_per_hour // 3)`` when unset, spec §6.4)."""
    from palui.policy.caps import CapLimits

    return CapLimits(daily_tokens=settings.caps.daily_tokens,
                     job_daily_tokens=settings.caps.job_daily_tokens,
                     runs_per_hour=settings.caps.runs_per_hour,
                     webhook_runs_per_hour=settings.caps.webhook_runs_per_hour)


def inputtokens_on(c: sqlite3.Connection, input_chars: int, conversation_id: str, created_at: float) -> int:
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
    tokens = tokens_on(c, today, "")
    runs = runs_since(c, now - 3600)
    job_tokens = webhook_runs = None
    lim = limits(settings)
    if turn_row["job_id"]:
        job_tokens = tokens_on(c, today, turn_row["job_id"])
        if job_cap is not None:
            lim = replace(lim, job_daily_tokens=job_cap)
    if turn_row["origin"] == "webhook":
        webhook_runs = c.execute("SELECT COUNT(*) FROM runs WHERE time > ? AND origin = 'webhook'",
                                 (now - 3600,)).fetchone()[0]
    stored = "input" in turn_row.keys()
    size = (inputtokens_on(c, len(turn_row["input"] or ""), turn_row["conversation_id"], turn_row["created_at"])
            if stored else 0)
    verdict = admit(lim, runs_last_hour=runs, tokens_today=tokens, job_tokens_today=job_tokens,
                    webhook_runs_last_hour=webhook_runs, input_tokens=size)
    if verdict.ok and stored and waiting_for_tokens(c, turn_row["created_at"]):
        # First in, first out (spec §6.5): while an earlier turn waits for room under the daily cap, a later
        # one that would fit does not pass it (nor end the pause it is told of).
        from palui.policy.caps import DAILY_TOKENS, CapVerdict

        return CapVerdict(False, DAILY_TOKENS)
    return verdict


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
        size = inputtokens_on(c, input_chars, conversation_id, created_at)
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


"""The global caps decision (spec §6.4-§6.6), pure: counters in, verdict out. No I/O, no clock."""

from __future__ import annotations

from dataclasses import dataclass

DAILY_TOKENS = "daily token cap"
JOB_TOKENS = "job token cap"
RUNS_PER_HOUR = "runs per hour cap"
WEBHOOK_RUNS_PER_HOUR = "webhook runs per hour cap"

#: Caps that pause every new turn (the person is told once per pause, spec §6). A job over its own
#: token cap is that job's matter; the webhook share holds only webhook turns (spec §6.6).
GLOBAL_CAPS = (DAILY_TOKENS, RUNS_PER_HOUR)


@dataclass(frozen=True)
class CapLimits:
    """``daily_tokens`` (all turns, input + output), ``job_daily_tokens`` (per job), ``runs_per_hour``
    (turn starts of every origin in a sliding 60 minutes), ``webhook_runs_per_hour`` (the share of
    those starts that webhook turns together may take; None = no share of their own)."""

    daily_tokens: int
    job_daily_tokens: int | None
    runs_per_hour: int
    webhook_runs_per_hour: int | None = None


@dataclass(frozen=True)
class CapVerdict:
    """``ok`` to start; otherwise ``cap`` names the cap hit: ``daily token cap``, ``job token cap``,
    ``runs per hour cap``, ``webhook runs per hour cap``."""

    ok: bool
    cap: str | None = None


def admit(limits: CapLimits, *, runs_last_hour: int, tokens_today: int, job_tokens_today: int | None,
          webhook_runs_last_hour: int | None = None) -> CapVerdict:
    """May a new run start? Checked in the same transaction that records the run.

    ``job_tokens_today`` is None for turns that are not scheduled jobs; ``webhook_runs_last_hour``
    (webhook turn starts in the sliding hour) is None for turns that are not webhook turns. The
    caps are checked in this order, the first one hit names the verdict: daily tokens, the job's
    tokens, runs per hour (all origins), then the webhook share, so a webhook turn refused while
    the whole hour is full is refused by the global cap (a global pause), not by its share.
    """
    if tokens_today >= limits.daily_tokens:
        return CapVerdict(False, DAILY_TOKENS)
    if (
        job_tokens_today is not None
        and limits.job_daily_tokens is not None
        and job_tokens_today >= limits.job_daily_tokens
    ):
        return CapVerdict(False, JOB_TOKENS)
    if runs_last_hour >= limits.runs_per_hour:
        return CapVerdict(False, RUNS_PER_HOUR)
    if (
        webhook_runs_last_hour is not None
        and limits.webhook_runs_per_hour is not None
        and webhook_runs_last_hour >= limits.webhook_runs_per_hour
    ):
        return CapVerdict(False, WEBHOOK_RUNS_PER_HOUR)
    return CapVerdict(True)

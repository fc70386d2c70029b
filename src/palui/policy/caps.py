"""The global caps decision (SPEC §6), pure: counters in, verdict out. No I/O, no clock."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CapLimits:
    """``daily_tokens`` (all turns, input + output), ``job_daily_tokens`` (per job), ``runs_per_hour``."""

    daily_tokens: int
    job_daily_tokens: int | None
    runs_per_hour: int


@dataclass(frozen=True)
class CapVerdict:
    """``ok`` to start; otherwise ``cap`` names the cap hit: ``daily token cap``, ``job token cap``,
    ``runs per hour cap``."""

    ok: bool
    cap: str | None = None


def admit(limits: CapLimits, *, runs_last_hour: int, tokens_today: int, job_tokens_today: int | None) -> CapVerdict:
    """May a new run start? Checked in the same transaction that records the run.

    ``job_tokens_today`` is None for turns that are not scheduled jobs.
    """
    if tokens_today >= limits.daily_tokens:
        return CapVerdict(False, "daily token cap")
    if (
        job_tokens_today is not None
        and limits.job_daily_tokens is not None
        and job_tokens_today >= limits.job_daily_tokens
    ):
        return CapVerdict(False, "job token cap")
    if runs_last_hour >= limits.runs_per_hour:
        return CapVerdict(False, "runs per hour cap")
    return CapVerdict(True)

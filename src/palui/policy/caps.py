"""The global caps decision (spec §6.4-§6.6), pure: counters in, verdict out. No I/O, no clock."""

from __future__ import annotations

import math
from dataclasses import dataclass

DAILY_TOKENS = "daily token cap"
JOB_TOKENS = "job token cap"
RUNS_PER_HOUR = "runs per hour cap"
WEBHOOK_RUNS_PER_HOUR = "webhook runs per hour cap"

#: Caps that pause every new turn (the person is told once per pause, spec §6). A job over its own
#: token cap is that job's matter; the webhook share holds only webhook turns (spec §6.6).
GLOBAL_CAPS = (DAILY_TOKENS, RUNS_PER_HOUR)


#: What a cached input token (a cache read) counts for against the token caps when ``caps.cached_input_weight``
#: is unset, per provider (spec §6.4): the share of the full input price the provider bills for it.
#: Anthropic bills cache reads at 0.1 times the base input price for every model ("Prompt caching", pricing:
#: "Cache hits and refreshes: 0.1x base input price"). OpenAI's discount depends on the model (50 % for the
#: gpt-4o family, 75 % for gpt-4.1, 90 % for gpt-5: "Prompt caching" guide and the pricing page's "cached
#: input" column); the smallest discount is the default, so a cap never counts less than any OpenAI bill.
#: Any other provider (ollama, ``script:``) counts cached input in full.
CACHED_INPUT_WEIGHTS = {"anthropic": 0.1, "openai": 0.5}


def cached_input_weight(provider: str, setting: float | None) -> float:
    """The weight (0 to 1) a cached input token of ``provider`` counts for: ``caps.cached_input_weight`` when
    the person set it (``setting``), else the provider's default (:data:`CACHED_INPUT_WEIGHTS`, else 1)."""
    if setting is not None:
        return float(setting)
    return CACHED_INPUT_WEIGHTS.get(provider, 1.0)


def counted_tokens(input_tokens: int, cached_tokens: int, output_tokens: int, weight: float) -> int:
    """Tokens one model request counts for against the caps (spec §6.4): its input that was not read from the
    cache, its cached input at ``weight`` (rounded up, so a cap never counts less than the bill), and its
    output. ``input_tokens`` includes the cached ones (the model library's convention for every provider)."""
    cached = max(0, min(cached_tokens, input_tokens))
    return max(0, input_tokens - cached) + math.ceil(cached * weight - 1e-9) + max(0, output_tokens)


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
    ``runs per hour cap``, ``webhook runs per hour cap``. ``never_fits``: the turn's estimated input
    alone is more than that whole token cap, so it could never start; it is refused before its first
    step, without waiting and without pausing Palui (spec §6.5)."""

    ok: bool
    cap: str | None = None
    never_fits: bool = False


def too_big(limits: CapLimits, input_tokens: int, job: bool) -> str | None:
    """The token cap ``input_tokens`` (a turn's estimated input) exceeds on its own, whatever was used
    today: ``daily token cap``, ``job token cap`` (``job``: the turn is a scheduled job's), or None."""
    if input_tokens > limits.daily_tokens:
        return DAILY_TOKENS
    if job and limits.job_daily_tokens is not None and input_tokens > limits.job_daily_tokens:
        return JOB_TOKENS
    return None


def admit(limits: CapLimits, *, runs_last_hour: int, tokens_today: int, job_tokens_today: int | None,
          webhook_runs_last_hour: int | None = None, input_tokens: int = 0) -> CapVerdict:
    """May a new run start? Checked in the same transaction that records the run.

    ``job_tokens_today`` is None for turns that are not scheduled jobs; ``webhook_runs_last_hour``
    (webhook turn starts in the sliding hour) is None for turns that are not webhook turns;
    ``input_tokens`` is the turn's estimated input (spec §6.5). A turn too big for a whole token cap
    (:func:`too_big`) gets a ``never_fits`` verdict first, whatever else holds. Then the caps are checked
    in this order, the first one hit names the verdict: daily tokens (used up, or too little left for
    this input), the job's tokens (the same), runs per hour (all origins), then the webhook share, so a
    webhook turn refused while the whole hour is full is refused by the global cap (a global pause), not
    by its share.
    """
    whole = too_big(limits, input_tokens, job_tokens_today is not None)
    if whole is not None:
        return CapVerdict(False, whole, never_fits=True)
    if tokens_today >= limits.daily_tokens or tokens_today + input_tokens > limits.daily_tokens:
        return CapVerdict(False, DAILY_TOKENS)
    if (
        job_tokens_today is not None
        and limits.job_daily_tokens is not None
        and (job_tokens_today >= limits.job_daily_tokens
             or job_tokens_today + input_tokens > limits.job_daily_tokens)
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

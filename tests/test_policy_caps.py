"""The pure admission decision of the global caps and the webhook share (spec §6.4-§6.6),
exhaustively as a table, and the configuration key ``caps.webhook_runs_per_hour``."""

from __future__ import annotations

import itertools

import pytest

from palui.config import load_settings
from palui.errors import ConfigError
from palui.policy.caps import GLOBAL_CAPS, CapLimits, CapVerdict, admit

LIMITS = CapLimits(daily_tokens=100, job_daily_tokens=10, runs_per_hour=6, webhook_runs_per_hour=2)

# Each counter below, at and around its limit; None = "not this kind of turn".
TOKENS = (0, 99, 100, 101)
JOB_TOKENS = (None, 0, 9, 10, 11)
RUNS = (0, 5, 6, 7)
WEBHOOK_RUNS = (None, 0, 1, 2, 3)


def expected(tokens: int, job_tokens: int | None, runs: int, webhook_runs: int | None) -> CapVerdict:
    """The rule written out: the first cap hit names the verdict, global caps before the share."""
    if tokens >= 100:
        return CapVerdict(False, "daily token cap")
    if job_tokens is not None and job_tokens >= 10:
        return CapVerdict(False, "job token cap")
    if runs >= 6:
        return CapVerdict(False, "runs per hour cap")
    if webhook_runs is not None and webhook_runs >= 2:
        return CapVerdict(False, "webhook runs per hour cap")
    return CapVerdict(True)


TABLE = list(itertools.product(TOKENS, JOB_TOKENS, RUNS, WEBHOOK_RUNS))


@pytest.mark.parametrize("tokens,job_tokens,runs,webhook_runs", TABLE)
def test_admit_table(tokens, job_tokens, runs, webhook_runs):
    got = admit(LIMITS, runs_last_hour=runs, tokens_today=tokens, job_tokens_today=job_tokens,
                webhook_runs_last_hour=webhook_runs)
    assert got == expected(tokens, job_tokens, runs, webhook_runs)


# A turn's estimated input (spec §6.5): too big for a whole cap, it never fits (refused at once, no pause);
# too big only for what is left today, it waits like any turn over the cap.
INPUTS = (0, 1, 9, 10, 11, 99, 100, 101)


def expected_with_input(tokens: int, job_tokens: int | None, runs: int, size: int) -> CapVerdict:
    if size > 100:
        return CapVerdict(False, "daily token cap", never_fits=True)
    if job_tokens is not None and size > 10:
        return CapVerdict(False, "job token cap", never_fits=True)
    if tokens >= 100 or tokens + size > 100:
        return CapVerdict(False, "daily token cap")
    if job_tokens is not None and (job_tokens >= 10 or job_tokens + size > 10):
        return CapVerdict(False, "job token cap")
    if runs >= 6:
        return CapVerdict(False, "runs per hour cap")
    return CapVerdict(True)


@pytest.mark.parametrize("tokens,job_tokens,runs,size", list(itertools.product(TOKENS, JOB_TOKENS, (0, 6), INPUTS)))
def test_admit_table_with_the_estimated_input(tokens, job_tokens, runs, size):
    got = admit(LIMITS, runs_last_hour=runs, tokens_today=tokens, job_tokens_today=job_tokens, input_tokens=size)
    assert got == expected_with_input(tokens, job_tokens, runs, size)


def test_a_turn_too_big_for_the_whole_cap_never_fits_even_while_paused():
    # Palui is paused by the daily cap (100 of 100 used): a turn that could never fit is still refused at once,
    # not queued until tomorrow to be refused then.
    got = admit(LIMITS, runs_last_hour=0, tokens_today=100, job_tokens_today=None, input_tokens=101)
    assert got == CapVerdict(False, "daily token cap", never_fits=True)


@pytest.mark.parametrize("runs,webhook_runs,verdict", [
    # A chat turn (no webhook counter) is admitted whatever the webhooks used, until the whole hour is full.
    (2, None, CapVerdict(True)),
    (5, None, CapVerdict(True)),
    (6, None, CapVerdict(False, "runs per hour cap")),
    # A webhook turn: its share first runs out (not a global pause), then the whole hour.
    (1, 1, CapVerdict(True)),
    (2, 2, CapVerdict(False, "webhook runs per hour cap")),
    (6, 2, CapVerdict(False, "runs per hour cap")),
])
def test_the_share_holds_webhook_turns_only(runs, webhook_runs, verdict):
    got = admit(LIMITS, runs_last_hour=runs, tokens_today=0, job_tokens_today=None, webhook_runs_last_hour=webhook_runs)
    assert got == verdict
    assert "webhook runs per hour cap" not in GLOBAL_CAPS  # the share never pauses chat turns


def test_no_share_configured_means_only_the_global_cap():
    lim = CapLimits(daily_tokens=100, job_daily_tokens=None, runs_per_hour=6)
    assert admit(lim, runs_last_hour=5, tokens_today=0, job_tokens_today=None, webhook_runs_last_hour=5).ok


def _settings(home, toml: str = "", **env: str):
    (home / "palui.toml").write_text(toml)
    return load_settings({"PALUI_HOME": str(home), **env})


@pytest.mark.parametrize("runs_per_hour,share", [(60, 20), (61, 20), (7, 2), (3, 1), (2, 1), (1, 1)])
def test_webhook_share_defaults_to_a_third_of_the_runs_at_least_one(home, runs_per_hour, share):
    s = _settings(home, f"[caps]\nruns_per_hour = {runs_per_hour}\n")
    assert s.caps.webhook_runs_per_hour == share


def test_webhook_share_may_be_set_up_to_the_runs_per_hour(home):
    assert _settings(home, "[caps]\nruns_per_hour = 10\nwebhook_runs_per_hour = 10\n").caps.webhook_runs_per_hour == 10
    assert _settings(home, "[caps]\nwebhook_runs_per_hour = 5\n").caps.webhook_runs_per_hour == 5
    assert _settings(home, "", PALUI_CAPS__WEBHOOK_RUNS_PER_HOUR="7").caps.webhook_runs_per_hour == 7


@pytest.mark.parametrize("toml,env,words", [
    ("[caps]\nruns_per_hour = 10\nwebhook_runs_per_hour = 11\n", {},
     ["palui.toml", "caps.webhook_runs_per_hour", "at most caps.runs_per_hour (10)", "got 11"]),
    ("[caps]\nrunS_per_hour = 1\n", {}, ["unknown key"]),
    ("", {"PALUI_CAPS__WEBHOOK_RUNS_PER_HOUR": "61"},
     ["PALUI_CAPS__WEBHOOK_RUNS_PER_HOUR", "caps.webhook_runs_per_hour", "at most caps.runs_per_hour (60)"]),
    ("[caps]\nwebhook_runs_per_hour = 0\n", {}, ["caps.webhook_runs_per_hour", "greater than 0"]),
    ("[caps]\nwebhook_runs_per_hour = '5'\n", {}, ["caps.webhook_runs_per_hour", "wrong type"]),
])
def test_a_webhook_share_above_the_runs_per_hour_is_a_configuration_error(home, toml, env, words):
    with pytest.raises(ConfigError) as e:
        _settings(home, toml, **env)
    for w in words:
        assert w in str(e.value)

"""Jobs across daylight-saving nights (spec §8.4 "Clocks"), on the scheduler's test clock.

A fixed-time job (minute and hour fields not starting with ``*``) fires once per local date: at the
first of two repeated wall times when clocks go back, at the first moment after the gap when they go
forward. Other jobs follow real time. The CLI's ``jobs add`` reads the test clock, so the next run it
stores after a given instant is the schedule's answer; one live service shows the fires themselves.
"""

from __future__ import annotations

import time
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from support.live_service import LiveService, wait_for, write_clock
from support.scripts import text, write_script


def at(zone: str, wall: str, fold: int = 0) -> float:
    """Epoch seconds of a local wall time (``fold=1``: the second of two repeated ones)."""
    return datetime.fromisoformat(wall).replace(tzinfo=ZoneInfo(zone), fold=fold).timestamp()


def next_run(cli, name: str, cron: str, zone: str, now: float) -> str:
    """The next run ``jobs add`` stores for a job added at ``now``, as local ISO time with its offset."""
    r = cli("jobs", "add", name, "--cron", cron, "--prompt", "p", "--tz", zone, env={"PALUI_TEST_CLOCK": str(now)})
    assert r.returncode == 0, r.stderr
    [job] = [j for j in cli.json("jobs", "list", "--json") if j["name"] == name]
    return datetime.fromisoformat(job["next_run"]).astimezone(ZoneInfo(zone)).isoformat()


@pytest.mark.parametrize(("zone", "cron", "after", "expected"), [
    # Clocks go back: 02:00-03:00 happens twice in Paris on 2026-10-25, 01:00-02:00 in New York on 2026-11-01.
    ("Europe/Paris", "30 2 * * *", "2026-10-25T02:30:30", "2026-10-26T02:30:00+01:00"),
    ("Europe/Paris", "0,30 2 * * *", "2026-10-25T02:30:30", "2026-10-26T02:00:00+01:00"),
    ("America/New_York", "30 1 * * *", "2026-11-01T01:30:30", "2026-11-02T01:30:00-05:00"),
    ("America/New_York", "@daily", "2026-11-01T00:00:30", "2026-11-02T00:00:00-05:00"),
    # Jobs with `*` in the minute or hour follow real time: the repeated hour fires again.
    ("Europe/Paris", "0 * * * *", "2026-10-25T02:00:30", "2026-10-25T02:00:00+01:00"),
    ("America/New_York", "*/30 * * * *", "2026-11-01T01:30:30", "2026-11-01T01:00:00-05:00"),
    # Clocks go forward: 02:00-03:00 does not exist; the job fires at the first moment after it, once.
    ("Europe/Paris", "30 2 * * *", "2027-03-28T01:59:00", "2027-03-28T03:00:00+02:00"),
    ("Europe/Paris", "30 2 * * *", "2027-03-28T03:00:30", "2027-03-29T02:30:00+02:00"),
    ("America/New_York", "30 2 * * *", "2026-03-08T01:59:00", "2026-03-08T03:00:00-04:00"),
    ("America/New_York", "30 2 * * *", "2026-03-08T03:00:30", "2026-03-09T02:30:00-04:00"),
    ("America/New_York", "0 * * * *", "2026-03-08T01:00:30", "2026-03-08T03:00:00-04:00"),
])
def test_the_next_run_across_daylight_saving_nights(cli, zone, cron, after, expected):
    assert next_run(cli, "night", cron, zone, at(zone, after)) == expected


@pytest.mark.slow
def test_a_daily_job_runs_once_on_the_night_clocks_go_back_in_paris(home, cli, tmp_path):
    """The night of 2026-10-25: `30 2 * * *` ran at 02:30+02:00 and again at 02:30+01:00 before."""
    (home / "palui.toml").write_text(f'model = "{write_script(tmp_path / "s.json", text("ok"), text("ok"))}"\n')
    zone = "Europe/Paris"
    path = tmp_path / "clock"
    env = {"PALUI_TEST_CLOCK": str(path)}
    write_clock(path, at(zone, "2026-10-25T02:00:00"))
    assert cli("jobs", "add", "nightly", "--cron", "30 2 * * *", "--prompt", "p", "--tz", zone,
               env=env).returncode == 0
    with LiveService(home, env) as s:
        write_clock(path, at(zone, "2026-10-25T02:30:01"))
        first = wait_for(lambda: s.get("/api/jobs")[0]["last_turn"], what="the first run")
        s.wait_turn(first)
        job = s.get("/api/jobs")[0]
        assert datetime.fromisoformat(job["next_run"]).timestamp() == at(zone, "2026-10-26T02:30:00")
        write_clock(path, at(zone, "2026-10-25T02:30:01", fold=1))  # the repeated 02:30, an hour later
        time.sleep(0.6)  # a few ticks: nothing is due
        assert s.count("turns") == 1
        write_clock(path, at(zone, "2026-10-26T02:30:01"))
        wait_for(lambda: s.count("turns") == 2, what="the next night's run")
        assert s.count("inbox", "text LIKE '%missed%'") == 0

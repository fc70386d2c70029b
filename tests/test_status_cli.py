"""``palui status`` and ``palui inbox`` as the person reads them (spec §8.2 ``/status``, §11), through the CLI:
times in ``caps.timezone`` with their date when not today, to the second and without microseconds; and
whether ``palui serve`` runs, since without it the chat channels, jobs and webhooks wait."""

from __future__ import annotations

import json
import re
import sqlite3
import time
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from support.scripts import call, calls, text, write_script

ZONE = "Asia/Tokyo"  # never the machine's zone: a time shown in UTC or the system zone shows up


def sql(home, statement: str, params: tuple = ()) -> None:
    con = sqlite3.connect(home / "palui.db")
    with con:
        con.execute(statement, params)
    con.close()


@pytest.fixture
def asked(cli, home, tmp_path):
    """A pending approval (a destructive call in a chat turn), the home in ZONE; returns the approval."""
    model = write_script(tmp_path / "s.json", calls(call("recall__forget_memory", id=1)), text("ok"))
    (home / "palui.toml").write_text(f'model = "{model}"\n[caps]\ntimezone = "{ZONE}"\n', encoding="utf-8")
    out = json.loads(cli("run", "--json", "forget it").stdout)
    [a] = out["pending_approvals"]
    return a


def test_status_says_the_date_of_an_expiry_that_is_not_today(cli, home, asked):
    tz = ZoneInfo(ZONE)
    later = time.time() + 23 * 3600 + 1830  # a job approval's day-long expiry: tomorrow, or late today
    sql(home, "UPDATE approvals SET expires_at = ? WHERE id = ?", (later, asked["id"]))
    out = cli("status").stdout
    [line] = [ln for ln in out.splitlines() if asked["id"] in ln]
    when = datetime.fromtimestamp(later, tz)
    today = datetime.now(tz).date()
    clock = when.strftime("%H:%M") if when.date() == today else when.strftime("%b %d %H:%M")
    assert line.endswith(f"recall__forget_memory, expires {clock}, in 23 h 30 min"), line
    if when.date() != today:
        assert when.strftime("%b %d") in line


def test_status_says_when_the_service_is_not_running(cli, home, asked):
    sql(home, "INSERT INTO channels (name, kind, state, created_at) VALUES ('telegram', 'telegram', 'connected', ?)",
        (time.time(),))
    out = cli("status").stdout
    assert "service: not running (palui serve)" in out.splitlines()[0]
    assert "channel telegram: not running (last: connected)" in out
    assert cli.json("status", "--json")["service_running"] is False


def test_the_inbox_prints_times_in_the_persons_zone_without_microseconds(cli, home, asked):
    rows = cli.json("inbox", "--json")
    out = cli("inbox").stdout
    tz = ZoneInfo(ZONE)
    for row in rows:
        moment = datetime.fromisoformat(row["time"]).astimezone(tz)
        assert f"\n{moment.strftime('%Y-%m-%d %H:%M:%S')}  [{row['kind']}]" in f"\n{out}", (row["time"], out)
    assert not re.search(r"\d\d:\d\d:\d\d\.\d+|\d{4}-\d\d-\d\dT\d\d", out), out  # no raw ISO anywhere
    # The approval's message says its expiry as a time with its date, in the person's zone.
    expires = datetime.fromisoformat(asked["expires_at"]).astimezone(tz)
    assert f"(expires {expires.strftime('%Y-%m-%d %H:%M')} JST)" in out, out

"""Size limits before work (spec §6.5, §8.1): a message longer than ``limits.message_chars`` is refused with a clear
message and nothing stored, on every front end and channel; a turn whose estimated input is more than a whole token
cap is refused before its first step without pausing Palui; one more than what is left today waits.

Through the public surfaces: the CLI (``palui run``, ``palui chat``, ``palui jobs run``), the JSON API and the web
form (the app in-process, through its guard), and Telegram (a real ``palui serve`` against the fake Bot API).
"""

from __future__ import annotations

import json
import sqlite3

import pytest
from starlette.testclient import TestClient

from palui.server.app import create_app, csrf_value, session_value
from support.scripts import text, write_script

LIMIT = 100_000


def stored(home, table: str) -> int:
    con = sqlite3.connect(home / "palui.db")
    try:
        return con.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
    finally:
        con.close()


def test_palui_run_refuses_a_message_over_the_limit_and_stores_nothing(cli, home, tmp_path):
    model = write_script(tmp_path / "s.json", text("ok"))
    r = cli("run", "x" * (LIMIT + 1), "--model", model)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert ("the message is too long: 100,001 characters, at most 100,000 (limits.message_chars); nothing was "
            "stored") in r.stderr
    assert stored(home, "turns") == 0 and stored(home, "conversations") == 0
    assert cli("run", "x" * LIMIT, "--model", model).returncode == 0  # the limit itself is allowed


def test_the_json_api_refuses_five_million_characters_before_storing_them(svc, client, tmp_path, home):
    model = write_script(tmp_path / "s.json", text("ok"))
    r = client.post("/api/turns", json={"message": "x" * 5_000_000, "model": model},
                    headers={"Authorization": "Bearer tok"})
    # Past the top of the setting's range (1,000,000): the route's schema refuses it, naming the field.
    assert r.status_code == 400, r.text
    assert r.json()["kind"] == "usage" and r.json()["field"] == "message", r.json()
    # Within the schema but past the setting: the service's one door says its length and the limit.
    r = client.post("/api/turns", json={"message": "x" * 500_000, "model": model},
                    headers={"Authorization": "Bearer tok"})
    assert r.status_code == 400, r.text
    assert r.json()["kind"] == "usage" and "500,000 characters, at most 100,000" in r.json()["error"]
    assert stored(home, "turns") == 0 and stored(home, "conversations") == 0
    assert svc.status.get()["tokens_today"] == 0 and svc.status.get()["paused"] is False


def test_the_web_form_refuses_it_with_a_message_and_stores_nothing(home, tmp_path):
    from palui.service import Service

    model = write_script(tmp_path / "s.json", text("ok"))
    (home / "palui.toml").write_text(f'model = "{model}"\n[limits]\nmessage_chars = 10\n')
    svc = Service()
    with TestClient(create_app(svc, "tok", port=8765), base_url="http://127.0.0.1:8765", follow_redirects=False,
                    cookies={"palui_session": session_value("tok")}) as c:
        r = c.post("/chat/send", data={"csrf": csrf_value("tok"), "message": "eleven char"})
        assert r.status_code == 303
        page = c.get(r.headers["location"], follow_redirects=True).text
    svc.db.close()
    assert "the message is too long: 11 characters, at most 10 (limits.message_chars)" in page
    assert stored(home, "turns") == 0


def test_palui_chat_refuses_it_and_goes_on(cli, home, tmp_path):
    (home / "palui.toml").write_text("[limits]\nmessage_chars = 10\n")
    model = write_script(tmp_path / "s.json", text("short answer"))
    r = cli("chat", "--model", model, input="a message longer than ten\nhi\n/quit\n")
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    out = r.stdout + r.stderr
    assert "the message is too long: 25 characters, at most 10" in out and "short answer" in out, out
    assert stored(home, "turns") == 1  # only "hi"


@pytest.mark.slow
def test_a_telegram_message_over_the_limit_is_answered_and_starts_no_turn(telegram_rig, fake):
    from support.telegram_rig import visible

    rig = telegram_rig(toml="[limits]\nmessage_chars = 20\n", pair=True)
    up = rig.say("this message is longer than twenty characters")
    said = rig.reply_after(up)
    assert "the message is too long: 45 characters, at most 20" in visible(said)
    assert rig.processed(up) == "done"
    assert rig.svc.rows("SELECT COUNT(*) FROM turns")[0][0] == 0
    assert not fake.errors, fake.errors


# -- the estimated input against the token caps ---------------------------------------------------------

def test_a_turn_too_big_for_the_whole_daily_cap_is_refused_before_its_first_step(cli, home, tmp_path):
    (home / "palui.toml").write_text("[caps]\ndaily_tokens = 5\n")
    model = write_script(tmp_path / "s.json", text("never asked"))
    r = cli("run", "a message of well over twenty characters", "--model", model, "--json")
    assert r.returncode == 1, r.stderr
    t = json.loads(r.stdout)
    assert t["status"] == "budget" and t["usage"]["steps"] == 0 and t["answer"] in (None, ""), t
    assert t["budget"].startswith("daily token cap: this turn's input is about 10 tokens"), t["budget"]
    assert "more than the whole cap of 5 tokens a day, so it could never run" in t["budget"]
    status = cli.json("status", "--json")
    assert status["paused"] is False and status["tokens_today"] == 0 and status["runs_last_hour"] == 0
    # A turn that fits is not held back by the refused one.
    r = cli("run", "hi", "--model", model, "--json")
    assert json.loads(r.stdout)["status"] == "done", r.stdout


def test_a_turn_too_big_for_what_is_left_today_waits(cli, home, tmp_path):
    (home / "palui.toml").write_text("[caps]\ndaily_tokens = 100\n")
    spend = write_script(tmp_path / "spend.json", text("ok", usage={"input_tokens": 80, "output_tokens": 10}))
    assert cli("run", "hi", "--model", spend).returncode == 0
    r = cli.json("run", "x" * 60, "--model", spend, "--json")  # about 15 tokens: 90 + 15 > 100, 15 < 100
    assert r["status"] == "queued" and r["queued_reason"] == "daily token cap", r
    status = cli.json("status", "--json")
    assert status["paused"] is True and status["paused_reason"] == "daily token cap"
    # First in, first out: a later turn that would fit waits behind it (spec §6.5), and the person was told once.
    later = cli.json("run", "ok?", "--model", spend, "--json")
    assert later["status"] == "queued" and later["queued_reason"] == "daily token cap", later
    notices = [m for m in cli.json("inbox", "--json") if m["kind"] == "cap"]
    assert len(notices) == 1 and "daily token cap" in notices[0]["text"], notices


def test_a_job_run_too_big_for_its_whole_cap_is_refused_and_pauses_nothing(cli, home, tmp_path):
    model = write_script(tmp_path / "s.json", text("never asked"))
    (home / "palui.toml").write_text(f'model = "{model}"\n')
    r = cli("jobs", "add", "big", "--cron", "@daily", "--prompt", "Check every one of the forty feeds now.",
            "--token-cap", "3")
    assert r.returncode == 0, r.stderr
    r = cli("jobs", "run", "big", "--json")
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    t = json.loads(r.stdout)
    assert t["status"] == "budget" and t["usage"]["steps"] == 0, t
    assert t["budget"].startswith("job token cap: this run's input is about 9 tokens"), t["budget"]
    assert "more than the job's whole cap of 3 tokens a day" in t["budget"]
    assert cli.json("status", "--json")["paused"] is False

"""Scope a job, and an emergency brake (spec §5.7, §8.4), through the CLI, the terminal chat, the web chat's
command route and a live service: ``palui jobs add … --connector ID`` cuts the offered set before ranking;
``palui stop --all`` / ``/stop all`` stop every running, waiting or queued turn and pause the jobs until
``palui jobs resume``."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time

import pytest
from starlette.testclient import TestClient

from palui.server.app import create_app, csrf_value, session_value
from palui.text.commands import CommandError, parse
from support.httpserver import PageServer
from support.live_service import LiveService, wait_for, write_clock
from support.scripts import call, calls, text, write_script


def test_a_job_limited_to_a_connector_is_offered_only_its_tools(cli, tmp_path, home):
    model = write_script(tmp_path / "s.json", calls(call("tasks__list_tasks")), text("done"))
    (home / "palui.toml").write_text(f'model = "{model}"\n')
    r = cli("jobs", "add", "brief", "--cron", "0 8 * * *", "--prompt", "list my memories", "--connector", "recall")
    assert r.returncode == 0 and "only recall" in r.stdout, r.stderr
    [job] = cli.json("jobs", "list", "--json")
    assert job["connectors"] == ["recall"]
    assert "CONNECTORS" in cli("jobs", "list").stdout and "  recall  " in cli("jobs", "list").stdout
    out = json.loads(cli("jobs", "run", "brief", "--json").stdout)
    assert out["status"] == "done"
    [scope] = [e for e in out["events"] if e["type"] == "scope"]
    assert scope["connectors"] == ["recall"]
    offered = [e for e in out["events"] if e["type"] == "step"][0]["tools_offered"]
    assert offered and all(n.startswith("recall__") for n in offered)
    [refused] = cli.json("audit", "--json", "--turn", out["turn"])
    assert refused["tool"] == "tasks__list_tasks" and refused["outcome"] == "refused"
    assert refused["reason"] == "this job is limited to the connectors recall"
    r = cli("jobs", "add", "bad", "--cron", "0 8 * * *", "--prompt", "x", "--connector", "mcp-nope")
    assert r.returncode == 2 and "--connector 'mcp-nope': no such connector" in r.stderr
    assert cli.json("jobs", "list", "--json")[0]["name"] == "brief"  # nothing added


def turn_statuses(home) -> dict[str, str]:
    con = sqlite3.connect(home / "palui.db")
    try:
        return dict(con.execute("SELECT id, status FROM turns").fetchall())
    finally:
        con.close()


def waiting_turn(cli, tmp_path, name: str, conversation: str | None = None) -> dict:
    model = write_script(tmp_path / f"{name}.json", calls(call("recall__forget_memory", id=1)), text("forgot"))
    args = ["run", "--json", "--model", model, name] + (["--conversation", conversation] if conversation else [])
    out = json.loads(cli(*args).stdout)
    return out


def test_stop_all_stops_every_turn_and_pauses_jobs_until_resume(cli, tmp_path, home):
    a = waiting_turn(cli, tmp_path, "first")
    assert a["status"] == "awaiting_approval"
    behind = waiting_turn(cli, tmp_path, "behind", a["conversation"])
    assert behind["status"] == "queued" and behind["queued_behind"] == a["turn"]
    b = waiting_turn(cli, tmp_path, "other")
    assert b["status"] == "awaiting_approval"
    model = write_script(tmp_path / "j.json", text("job ran"))
    assert cli("jobs", "add", "brief", "--cron", "0 8 * * *", "--prompt", "hello").returncode == 0

    r = cli("stop", "--all")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("stopped ") and "jobs paused until palui jobs resume" in r.stdout
    assert turn_statuses(home) == {a["turn"]: "stopped", behind["turn"]: "stopped", b["turn"]: "stopped"}
    assert {x["status"] for x in cli.json("approvals", "list", "--all", "--json")} == {"cancelled"}
    status = cli.json("status", "--json")
    assert status["jobs_paused"]["by"] == "cli"
    assert "jobs: paused by the emergency brake" in cli("status").stdout
    assert "paused by the emergency brake" in cli("jobs", "list").stdout
    r = cli("jobs", "run", "brief", env={"PALUI_MODEL": model})
    assert r.returncode == 1 and "the jobs are paused by the emergency brake" in r.stderr
    assert "Emergency brake (cli): stopped 3 turn(s)" in cli.json("inbox", "--json")[-1]["text"]
    r = cli("jobs", "resume")
    assert r.returncode == 0 and r.stdout.strip() == "jobs resumed"
    assert cli.json("status", "--json")["jobs_paused"] is None
    r = cli("jobs", "run", "brief", "--json", env={"PALUI_MODEL": model})
    assert r.returncode == 0 and json.loads(r.stdout)["answer"] == "job ran"
    assert cli("jobs", "resume").stdout.strip() == "jobs were not paused"
    assert cli("stop", "--all", "--turn", "t-x").returncode == 2


def test_stop_all_in_the_terminal_chat(cli, tmp_path, home):
    other = waiting_turn(cli, tmp_path, "elsewhere")
    model = write_script(tmp_path / "c.json", text("hi"))
    r = cli("chat", "--model", model, input="/stop everything\n/stop all\n/quit\n")
    assert r.returncode == 0, r.stderr
    assert "/stop takes no argument, or all" in r.stdout
    assert f"stopped {other['turn']}; jobs paused until palui jobs resume" in r.stdout
    assert cli.json("status", "--json")["jobs_paused"]["by"] == "cli"


def test_stop_all_from_the_web_chat(svc, tmp_path):
    app = create_app(svc, "tok", port=8765)
    with TestClient(app, base_url="http://127.0.0.1:8765", cookies={"palui_session": session_value("tok")}) as c:
        r = c.post("/chat/command", json={"line": "/stop all"}, headers={"X-Palui-CSRF": csrf_value("tok")})
        assert r.status_code == 200, r.text
        assert "Jobs are paused" in r.json()["text"]
    assert svc.brake.jobs_paused()["by"] == "web"


def test_the_command_parser():
    assert parse("/stop all").arg == "all" and parse("/STOP ALL").arg == "all"
    assert parse("/stop").arg == ""
    with pytest.raises(CommandError):
        parse("/stop now")


@pytest.mark.slow
def test_with_a_live_service_stop_all_stops_a_running_turn_and_due_jobs_are_skipped(cli, tmp_path, home):
    clock = tmp_path / "clock"
    base = (time.time() // 300) * 300
    write_clock(clock, base + 10)
    env = {"PALUI_TEST_CLOCK": str(clock)}
    with PageServer({}, slow_seconds=30) as pages:
        model = write_script(tmp_path / "s.json", calls(call("web__fetch_page", url=pages.url + "/slow")),
                             text("fetched"))
        (home / "palui.toml").write_text(f'model = "{model}"\n[web]\nallow_private = true\n')
        assert cli("jobs", "add", "tick", "--cron", "*/5 * * * *", "--prompt", "hello", env=env).returncode == 0
        with LiveService(home, env) as s:
            # The turn runs in the service; the CLI that started it waits for its result in the background.
            runner = subprocess.Popen([sys.executable, "-m", "palui", "run", "--json", "fetch the slow page"],
                                      env=s.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            tid = wait_for(lambda: (s.rows("SELECT id FROM turns WHERE status = 'running'") or [[None]])[0][0],
                           what="a running turn")
            wait_for(lambda: any(h.startswith("/slow") for h in pages.hits), what="the slow fetch")
            r = cli("stop", "--all", env=env)
            assert r.returncode == 0 and tid in r.stdout, (r.stdout, r.stderr)
            assert s.wait_turn(tid, ("stopped",), timeout=10)["status"] == "stopped"
            out = json.loads(runner.communicate(timeout=30)[0])
            assert out["status"] == "stopped"
            # While paused, a due job is skipped (its next run moves on) and the person is told once.
            first = s.get("/api/jobs")[0]["next_run"]
            write_clock(clock, base + 301)
            wait_for(lambda: s.get("/api/jobs")[0]["next_run"] != first, what="the skipped run")
            assert s.count("turns", "job_id IS NOT NULL") == 0
            write_clock(clock, base + 601)
            time.sleep(1.0)
            assert s.count("turns", "job_id IS NOT NULL") == 0
            notes = [m for m in s.get("/api/inbox") if "due runs are skipped" in m["text"]]
            assert len(notes) == 1
            assert cli("jobs", "resume", env=env).returncode == 0
            write_clock(clock, base + 901)
            wait_for(lambda: s.count("turns", "job_id IS NOT NULL") == 1, what="the job to run after resume")


@pytest.mark.slow
def test_stop_all_from_a_telegram_chat(telegram_rig, fake, tmp_path):
    from support.telegram_rig import visible

    rig = telegram_rig(pair=True)
    other = waiting_turn(rig.cli, tmp_path, "elsewhere")  # a turn of another conversation, waiting
    assert other["status"] == "awaiting_approval", other
    up = rig.say("/stop all")
    said = rig.reply_after(up, lambda c: "Jobs are paused" in visible(c))
    assert visible(said) == (f"Stopped {other['turn']}. Jobs are paused until palui jobs resume, the gateway "
                             "until palui gateway resume.")
    assert rig.svc.turn(other["turn"])["status"] == "stopped"
    assert rig.svc.get("/api/status")["jobs_paused"]["by"] == "telegram"
    up = rig.say("/status")  # the channel's /status has the governance lines too
    status = visible(rig.reply_after(up, lambda c: "tokens today" in visible(c)))
    assert "jobs: paused by the emergency brake" in status and "asks in the last 7 days: 1" in status
    assert "gateway: paused by the emergency brake (palui gateway resume)" in status
    assert "audit head: row " in status
    assert not fake.errors

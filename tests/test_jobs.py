"""Scheduled jobs against the real service process (spec §3 job column, §6, §8).

Each test starts ``palui serve --port 0`` on a fresh PALUI_HOME with a ``script:`` model
and moves the scheduler's test clock (PALUI_TEST_CLOCK, a file) instead of waiting.
"""

from __future__ import annotations

import json
import re
import signal
import time
from datetime import datetime

import pytest

from support.live_service import LiveService, wait_for, write_clock
from support.scripts import call, calls, text, write_script

pytestmark = pytest.mark.slow


def ts(iso: str) -> float:
    return datetime.fromisoformat(iso).timestamp()


@pytest.fixture
def clock(tmp_path):
    """The test clock file and the env that points the CLI and the service at it."""
    path = tmp_path / "clock"
    return path, {"PALUI_TEST_CLOCK": str(path)}


def use_model(home, tmp_path, *steps) -> None:
    (home / "palui.toml").write_text(f'model = "{write_script(tmp_path / "script.json", *steps)}"\n')


def job_turns(s: LiveService, job_id: str) -> list[tuple]:
    return s.rows("SELECT id, status FROM turns WHERE job_id = ? ORDER BY created_at", (job_id,))


def test_job_fires_on_schedule_asks_for_a_write_skips_while_waiting_and_runs_after_approval(home, cli, tmp_path, clock):
    use_model(home, tmp_path, calls(call("recall__add_memory", text="from the job")), text("Job done."))
    path, env = clock
    base = (time.time() // 300) * 300
    write_clock(path, base + 10)
    r = cli("jobs", "add", "digest", "--cron", "*/5 * * * *", "--prompt", "Remember what the job found.", env=env)
    assert r.returncode == 0, r.stderr
    [job] = cli.json("jobs", "list", "--json", env=env)
    assert job["cron"] == "*/5 * * * *" and ts(job["next_run"]) == base + 300
    assert job["token_cap"] == 200_000 and job["last_turn"] is None

    with LiveService(home, env) as s:
        time.sleep(0.6)  # three ticks before the fire time: nothing starts
        assert s.count("turns") == 0
        write_clock(path, base + 300)
        tid = wait_for(lambda: s.get("/api/jobs")[0]["last_turn"], what="the job's turn")
        t = s.wait_turn(tid)
        assert t["status"] == "awaiting_approval" and t["origin"] == "job"
        offered = [e for e in t["events"] if e["type"] == "step"][0]["tools_offered"]
        assert {"recall__add_memory", "recall__search_memories", "tasks__create_task"} <= set(offered)
        assert not {"recall__forget_memory", "tasks__delete_task"} & set(offered)  # destructive: not offered
        [a] = s.get("/api/approvals")
        assert (a["origin"], a["tool"], a["class"]) == ("job", "recall__add_memory", "write")
        assert abs(ts(a["expires_at"]) - ts(a["created_at"]) - 86_400) < 1  # jobs wait up to 24 h
        assert s.count("memories") == 0

        # The next two fires find the run still waiting: skipped, told once.
        for fire in (base + 600, base + 900):
            write_clock(path, fire + 1)
            wait_for(lambda fire=fire: ts(s.get("/api/jobs")[0]["next_run"]) == fire + 300, what="the skipped tick")
        assert len(job_turns(s, job["id"])) == 1
        skipped = [m for m in s.get("/api/inbox") if m["kind"] == "job" and "skipped" in m["text"]]
        assert len(skipped) == 1 and tid in skipped[0]["text"] and "approval" in skipped[0]["text"]

        r = cli("approvals", "approve", a["id"])  # the CLI goes through the live service
        assert r.returncode == 0, r.stderr
        assert "Job done." in r.stdout
        assert s.turn(tid)["status"] == "done"
        [(owner,)] = s.rows("SELECT owner FROM turns WHERE id = ?", (tid,))
        assert owner.endswith(f":{s.pid}")
        assert [m["text"] for m in cli.json("memories", "list", "--json")] == ["from the job"]
        results = [m for m in s.get("/api/inbox") if m["kind"] == "job" and m["turn"] == tid]
        assert any("Job done." in m["text"] for m in results)
        assert cli.json("jobs", "list", "--json", env=env)[0]["last_status"] == "done"


def test_runs_missed_while_the_service_was_down_are_coalesced_into_one(home, cli, tmp_path, clock):
    # The job's model tries a destructive tool: in a job it is not offered and the call is refused.
    use_model(home, tmp_path, calls(call("recall__forget_memory", id=1)), text("Nothing forgotten."))
    path, env = clock
    base = (time.time() // 60) * 60
    write_clock(path, base + 5)
    assert cli("jobs", "add", "sweep", "--cron", "* * * * *", "--prompt", "Forget old things.", env=env).returncode == 0
    write_clock(path, base + 605)  # ten fires pass while no service runs

    with LiveService(home, env) as s:
        tid = wait_for(lambda: s.get("/api/jobs")[0]["last_turn"], what="the coalesced run")
        t = s.wait_turn(tid)
        assert t["status"] == "done" and t["answer"] == "Nothing forgotten."
        time.sleep(0.6)
        job = s.get("/api/jobs")[0]
        assert len(job_turns(s, job["id"])) == 1
        assert ts(job["next_run"]) == base + 660
        [note] = [m for m in s.get("/api/inbox") if "coalesced" in m["text"]]
        assert "missed 9 scheduled run(s)" in note["text"] and tid in note["text"]
        [row] = s.get("/api/audit", turn=tid)
        assert (row["tool"], row["verdict"], row["outcome"]) == ("recall__forget_memory", "unavailable", "refused")
        assert s.get("/api/approvals") == []

    # Without a service, `palui jobs run` runs the job in-process.
    r = cli("jobs", "run", "sweep", "--json", env=env)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["status"] == "done" and out["origin"] == "job"
    rows = job_turns(s, job["id"])
    assert len(rows) == 2 and rows[-1][0] == out["turn"]


def test_restart_with_a_job_approval_pending_then_approve_runs_the_write_once(home, cli, tmp_path, clock):
    use_model(home, tmp_path, calls(call("recall__add_memory", text="written once")), text("Job done."))
    path, env = clock
    base = (time.time() // 300) * 300
    write_clock(path, base + 10)
    assert cli("jobs", "add", "nightly", "--cron", "*/5 * * * *", "--prompt", "Note it.", env=env).returncode == 0

    # Children: the restarted service must be told from the one before it (and from the command) by its pid.
    s = LiveService(home, env, process=True).start()
    write_clock(path, base + 300)
    tid = wait_for(lambda: s.get("/api/jobs")[0]["last_turn"], what="the job's turn")
    assert s.wait_turn(tid)["status"] == "awaiting_approval"
    [a] = s.get("/api/approvals")
    # uvicorn re-raises the SIGTERM after its graceful shutdown, so the exit status is -15.
    assert s.stop(signal.SIGTERM) in (0, -signal.SIGTERM)
    assert s.rows("SELECT status FROM turns WHERE id = ?", (tid,)) == [("awaiting_approval",)]

    with LiveService(home, env, process=True) as s2:
        r = cli("approvals", "approve", a["id"])
        assert r.returncode == 0, r.stderr
        assert "Job done." in r.stdout
        assert s2.turn(tid)["status"] == "done"
        [(owner,)] = s2.rows("SELECT owner FROM turns WHERE id = ?", (tid,))
        assert owner.endswith(f":{s2.proc.pid}")  # resumed by the restarted service
        assert [m["text"] for m in cli.json("memories", "list", "--json")] == ["written once"]
        calls_made = s2.rows("SELECT outcome FROM audit WHERE turn_id = ? AND tool = 'recall__add_memory'", (tid,))
        assert sorted(o for (o,) in calls_made) == ["approved; ok", "asked"]
        r = cli("approvals", "approve", a["id"])
        assert r.returncode == 1 and "already approved" in r.stderr
        assert s2.count("memories") == 1


@pytest.mark.parametrize("kw,message", [
    ({"cron": "* * * *"}, "five fields"),
    ({"cron": "* * * * * *"}, "five fields"),
    ({"cron": "0 0 31 2 *"}, "never fires"),
    ({"cron": "@fortnightly"}, "unknown cron alias"),
    ({"cron": "61 * * * *"}, "not valid"),
    ({"tz": "Mars/Olympus"}, "unknown time zone"),
    ({"name": "a/b"}, "job name"),
    ({"name": "two\nlines"}, "job name"),
    ({"prompt": "  "}, "--prompt"),
    ({"token_cap": 0}, "--token-cap"),
])
def test_add_job_refuses_bad_input(svc, kw, message):
    from palui.errors import UsageError

    args = {"name": "x", "cron": "@daily", "prompt": "p", "token_cap": None, "tz": None, **kw}
    with pytest.raises(UsageError, match=re.escape(message)):
        svc.jobs.add(**args)
    assert svc.jobs.list() == []


def test_jobs_cli_exit_codes_zone_and_remove(cli):
    r = cli("jobs", "add", "x", "--cron", "* * * *", "--prompt", "p")
    assert r.returncode == 2 and "five fields" in r.stderr
    assert cli("jobs", "add", "x", "--cron", "0 8 * * 1-5", "--prompt", "p", "--tz", "Europe/Paris").returncode == 0
    r = cli("jobs", "add", "x", "--cron", "@daily", "--prompt", "p")
    assert r.returncode == 2 and "already exists" in r.stderr
    [j] = cli.json("jobs", "list", "--json")
    assert j["tz"] == "Europe/Paris" and datetime.fromisoformat(j["next_run"]).hour == 8
    assert datetime.fromisoformat(j["next_run"]).weekday() < 5
    assert cli("jobs", "remove", "x").returncode == 0
    r = cli("jobs", "remove", "x")
    assert r.returncode == 1 and "unknown job" in r.stderr


async def test_a_job_run_orphaned_by_a_killed_process_is_run_on_and_the_job_is_not_skipped_forever(
        home, tmp_path, clock, monkeypatch):
    """A run left ``running`` by a process that died (kill -9) would make every later tick skip the
    job. The service's tick queues it again; it finishes; the next fire runs normally."""
    import socket
    import subprocess
    import sys

    from palui.service import Service
    from palui.triggers import jobs as jobs_mod

    use_model(home, tmp_path, text("Recovered."))
    path, env = clock
    monkeypatch.setenv("PALUI_TEST_CLOCK", str(path))
    base = (time.time() // 300) * 300
    write_clock(path, base + 10)
    svc = Service()
    svc.jobs.add("orphaned", "*/5 * * * *", "Check.")
    job = jobs_mod.get(svc.db, "orphaned")
    tid = svc.jobs.start_turn(job)
    assert svc.turns.claim(tid).claimed
    gone = int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                              text=True, check=True).stdout)
    with svc.db.write() as c:  # as if a process that has since died had claimed it
        c.execute("UPDATE turns SET owner = ? WHERE id = ?", (f"{socket.gethostname()}:{gone}", tid))

    rt = svc.runtime
    rt.install_tickers()
    write_clock(path, base + 300)
    await rt.tick(time.time())  # queues the orphan again and starts it; the due job waits for it (skipped)
    assert tid in rt.tasks
    result = await rt.tasks[tid]
    assert result["status"] == "done" and result["answer"] == "Recovered."
    assert svc.db.one("SELECT COUNT(*) FROM runs WHERE turn_id = ?", (tid,))[0] == 1  # not counted twice
    write_clock(path, base + 600)
    await rt.tick(time.time())
    for t in list(rt.tasks.values()):
        await t
    rows = svc.db.all("SELECT id, status FROM turns WHERE job_id = ? ORDER BY created_at", (job.id,))
    assert [(r["id"] == tid, r["status"]) for r in rows] == [(True, "done"), (False, "done")]
    await svc._hub.close()
    svc.db.close()


async def test_removing_a_job_cancels_its_waiting_approval(svc, tmp_path):
    from palui.errors import ApprovalError
    from palui.types import Origin
    from support.scripts import call, calls, text, write_script

    model = write_script(tmp_path / "s.json", calls(call("recall__add_memory", text="from the job")), text("ok"))
    svc.jobs.add("nightly", cron="0 3 * * *", prompt="save it")
    job = svc.db.one("SELECT id FROM jobs WHERE name = 'nightly'")["id"]
    tid = svc.turns.start("save it", origin=Origin.JOB, job_id=job, model=model)
    r = await svc.turns.run(tid)
    [a] = r["pending_approvals"]
    svc.jobs.remove("nightly")
    assert svc.turns.result(tid)["status"] == "stopped"
    with pytest.raises(ApprovalError, match="cancelled"):
        await svc.approvals.answer_and_resume(a["id"], True, "cli")
    assert svc.memories.list() == []

"""Global caps with the real service process (spec §6): runs per hour, concurrent
starts, the daily token cap, a job's own daily token cap, pause status and notices."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from support.live_service import LiveService, wait_for, write_clock
from support.scripts import call, calls, text, write_script

pytestmark = pytest.mark.slow


def ts(iso: str) -> float:
    return datetime.fromisoformat(iso).timestamp()


def next_utc_midnight(t: float) -> float:
    d = datetime.fromtimestamp(t, UTC)
    return (d + timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0).timestamp()


def cap_notices(s: LiveService) -> list[str]:
    return [m["text"] for m in s.get("/api/inbox") if m["kind"] == "cap"]


def test_the_61st_start_in_an_hour_waits_the_person_is_told_once_and_it_starts_when_the_window_moves(
        home, tmp_path, cli):
    model = write_script(tmp_path / "s.json", text("ok", usage={"input_tokens": 1, "output_tokens": 1}))
    (home / "palui.toml").write_text(f'model = "{model}"\n')
    with LiveService(home) as s:
        for i in range(60):
            assert s.post("/api/turns", {"message": f"turn {i}"})["status"] == "done"
        assert cap_notices(s) == []
        r61 = s.post("/api/turns", {"message": "the 61st"})
        assert r61["status"] == "queued" and r61["queued_reason"] == "runs per hour cap"
        [(first_run,)] = s.rows("SELECT MIN(time) FROM runs")
        assert abs(ts(r61["start_after"]) - (first_run + 3600)) < 1
        r62 = s.post("/api/turns", {"message": "the 62nd"})
        assert r62["status"] == "queued"
        time.sleep(0.8)  # the service retries queued turns every tick: still one notice, still queued
        [notice] = cap_notices(s)
        assert "runs per hour cap" in notice
        assert [s.turn(r["turn"])["status"] for r in (r61, r62)] == ["queued", "queued"]
        assert s.count("runs") == 60
        st = s.get("/api/status")
        assert (st["paused"], st["paused_reason"], st["paused_until"]) == \
            (True, "runs per hour cap", r61["start_after"])
        assert st["runs_last_hour"] == 60
        cli_st = cli.json("status", "--json")
        assert (cli_st["paused"], cli_st["paused_reason"]) == (True, "runs per hour cap")
        assert cli_st["paused_until"] == r61["start_after"]

        # The window moves on (simulated: the two oldest runs leave the hour): the queued turns start, in order.
        s.rows("DELETE FROM runs WHERE id IN (SELECT id FROM runs ORDER BY time LIMIT 2)")
        for r in (r61, r62):
            assert s.wait_turn(r["turn"])["status"] == "done"
        assert s.rows("SELECT turn_id FROM runs ORDER BY time DESC LIMIT 2") == [(r62["turn"],), (r61["turn"],)]
        assert s.get("/api/status")["paused"] is True  # full again
        assert len(cap_notices(s)) == 1


def test_20_concurrent_claims_in_separate_service_instances_race_for_the_last_5_slots(home):
    """The admission and the run record are one transaction: 20 racers, 5 slots → exactly 5 start."""
    from palui.service import Service

    (home / "palui.toml").write_text("[caps]\nruns_per_hour = 25\n")
    svc = Service()
    for i in range(20):
        assert svc.turns.claim(svc.turns.start(f"filler {i}")).claimed
    racers = [svc.turns.start(f"racer {i}") for i in range(20)]
    instances = [Service() for _ in racers]  # each its own connection, as separate processes would have
    barrier = threading.Barrier(len(racers))
    results: dict[str, tuple[bool, str | None]] = {}

    def race(inst, tid):
        barrier.wait()
        got = inst.turns.claim(tid)
        results[tid] = (got.claimed, got.cap)

    threads = [threading.Thread(target=race, args=(inst, tid)) for inst, tid in zip(instances, racers, strict=True)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(results) == 20
    started = [tid for tid, (ok, _) in results.items() if ok]
    assert len(started) == 5
    assert {cap for ok, cap in results.values() if not ok} == {"runs per hour cap"}
    assert svc.db.one("SELECT COUNT(*) FROM runs")[0] == 25
    queued = {r[0] for r in svc.db.all("SELECT id FROM turns WHERE status = 'queued'")}
    assert queued == set(racers) - set(started)
    assert len([m for m in svc.notifier.inbox() if m["kind"] == "cap"]) == 1
    for inst in [svc, *instances]:
        inst.db.close()


def test_20_concurrent_http_starts_for_the_last_5_slots_exactly_5_start(home, tmp_path):
    model = write_script(tmp_path / "s.json", text("ok", usage={"input_tokens": 1, "output_tokens": 1}))
    (home / "palui.toml").write_text(f'model = "{model}"\n[caps]\nruns_per_hour = 25\n')
    with LiveService(home) as s:
        for i in range(20):
            assert s.post("/api/turns", {"message": f"filler {i}"})["status"] == "done"
        token = (home / "access_token").read_text().strip()
        barrier = threading.Barrier(20)

        def start(i: int) -> dict:
            with httpx.Client(base_url=s.url, headers={"Authorization": f"Bearer {token}"}, timeout=60) as c:
                barrier.wait()
                r = c.post("/api/turns", json={"message": f"racer {i}"})
                assert r.status_code == 200, r.text
                return r.json()

        with ThreadPoolExecutor(20) as ex:
            results = list(ex.map(start, range(20)))
        assert sorted(r["status"] for r in results) == ["done"] * 5 + ["queued"] * 15
        assert {r.get("queued_reason") for r in results if r["status"] == "queued"} == {"runs per hour cap"}
        assert s.count("runs") == 25
        assert len(cap_notices(s)) == 1


def test_token_caps_job_cap_postpones_to_the_next_day_and_a_turn_crossing_the_daily_cap_stops(home, tmp_path, cli):
    # Every turn: step 1 costs 150 tokens and calls a read tool; step 2 would answer.
    model = write_script(tmp_path / "s.json",
                         calls(call("recall__search_memories", query="milk"),
                               usage={"input_tokens": 100, "output_tokens": 50}),
                         text("Done.", usage={"input_tokens": 1, "output_tokens": 1}))
    (home / "palui.toml").write_text(f'model = "{model}"\n[caps]\ndaily_tokens = 300\ntimezone = "UTC"\n')
    clock = tmp_path / "clock"
    env = {"PALUI_TEST_CLOCK": str(clock)}
    base = (time.time() // 300) * 300
    write_clock(clock, base + 10)
    r = cli("jobs", "add", "budgeted", "--cron", "*/5 * * * *", "--prompt", "Check the milk.", "--token-cap", "100",
            env=env)
    assert r.returncode == 0, r.stderr

    with LiveService(home, env) as s:
        # The job's first run crosses its own cap at step 1 and stops at the next step boundary.
        write_clock(clock, base + 300)
        job_turn = wait_for(lambda: s.get("/api/jobs")[0]["last_turn"], what="the job's run")
        t = s.wait_turn(job_turn)
        assert t["status"] == "budget" and "job token cap" in t["budget"] and t["usage"]["steps"] == 1
        assert t["usage"]["tokens"] == 150

        # The next fire: over its daily cap → postponed to the next day (midnight, caps.timezone), no turn.
        write_clock(clock, base + 601)
        job = wait_for(lambda: (lambda j: j if j["postponed_by"] else None)(s.get("/api/jobs")[0]),
                       what="the postponement")
        assert job["postponed_by"] == "job token cap" and job["tokens_today"] == 150 and job["token_cap"] == 100
        assert ts(job["next_run"]) == next_utc_midnight(base + 601)
        time.sleep(0.6)
        assert s.count("turns", "job_id = ?", (job["id"],)) == 1
        [note] = cap_notices(s)
        assert "'budgeted' is over its daily token cap" in note and "postponed" in note
        # Running it by hand is refused too, and leaves no queued turn behind.
        r = cli("jobs", "run", "budgeted", env=env)
        assert r.returncode == 1 and "not started: the job token cap" in r.stderr
        assert s.count("turns", "job_id = ?", (job["id"],)) == 1
        assert s.count("turns", "status = 'queued'") == 0

        # A chat turn crosses the daily cap (150 + 150 = 300) at step 1 and stops at its next step.
        t = s.post("/api/turns", {"message": "what about milk?"})
        assert t["status"] == "budget" and "daily token cap" in t["budget"] and t["usage"]["steps"] == 1
        st = s.get("/api/status")
        assert (st["paused"], st["paused_reason"]) == (True, "daily token cap")
        assert ts(st["paused_until"]) in (next_utc_midnight(time.time() - 5), next_utc_midnight(time.time()))
        assert st["tokens_today"] == 300
        cli_st = cli.json("status", "--json")
        assert (cli_st["paused"], cli_st["paused_reason"], cli_st["paused_until"]) == (True, "daily token cap",
                                                                                       st["paused_until"])
        # New chat turns wait, and the person is told once.
        q = s.post("/api/turns", {"message": "and now?"})
        assert q["status"] == "queued" and q["queued_reason"] == "daily token cap"
        s.post("/api/turns", {"message": "and now, again?"})
        time.sleep(0.6)
        notices = cap_notices(s)
        assert len(notices) == 2 and "daily token cap" in notices[1]

        # Another job that comes due is postponed by the global cap too (no new notice: same pause).
        assert cli("jobs", "add", "other", "--cron", "*/5 * * * *", "--prompt", "Other.", env=env).returncode == 0
        write_clock(clock, base + 901)
        other = wait_for(lambda: [j for j in s.get("/api/jobs") if j["name"] == "other" and j["postponed_by"]],
                         what="the second job's postponement")[0]
        assert other["postponed_by"] == "daily token cap" and other["last_turn"] is None
        assert ts(other["next_run"]) == next_utc_midnight(base + 901)
        assert len(cap_notices(s)) == 2


def test_a_job_turn_refused_by_its_own_cap_does_not_announce_a_global_pause(home):
    """A job's own token cap concerns that job: no "Palui is paused" notice, status not paused."""
    from palui.runner import caps
    from palui.service import Service
    from palui.triggers import jobs as jobs_mod

    svc = Service()
    svc.jobs.add("small", "@daily", "Check things.", token_cap=10)
    job = jobs_mod.get(svc.db, "small")
    caps.record_usage(svc.db, turn_id="earlier", job_id=job.id, tokens=10, tz=caps.zone(None))
    tid = svc.jobs.start_turn(job)
    got = svc.turns.claim(tid)
    assert (got.claimed, got.cap) == (False, "job token cap")
    assert [m for m in svc.notifier.inbox() if m["kind"] == "cap"] == []
    assert svc.status.get()["paused"] is False
    # A chat turn is not held back by the job's cap.
    assert svc.turns.claim(svc.turns.start("hello")).claimed
    svc.db.close()

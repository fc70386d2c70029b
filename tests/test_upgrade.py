"""A home made by an older Palui opens with today's code, and its paused turns resume (spec §4, §7, §10).

``tests/fixtures/home-v31/home`` was written by commit dd00543 (schema migration 31) with
``tests/support/make_upgrade_home.py`` (its docstring says how to make another one): a finished chat
turn, a job run, a summarised webhook delivery, memories, a task, the audit chain, and two chat turns
paused mid-way, one on an approval (the destructive ``recall__forget_memory``, with a
``tasks__create_task`` of the same model response held behind it) and one on an MCP server's
question asked the 2026-07-28 way (a stored question and a sealed request state).

Each test copies the fixture into a fresh PALUI_HOME and uses it through the command line in a
subprocess, as the person would after an upgrade: the first command applies the migrations; the
approval and the question are answered and their turns end ``done`` with the call's result; the
audit chain, old rows and new, verifies; what was stored is still listed.

The fixture is portable (see the generator): the model is ``@upgrade``, whose base URL this test
sets to a fake provider through ``PALUI_MODELS__UPGRADE__BASE_URL``; the MCP server is the bare
command ``books-mcp`` in the home's ``bin/``, found on ``PATH``. Approvals, questions and the
server's request state were stored to expire centuries after the fixture was made; an expiry is now read
as at most 30 days after its row was made, so each test moves the pending rows to a minute ago
(:func:`old_home`) and does not depend on the date it runs.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import sys
import time
from pathlib import Path

import pytest

from support.fake_llm import FakeLLM

pytestmark = pytest.mark.slow
FIXTURE = Path(__file__).resolve().parent / "fixtures" / "home-v31"
MADE = json.loads((FIXTURE / "fixture.json").read_text(encoding="utf-8"))
BOOKED = 'book_table(Friday): accept {"confirm": true, "party_size": 4, "seating": "inside"}'


def migrations_applied(home: Path) -> set[int]:
    """The schema migrations recorded in the home's database (read without writing anything)."""
    con = sqlite3.connect(f"file:{home / 'palui.db'}?mode=ro", uri=True)
    try:
        return {n for (n,) in con.execute("SELECT number FROM schema_migrations")}
    finally:
        con.close()


#: The fixture's expiry settings (10,000,000,000 s) are past today's range (at most 30 days, spec §10.4): a
#: person upgrading such a home is told to change them (test below), and these tests set the top of the range.
IN_RANGE_EXPIRIES = "[approvals]\nchat_expiry_seconds = 2592000\njob_expiry_seconds = 2592000\n"


def copy_fixture(home: Path) -> Path:
    shutil.copytree(FIXTURE / "home", home, dirs_exist_ok=True)
    return home


@pytest.fixture
def old_home(home) -> Path:
    """The fixture's home copied into this test's PALUI_HOME (the ``bin/`` server keeps its mode), its expiry
    settings brought into range, and its pending approval and question moved to a minute ago: a stored expiry
    is read as at most 30 days after the row was made (spec §10.4), so the rows keep their stored expiries
    but were made recently, and the test does not depend on the date it runs."""
    copy_fixture(home)
    toml = (home / "palui.toml").read_text()
    head, _, tail = toml.partition("[approvals]")
    (home / "palui.toml").write_text(head + IN_RANGE_EXPIRIES + tail.split("\n\n", 1)[1])
    con = sqlite3.connect(home / "palui.db")
    try:
        with con:
            made = time.time() - 60
            for table in ("approvals", "elicitations"):
                con.execute(f"UPDATE {table} SET expires_at = expires_at - created_at + ?, created_at = ?"
                            " WHERE status = 'pending'", (made, made))
    finally:
        con.close()
    return home


def test_an_old_expiry_setting_past_the_range_is_refused_naming_the_key(home, cli):
    copy_fixture(home)
    r = cli("status")
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert "key 'approvals.chat_expiry_seconds': must be greater than 0 and at most 2,592,000 seconds" in r.stderr


@pytest.fixture
def fake():
    with FakeLLM() as f:
        yield f


@pytest.fixture
def palui(old_home, cli, fake):
    """``palui ARGS`` over the old home with the fake provider as the ``@upgrade`` model's base URL, and
    the home's ``bin/`` (its MCP server) and this Python (with the ``mcp`` SDK) first on ``PATH``."""
    path = os.pathsep.join([str(old_home / "bin"), str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    env = {"PALUI_MODELS__UPGRADE__BASE_URL": fake.openai_url, "PATH": path}

    def run(*args: str, **kw):
        return cli(*args, env=env, **kw)

    def as_json(*args: str):
        r = run(*args)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)

    run.json = as_json
    return run


def audit_intact(palui) -> str:
    r = palui("audit", "verify")
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.startswith("audit chain intact:"), r.stdout
    return r.stdout


def test_the_old_home_opens_and_keeps_what_it_stored(old_home, palui):
    from palui.store.migrations import MIGRATIONS

    assert MADE["schema"] == 31 and max(migrations_applied(old_home)) == MADE["schema"]
    memories = palui.json("memories", "list", "--json")  # the first command opens the home
    assert migrations_applied(old_home) == {number for number, _, _ in MIGRATIONS}
    assert sorted(m["text"] for m in memories) == ["buys milk on Fridays", "locker code 4711"]
    assert [t["title"] for t in palui.json("tasks", "list", "--json")] == ["water the plants"]
    [job] = palui.json("jobs", "list", "--json")
    assert (job["name"], job["cron"], job["last_status"]) == ("morning", "0 8 * * *", "done")
    [hook] = palui.json("webhooks", "list", "--json")
    # (deliveries_24h and last_delivery count the last day only: a fixture from years ago shows none)
    assert hook["name"] == "github" and hook["url"].endswith(f"/hooks/{hook['id']}")
    origins = sorted(c["origin"] for c in palui.json("conversations", "list", "--json"))
    assert origins == ["chat", "chat", "job", "webhook"]
    [books] = [c for c in palui.json("connectors", "list", "--json") if c["id"] == "mcp-books"]
    assert books["config"]["command"] == "books-mcp"
    assert "5 row(s)" in audit_intact(palui)
    # The person is told once that body-only webhook deliveries are now remembered for retention.days.
    told = [m for m in palui.json("inbox", "--json") if "Only a signed timestamp bounds replay" in m["text"]]
    assert len(told) == 1


def test_an_upgraded_audit_emptied_with_its_head_file_does_not_verify(old_home, palui):
    audit_intact(palui)  # the first command fills the audit's state from the rows the home had
    con = sqlite3.connect(old_home / "palui.db")
    with con:
        con.execute("DELETE FROM audit")
    con.close()
    (old_home / "audit_head").unlink()
    r = palui("audit", "verify")
    assert r.returncode == 1
    assert "audit log empty but" in r.stderr and "the audit counted 5 row(s)" in r.stderr


def test_an_approval_stored_by_the_old_palui_resumes_its_turn(old_home, palui, fake):
    paused = MADE["approval"]
    [a] = palui.json("approvals", "list", "--json")
    assert (a["id"], a["turn"], a["status"]) == (paused["approval"], paused["turn"], "pending")
    assert (a["tool"], a["args"]) == ("recall__forget_memory", {"id": paused["memory"]})
    fake.text("Forgot the locker code and added a task to get a new one.")

    r = palui("approvals", "approve", a["id"], "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert (out["status"], out["turn"]) == ("done", paused["turn"]), out
    assert out["answer"] == "Forgot the locker code and added a task to get a new one."
    forgot = f"Forgot memory [{paused['memory']}] locker code 4711"
    created = "Created task [2] (open) get a new locker code"
    made = [(e["tool"], e["result"], e["is_error"]) for e in out["events"] if e["type"] == "tool_call"]
    assert made == [("recall__forget_memory", forgot, False), ("tasks__create_task", created, False)], out["events"]
    # The model was sent the conversation as the old Palui stored it (the earlier turn's three
    # results), then both results of the paused response, in order.
    [request] = fake.requests
    assert [(x["id"], x["content"]) for x in request.tool_results] == [
        ("call_2_0", "Saved memory [1]."), ("call_2_1", "Saved memory [2]."),
        ("call_2_2", "Created task [1] (open) water the plants"),
        (a["tool_call_id"], forgot), ("call_8_1", created)]
    assert [m["text"] for m in palui.json("memories", "list", "--json")] == ["buys milk on Fridays"]
    tasks = sorted(t["title"] for t in palui.json("tasks", "list", "--json"))
    assert tasks == ["get a new locker code", "water the plants"]
    assert palui.json("approvals", "list", "--json") == []
    assert "7 row(s)" in audit_intact(palui)


def test_a_question_stored_by_the_old_palui_resumes_its_turn(old_home, palui, fake):
    paused = MADE["question"]
    [q] = palui.json("elicitations", "list", "--json")
    assert (q["id"], q["turn"], q["status"]) == (paused["question"], paused["turn"], "pending")
    assert (q["tool"], q["fields"]) == ("mcp-books__book_table", ["confirm", "party_size", "seating"])
    fake.text("Booked for four on Friday.")

    r = palui("elicitations", "answer", q["id"], "confirm=yes", "party_size=4", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert (out["status"], out["turn"], out["answer"]) == ("done", paused["turn"], "Booked for four on Friday."), out
    [call] = [e for e in out["events"] if e["type"] == "tool_call"]
    assert (call["tool"], call["result"]) == ("mcp-books__book_table", BOOKED)
    [request] = fake.requests
    assert [x["content"] for x in request.tool_results] == [BOOKED]
    [q] = palui.json("elicitations", "list", "--all", "--json")
    assert (q["status"], q["answered_via"]) == ("accepted", "cli")
    booked = [x["outcome"] for x in palui.json("audit", "--json") if x["tool"] == "mcp-books__book_table"]
    assert booked == ["elicitation accept (fields: confirm, party_size, seating)", "ok"]
    assert "7 row(s)" in audit_intact(palui)

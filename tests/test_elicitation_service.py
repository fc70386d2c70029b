"""A server's question to the person, through the service API, both protocol eras (spec §7.8).

Our two SDK-built test servers over stdio: ``support/elicit_old.py`` asks with ``ctx.elicit`` inside
the open call (2025-11-25), ``support/elicit_new.py`` with resolvers, answered by ``input_required``
results (2026-07-28). Turns run in this process with a ``script:`` model; the person answers through
``svc.elicitations.answer`` (the one door). Shown: answer, decline, cancel, expiry (a decline), the
turn's clock and the call's timeout stopped while the question waits, a malformed (nested) schema
and too many questions declined without asking, the audit keeping the action and the field names but
never a value, a job turn's question waiting with the job expiry, URL mode declined in a job, and
``/deny ID`` on a question.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from palui.errors import ApprovalError, UsageError
from palui.text.mcp_config import ServerConfig
from palui.types import Origin
from support.scripts import call, calls, text, write_script

pytestmark = pytest.mark.mcp_in_process
SUPPORT = Path(__file__).resolve().parent / "support"
STATE_KEY = "11" * 32


@pytest.fixture
def make_svc(home, monkeypatch):
    made = []

    def make(**env: str):
        from support.inprocess import service

        for k, v in env.items():
            monkeypatch.setenv(k, v)
        s = service()
        made.append(s)
        return s

    yield make
    for s in made:
        s.db.close()


async def add(svc, name: str, server: str, *args: str) -> str:
    r = await svc.connectors.add_async(name, ServerConfig("stdio", command=sys.executable,
                                                          args=(str(SUPPORT / server), *args)))
    svc.tools.set_enabled([t.name for t in svc.tools.list(r["id"])], True)
    svc.tools.set_trusted(r["id"])  # its results do not taint: the next write of a test runs instead of asking
    return r["id"]


async def wait_question(svc, status: str = "pending", n: int = 1, timeout: float = 20.0) -> list[dict]:
    for _ in range(int(timeout / 0.05)):
        qs = svc.elicitations.list(status)
        if len(qs) >= n:
            return qs
        await asyncio.sleep(0.05)
    raise AssertionError(f"no {n} question(s) {status} after {timeout} s: {svc.elicitations.list(None)}")


def tool_result(r: dict, tool: str) -> str:
    [e] = [e for e in r["events"] if e["type"] == "tool_call" and e["tool"] == tool]
    return e["result"]


# -- the older era: the question waits inside the open call -------------------------------------------


@pytest.mark.slow
async def test_old_era_answer_with_both_clocks_stopped(make_svc, tmp_path):
    # Margins that hold on a loaded machine: the server is started before the turn (a lazy start inside the
    # call would count its seconds against both clocks), and the clocks are long enough for the call to reach
    # the question under load; the wait below is longer than both.
    svc = make_svc(PALUI_BUDGETS__SECONDS="8", PALUI_MCP__CALL_TIMEOUT_SECONDS="6")
    cid = await add(svc, "old", "elicit_old.py")
    await svc._hub.get(cid)
    model = write_script(tmp_path / "s.json", calls(call(f"{cid}__book_table", date="Friday")), text("Booked."))
    turn = asyncio.create_task(svc.turns.send("book a table", model=model))
    [q] = await wait_question(svc)
    assert (q["era"], q["mode"], q["message"], q["fields"]) == (
        "in_call", "form", "Book a table for Friday?", ["confirm", "party_size", "seating", "note"])
    assert q["tool"] == f"{cid}__book_table" and q["conversation"]
    notices = [n for n in svc.notifier.inbox() if n["kind"] == "elicitation"]
    assert len(notices) == 1 and f"/answer {q['id']} confirm=…" in notices[0]["text"]
    assert "In the server's words:" in notices[0]["text"]
    await asyncio.sleep(9)  # longer than the turn's budget and the call's timeout: neither runs meanwhile
    with pytest.raises(UsageError, match="'confirm' is required"):
        svc.elicitations.answer(q["id"], "accept", {"party_size": 4}, "api")
    with pytest.raises(UsageError, match="'party_size' is out of range"):
        svc.elicitations.answer(q["id"], "accept", {"confirm": True, "party_size": 40}, "api")
    a = svc.elicitations.answer(q["id"], "accept", {"confirm": True, "party_size": 4}, "api")
    assert (a["status"], a["answered_via"]) == ("accepted", "api")
    r = await turn
    assert r["status"] == "done", r
    result = tool_result(r, f"{cid}__book_table")
    assert 'accept {"confirm": true, "note": null, "party_size": 4, "seating": "inside"}' in result
    assert r["usage"]["seconds"] < 8  # within the budget: the 9 s wait was not counted
    with pytest.raises(ApprovalError, match="already accepted"):
        svc.elicitations.answer(q["id"], "decline", None, "api")
    # The audit keeps the action and the field names, never a value.
    rows = [x for x in svc.audit.rows() if x["outcome"].startswith("elicitation")]
    assert [x["outcome"] for x in rows] == ["elicitation accept (fields: confirm, party_size, seating)"]
    assert rows[0]["reason"] == f"question {q['id']} from {cid} (form)"
    assert "terrace" not in json.dumps(svc.audit.rows()) and "inside" not in json.dumps(svc.audit.rows())
    stored = svc.db.one("SELECT content_json FROM elicitations WHERE id = ?", (q["id"],))
    assert stored["content_json"] is None  # the answer went to the server; no value is kept
    await svc.close()


async def test_answers_to_formatted_fields_are_checked(make_svc, tmp_path):
    # MCP's requested schema gives string fields a format (email, uri, date, date-time): an answer that is not
    # one is refused naming the field and the shape, never the value, and the question still waits.
    svc = make_svc()
    cid = await add(svc, "old", "elicit_old.py")
    model = write_script(tmp_path / "s.json", calls(call(f"{cid}__contact_form")), text("Noted."))
    turn = asyncio.create_task(svc.turns.send("how do you reach me", model=model))
    [q] = await wait_question(svc)
    good = {"email": "ana@example.org", "homepage": "https://example.org/ana", "day": "2024-02-29",
            "at": "2024-02-29T18:30:00+01:00"}
    for field, bad, shape in [("email", "ana at example", "an email address"),
                              ("homepage", "not a uri", "an absolute URI"),
                              ("day", "2023-02-29", "a date"), ("at", "2024-02-29 18:30", "a date and time")]:
        with pytest.raises(UsageError, match=f"'{field}' must be {shape}") as refused:
            svc.elicitations.answer(q["id"], "accept", {**good, field: bad}, "api")
        assert bad not in str(refused.value)
    assert [x["id"] for x in svc.elicitations.list("pending")] == [q["id"]]
    svc.elicitations.answer(q["id"], "accept", good, "api")
    r = await turn
    assert r["status"] == "done", r
    assert tool_result(r, f"{cid}__contact_form") == "contact_form: accept " + json.dumps(good, sort_keys=True)
    await svc.close()


@pytest.mark.slow
async def test_old_era_over_http_waits_past_the_call_timeout_and_the_notice_names_it(make_svc, tmp_path):
    import subprocess

    svc = make_svc(PALUI_MCP__CALL_TIMEOUT_SECONDS="5")  # time for the call to reach the question under load
    server = subprocess.Popen([sys.executable, str(SUPPORT / "elicit_old.py"), "--http"], stdout=subprocess.PIPE,
                              text=True)
    try:
        port = server.stdout.readline().split()[1]  # type: ignore[union-attr]  # PIPE: stdout is set
        r = await svc.connectors.add_async("old-http", ServerConfig("http", url=f"http://127.0.0.1:{port}/mcp"))
        cid = r["id"]
        svc.tools.set_enabled([t.name for t in svc.tools.list(cid)], True)
        svc.tools.set_trusted(cid)
        notices = []
        svc.notifier.subscribe(notices.append)
        model = write_script(tmp_path / "s.json", calls(call(f"{cid}__book_table", date="Friday")), text("ok"))
        await svc._hub.get(cid)  # connected before the turn: the call's clock covers the call alone
        turn = asyncio.create_task(svc.turns.send("book", model=model))
        [q] = await wait_question(svc)
        [n] = [n for n in notices if n.kind == "elicitation"]
        assert n.elicitation_id == q["id"] and q["id"] in n.text  # a channel gets the id for its buttons
        await asyncio.sleep(6)  # past the call's timeout: it does not run while the question waits
        svc.elicitations.answer(q["id"], "accept", {"confirm": False}, "api")
        r = await turn
        assert tool_result(r, f"{cid}__book_table").startswith('book_table(Friday): accept {"confirm": false')
        await svc.close()
    finally:
        server.terminate()
        server.wait(10)


@pytest.mark.slow
@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_old_era_decline_and_cancel(make_svc, tmp_path, action):
    svc = make_svc()
    cid = await add(svc, "old", "elicit_old.py")
    model = write_script(tmp_path / "s.json", calls(call(f"{cid}__book_table", date="Sunday")), text("ok"))
    turn = asyncio.create_task(svc.turns.send("book", model=model))
    [q] = await wait_question(svc)
    svc.elicitations.answer(q["id"], action, None, "web")
    r = await turn
    assert tool_result(r, f"{cid}__book_table") == f"book_table(Sunday): {action}"
    await svc.close()


@pytest.mark.slow
async def test_old_era_expiry_is_a_decline(make_svc, tmp_path):
    svc = make_svc(PALUI_APPROVALS__CHAT_EXPIRY_SECONDS="1")
    cid = await add(svc, "old", "elicit_old.py")
    model = write_script(tmp_path / "s.json", calls(call(f"{cid}__book_table", date="Monday")), text("ok"))
    r = await svc.turns.send("book", model=model)
    assert tool_result(r, f"{cid}__book_table") == "book_table(Monday): decline"
    [q] = svc.elicitations.list(None)
    assert q["status"] == "expired" and q["action"] == "decline"
    with pytest.raises(ApprovalError, match="expired"):
        svc.elicitations.answer(q["id"], "accept", {"confirm": True}, "api")
    await svc.close()


@pytest.mark.slow
async def test_old_era_malformed_and_too_many_are_declined_without_asking(make_svc, tmp_path):
    svc = make_svc()
    cid = await add(svc, "old", "elicit_old.py")
    model = write_script(tmp_path / "s.json", calls(call(f"{cid}__nested_schema")),
                         calls(call(f"{cid}__ask_many", count=4)), text("ok"))
    turn = asyncio.create_task(svc.turns.send("go", model=model))
    for i in range(3):  # three questions reach the person, one after the other
        [q] = await wait_question(svc)
        assert q["message"] == f"Question {i + 1} of 4"
        svc.elicitations.answer(q["id"], "accept", {"value": "Ada"}, "api")
        for _ in range(200):
            if not svc.elicitations.list("pending"):
                break
            await asyncio.sleep(0.02)
    r = await turn
    assert tool_result(r, f"{cid}__nested_schema") == "nested_schema: decline"
    assert tool_result(r, f"{cid}__ask_many").endswith('accept {"value": "Ada"}; decline')
    declined = {q["message"]: q["reason"] for q in svc.elicitations.list("declined")}
    assert "field 'address' has type 'object'" in declined["Where do you live?"]
    assert "more than 3 questions in one call" in declined["Question 4 of 4"]
    assert len([n for n in svc.notifier.inbox() if n["kind"] == "elicitation"]) == 3  # never told of the declined ones
    assert "Ada" not in json.dumps(svc.audit.rows())
    await svc.close()


@pytest.mark.slow
async def test_deny_command_declines_a_question(make_svc, tmp_path):
    svc = make_svc()
    cid = await add(svc, "old", "elicit_old.py")
    model = write_script(tmp_path / "s.json", calls(call(f"{cid}__book_table", date="Friday")), text("ok"))
    turn = asyncio.create_task(svc.turns.send("book", model=model))
    [q] = await wait_question(svc)
    with pytest.raises(UsageError, match="/answer"):
        svc.approvals.answer(q["id"], True, "telegram")
    assert svc.approvals.answer(q["id"], False, "telegram")["status"] == "declined"
    assert tool_result(await turn, f"{cid}__book_table") == "book_table(Friday): decline"
    await svc.close()


@pytest.mark.slow
async def test_stop_cancels_a_waiting_question(make_svc, tmp_path):
    svc = make_svc()
    cid = await add(svc, "old", "elicit_old.py")
    model = write_script(tmp_path / "s.json", calls(call(f"{cid}__book_table", date="Friday")), text("ok"))
    turn = asyncio.create_task(svc.turns.send("book", model=model))
    [q] = await wait_question(svc)
    svc.turns.stop(conversation=q["conversation"])
    r = await turn
    assert r["status"] == "stopped"
    assert svc.elicitations.get(q["id"])["status"] == "cancelled"
    await svc.close()


# -- 2026-07-28: the turn pauses; the call is sent again with the answers -----------------------------


@pytest.mark.slow
async def test_new_era_answer_resumes_the_turn(make_svc, tmp_path):
    svc = make_svc()
    cid = await add(svc, "new", "elicit_new.py", "--state-key", STATE_KEY)
    model = write_script(tmp_path / "s.json", calls(call(f"{cid}__book_table", date="Saturday")), text("Booked."))
    r = await svc.turns.send("book", model=model)
    assert r["status"] == "awaiting_approval"
    [q] = r["pending_elicitations"]
    assert (q["era"], q["fields"]) == ("input_required", ["confirm", "party_size", "seating", "note"])
    assert svc.status.get()["pending_elicitations"] == 1
    svc.elicitations.answer(q["id"], "accept", {"confirm": True, "party_size": 6, "seating": "terrace"}, "api")
    r = await svc.turns.resume(r["turn"])
    assert r["status"] == "done", r
    assert tool_result(r, f"{cid}__book_table") == (
        'book_table(Saturday): accept {"confirm": true, "note": null, "party_size": 6, "seating": "terrace"}')
    await svc.close()


@pytest.mark.slow
@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_new_era_decline_and_cancel(make_svc, tmp_path, action):
    svc = make_svc()
    cid = await add(svc, "new", "elicit_new.py")
    model = write_script(tmp_path / "s.json", calls(call(f"{cid}__book_table", date="Saturday")), text("ok"))
    r = await svc.turns.send("book", model=model)
    [q] = r["pending_elicitations"]
    r = await svc.elicitations.answer_and_resume(q["id"], action, None, "cli")
    assert tool_result(r, f"{cid}__book_table") == f"book_table(Saturday): {action}"
    await svc.close()


@pytest.mark.slow
async def test_new_era_two_rounds_and_expiry(make_svc, tmp_path):
    svc = make_svc(PALUI_APPROVALS__CHAT_EXPIRY_SECONDS="2")
    cid = await add(svc, "new", "elicit_new.py")
    model = write_script(tmp_path / "s.json", calls(call(f"{cid}__two_step")), text("ok"))
    r = await svc.turns.send("go", model=model)
    [q1] = r["pending_elicitations"]
    assert q1["message"] == "What name should the booking be under?"
    r = await svc.elicitations.answer_and_resume(q1["id"], "accept", {"value": "Ada"}, "cli")
    assert r["status"] == "awaiting_approval"
    [q2] = r["pending_elicitations"]
    assert (q2["message"], q2["round"]) == ("Book under the name 'Ada'?", 2)
    await asyncio.sleep(2.2)  # nobody answers: expiry is a decline
    [r] = await svc.turns.resume_ready()
    assert tool_result(r, f"{cid}__two_step") == "two_step: decline"
    assert svc.elicitations.get(q2["id"])["status"] == "expired"
    await svc.close()


@pytest.mark.slow
async def test_new_era_malformed_and_too_many_are_declined_at_once(make_svc, tmp_path):
    svc = make_svc()
    cid = await add(svc, "new", "elicit_new.py")
    model = write_script(tmp_path / "s.json", calls(call(f"{cid}__nested_schema"), call(f"{cid}__ask_four")),
                         calls(call(f"{cid}__ask_three")), text("ok"))
    r = await svc.turns.send("go", model=model)
    # nested: declined; four questions in one call: every one declined; neither waits for the person
    assert tool_result(r, f"{cid}__nested_schema") == "nested_schema: decline"
    assert tool_result(r, f"{cid}__ask_four") == "ask_four: decline; decline; decline; decline"
    assert r["status"] == "awaiting_approval"
    assert len(r["pending_elicitations"]) == 3  # three questions are the limit: asked
    for q in r["pending_elicitations"]:
        svc.elicitations.answer(q["id"], "accept", {"value": "Ada"}, "api")
    r = await svc.turns.resume(r["turn"])
    assert tool_result(r, f"{cid}__ask_three").count("accept") == 3
    assert len([n for n in svc.notifier.inbox() if n["kind"] == "elicitation"]) == 3
    await svc.close()


# -- a job turn --------------------------------------------------------------------------------------------


@pytest.mark.slow
async def test_job_turn_waits_with_the_job_expiry_and_declines_url_mode(make_svc, tmp_path):
    svc = make_svc(PALUI_APPROVALS__JOB_EXPIRY_SECONDS="7200")
    old = await add(svc, "old", "elicit_old.py")
    new = await add(svc, "new", "elicit_new.py")
    for name in (f"{old}__open_link", f"{new}__book_table"):
        svc.tools.set_class(name, "read")  # a write would wait for an approval in a job
    model = write_script(tmp_path / "s.json",
                         calls(call(f"{old}__open_link", url="https://accounts.example.com/link?x=1")),
                         calls(call(f"{new}__book_table", date="Tuesday")), text("done"))
    tid = svc.turns.start("nightly", origin=Origin.JOB, model=model)
    r = await svc.turns.run(tid)
    assert tool_result(r, f"{old}__open_link").startswith("open_link: decline")
    [url_q] = svc.elicitations.list("declined")
    assert url_q["mode"] == "url" and "job turn" in url_q["reason"]
    assert r["status"] == "awaiting_approval"  # the form waits like a write approval in a job
    [q] = r["pending_elicitations"]
    assert q["origin"] == "job"
    from datetime import datetime

    left = datetime.fromisoformat(q["expires_at"]).timestamp() - datetime.fromisoformat(q["created_at"]).timestamp()
    assert left == pytest.approx(7200, abs=1)
    svc.elicitations.answer(q["id"], "accept", {"confirm": True}, "api")
    r = await svc.turns.resume(tid)
    assert r["status"] == "done" and "accept" in tool_result(r, f"{new}__book_table")
    await svc.close()
